# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""Result handling shared by the benchmarks: tuning curves, Markdown tables, PNG plots."""
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence


@dataclass
class Curve:
    """Best GFLOPS found so far after each measurement of one tuning run."""

    method: str
    task: str
    repeat: int
    measurements: List[int] = field(default_factory=list)
    seconds: List[float] = field(default_factory=list)
    best_gflops: List[float] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    def record(self, gflops: float) -> None:
        """Add one measurement (0 GFLOPS for a failed one)."""
        best = max(gflops, self.best_gflops[-1] if self.best_gflops else 0.0)
        self.measurements.append(len(self.measurements) + 1)
        self.seconds.append(time.time() - self.started)
        self.best_gflops.append(best)

    @property
    def final(self) -> float:
        return self.best_gflops[-1] if self.best_gflops else 0.0

    def first_reaching(self, gflops: float) -> Optional[int]:
        """Index (0-based) of the first measurement whose best reaches ``gflops``."""
        for index, value in enumerate(self.best_gflops):
            if value >= gflops:
                return index
        return None

    def best_at(self, measurements: int) -> float:
        """Best GFLOPS after ``measurements`` measurements (the final best past the end)."""
        if not self.best_gflops:
            return 0.0
        return self.best_gflops[min(measurements, len(self.best_gflops)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def plot_curves(path: Path, title: str, curves: Sequence[Curve]) -> Optional[Path]:
    """Best GFLOPS against measurements, one colour per method (thin: repeats, thick: median)."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(7, 4.5))
    methods: Dict[str, List[Curve]] = {}
    for curve in curves:
        methods.setdefault(curve.method, []).append(curve)
    for colour, (method, runs) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], methods.items()):
        for run in runs:
            axes.plot(run.measurements, run.best_gflops, color=colour, alpha=0.25, linewidth=1)
        longest = max(len(run.best_gflops) for run in runs)
        steps = list(range(1, longest + 1))
        axes.plot(
            steps,
            [median([run.best_at(step) for run in runs]) for step in steps],
            color=colour,
            linewidth=2.2,
            label=f"{method} (median of {len(runs)})",
        )
    axes.set_xlabel("measurements")
    axes.set_ylabel("best GFLOPS so far")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def save_curves(path: Path, curves: Sequence[Curve]) -> None:
    """Raw curves as JSON, next to the tables and plots."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(curve) for curve in curves], indent=1))


def comparison_table(
    methods: Sequence[str],
    kernel_seconds: Dict[str, List[float]],
    tuning_seconds: Dict[str, List[float]],
    wrong_outputs: Dict[str, int],
    flop: float,
    numpy_seconds: float,
    reference: str,
) -> str:
    """Markdown table of tuned kernels and tuning times, against ``reference`` and numpy."""
    baseline = median(kernel_seconds[reference])
    rows = []
    for method in methods:
        kernel = median(kernel_seconds[method])
        rows.append(
            [
                method,
                kernel * 1e3,
                flop / kernel / 1e9,
                baseline / kernel,
                median(tuning_seconds[method]),
                median(tuning_seconds[reference]) / median(tuning_seconds[method]),
                numpy_seconds / kernel,
                wrong_outputs[method],
            ]
        )
    headers = [
        "method",
        "kernel ms (median)",
        "GFLOPS",
        f"speed vs {reference}",
        "tuning seconds (median)",
        f"tuning time saved vs {reference}",
        "GFLOPS / numpy",
        "wrong outputs",
    ]
    return markdown_table(headers, rows)
