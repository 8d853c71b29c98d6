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
"""Experiment 1 (TACO 2024): DropletTuner against AutoTVM's other tuners.

    python3 ci/tvm_env.py run legacy python benchmarks/autotvm_tuners.py [--quick]

For each task and each repeat, every tuner runs once with the same budget, in a
shuffled order (interleaved, so machine drift hits all tuners alike).  Reported
per tuner, as medians over repeats: measurements used, best GFLOPS at the full
budget and at Droplet's budget, measurements and wall time to reach 97% of the
best GFLOPS any tuner found, and the best kernel against numpy (OpenBLAS).
"""
import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvm
from tvm import autotvm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import workloads  # pylint: disable=wrong-import-position
from benchmarks.report import (  # pylint: disable=wrong-import-position
    Curve,
    markdown_table,
    median,
    plot_curves,
    save_curves,
)
from benchmarks.tuners import is_tuner_name, make_tuner, unknown_tuners_message  # pylint: disable=wrong-import-position

DEFAULT_TUNERS = "droplet,droplet-stop,xgb,ga,random,gridsearch"
REACH = 0.97


def make_task(name: str, target: str, quick: bool):
    """(task, numpy seconds) of a benchmark task."""
    if name == "matmul":
        shape = (128, 128, 128) if quick else (1000, 800, 700)
        return workloads.matmul_task(*shape, target), workloads.numpy_matmul_seconds(*shape)
    if name == "conv2d":
        spec = dict(workloads.RESNET18_CONV)
        if quick:
            spec.update(channels=16, filters=16, size=14)
        return workloads.conv2d_task(target, spec), workloads.numpy_conv2d_seconds(spec)
    raise SystemExit(f"unknown task {name!r}; choose from matmul, conv2d")


def curve_callback(curve: Curve, label: str):
    """An AutoTVM tuning callback that feeds ``curve`` and prints a line per batch."""

    def callback(tuner, inputs, results):
        for measure_input, result in zip(inputs, results):
            ok = result.error_no == 0 and result.costs
            seconds = float(np.mean(result.costs)) if ok else None
            curve.record(measure_input.task.flop / seconds / 1e9 if seconds else 0.0)
        print(
            f"  [{label}] {len(curve.measurements):4d} measurements, "
            f"best {curve.final:8.2f} GFLOPS, {curve.seconds[-1]:6.1f} s",
            flush=True,
        )

    return callback


def tune_once(task, method: str, budget: int, measure_option, repeat: int) -> Curve:
    curve = Curve(method=method, task=task.name, repeat=repeat)
    tuner = make_tuner(method, task, seed=repeat)
    with tempfile.TemporaryDirectory(prefix="bench-autotvm-") as workdir:
        tuner.tune(
            n_trial=min(budget, len(task.config_space)),
            early_stopping=None,
            measure_option=measure_option,
            callbacks=[
                curve_callback(curve, f"{task.name} {method} r{repeat}"),
                autotvm.callback.log_to_file(str(Path(workdir) / "log.json")),
            ],
        )
    return curve


def summarise(task_name: str, curves, numpy_seconds: float, flop: float, budget: int) -> str:
    best_any = max(curve.final for curve in curves)
    droplet = [curve for curve in curves if curve.method == "droplet"]
    droplet_budget = int(median([len(curve.measurements) for curve in droplet])) if droplet else budget
    numpy_gflops = flop / numpy_seconds / 1e9
    rows = []
    for method in dict.fromkeys(curve.method for curve in curves):
        runs = [curve for curve in curves if curve.method == method]
        reach = [curve.first_reaching(REACH * best_any) for curve in runs]
        reached = [(runs[i], index) for i, index in enumerate(reach) if index is not None]
        best = median([curve.final for curve in runs])
        rows.append(
            [
                method,
                median([len(curve.measurements) for curve in runs]),
                best,
                median([curve.best_at(droplet_budget) for curve in runs]),
                median([index + 1 for _, index in reached]) if reached else "-",
                median([curve.seconds[index] for curve, index in reached]) if reached else "-",
                f"{len(reached)}/{len(runs)}",
                median([curve.seconds[-1] for curve in runs]),
                best / numpy_gflops,
            ]
        )
    headers = [
        "tuner",
        "measurements (median)",
        f"best GFLOPS @ {budget}",
        f"best GFLOPS @ {droplet_budget} (Droplet's)",
        f"measurements to {REACH:.0%} of best",
        f"seconds to {REACH:.0%} of best",
        "runs reaching it",
        "tuning seconds",
        "best / numpy",
    ]
    text = (
        f"### {task_name}\n\nBest GFLOPS found by any tuner: {best_any:.2f}; "
        f"numpy (OpenBLAS) on the same computation: {numpy_gflops:.2f} GFLOPS; "
        f"medians over {len(droplet) or 1} repeats.\n\n"
    )
    return text + markdown_table(headers, rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes and budget (CI smoke run)")
    parser.add_argument("--tasks", default="matmul,conv2d", help="comma-separated: matmul, conv2d")
    parser.add_argument("--tuners", default=DEFAULT_TUNERS, help="comma-separated tuner names")
    parser.add_argument("--budget", type=int, default=100, help="measurements per tuning run")
    parser.add_argument("--repeats", type=int, default=3, help="tuning runs per tuner and task")
    parser.add_argument("--number", type=int, default=2, help="runner: runs per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="runner: measurements per config")
    parser.add_argument("--min-repeat-ms", type=int, default=50, help="runner: min_repeat_ms")
    parser.add_argument(
        "--out",
        help="results folder (default: benchmarks/results/autotvm, or build/benchmarks-quick/ with --quick)",
    )
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.tuners, args.budget, args.repeats = "matmul,conv2d", "droplet,random", 8, 1
        args.min_repeat_ms = 0
    if args.out is None:
        args.out = "build/benchmarks-quick/autotvm" if args.quick else "benchmarks/results/autotvm"
    unknown = [name for name in args.tuners.split(",") if not is_tuner_name(name)]
    if unknown:
        raise SystemExit(unknown_tuners_message(unknown))
    target = workloads.host_target_string()
    out = Path(args.out)
    measure_option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=60),
        runner=autotvm.LocalRunner(
            number=args.number,
            repeat=args.repeat,
            min_repeat_ms=args.min_repeat_ms,
            timeout=60,
            enable_cpu_cache_flush=True,
        ),
    )
    print(f"TVM {tvm.__version__}, target {target}", flush=True)
    command = " ".join(sys.argv[1:])
    out.mkdir(parents=True, exist_ok=True)
    for task_name in args.tasks.split(","):
        task, numpy_seconds = make_task(task_name, target, args.quick)
        print(f"{task_name}: {len(task.config_space)} configurations", flush=True)
        curves = []
        for repeat in range(args.repeats):
            order = args.tuners.split(",")
            random.Random(repeat).shuffle(order)
            for method in order:
                curves.append(tune_once(task, method, args.budget, measure_option, repeat))
        save_curves(out / f"{task_name}_curves.json", curves)
        plot = plot_curves(out / f"{task_name}.png", f"AutoTVM tuners, {task_name}", curves)
        section = summarise(task_name, curves, numpy_seconds, task.flop, args.budget)
        if plot:
            section += f"\n![{task_name}]({plot.name})\n"
        print(section, flush=True)
        # One section per task, kept beside the others: a later run of other tasks adds its own.
        (out / f"{task_name}.md").write_text(
            f"{section}\n{time.strftime('%Y-%m-%d')}, TVM {tvm.__version__}, {target}; command: "
            f"`python3 ci/tvm_env.py run legacy python benchmarks/autotvm_tuners.py {command}`\n"
        )
        sections = [path.read_text() for path in sorted(out.glob("*.md")) if path.name != "README.md"]
        (out / "README.md").write_text("## AutoTVM tuners\n\n" + "\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
