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
"""What the network benchmark records of each tuning method: checkpoints, tuning time, final build."""
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List

import numpy as np

from benchmarks.report import median


@dataclass
class Checkpoint:
    """End-to-end latency of the network compiled with the records of a method so far."""

    seconds: float
    measurements: int
    latency_ms: float


@dataclass
class MethodRun:
    """One tuning method on one network."""

    network: str
    method: str
    tuning_seconds: float = 0.0
    measurements: int = 0
    checkpoints: List[Checkpoint] = field(default_factory=list)
    notes: str = ""
    task_ms: List[float] = field(default_factory=list)
    """The best measured run time of each tuned task in the method's log (Ansor), in task order."""

    def branch(self, method: str, notes: str = "") -> "MethodRun":
        """A method that starts from this one's state: its time, measurements and checkpoints so far."""
        return MethodRun(
            self.network, method, self.tuning_seconds, self.measurements, list(self.checkpoints), notes
        )


@dataclass
class Compiled:
    """A compiled network: its output on the benchmark input and a timing closure (seconds)."""

    output: np.ndarray
    time_once: Callable[[], float]


def compiled_instances(compile_once: Callable[[], Compiled], count: int) -> Compiled:
    """``count`` compilations of one method's network, timed as one.

    Compiling the same records again gives an instance whose latency differs by
    about 1-3% (a MobileNetV2 database compiled four times: 13.90-14.07 ms); a
    method compiled once is one draw of that.  ``time_once`` of the result times
    every instance once, in turn, and returns their median.  The output is the
    first instance's when all agree exactly; an instance that computes another
    output raises.
    """
    instances = [compile_once() for _ in range(count)]
    first = instances[0]
    for position, instance in enumerate(instances[1:], start=2):
        if not np.array_equal(instance.output, first.output):
            raise RuntimeError(f"compilation {position} of the same records computes another output")
    if count == 1:
        return first
    return Compiled(first.output, lambda: median([instance.time_once() for instance in instances]))


class Clock:
    """Tuning time of one method: compile and timing at checkpoints are excluded."""

    def __init__(self, run: MethodRun):
        self.run = run
        self.started = None

    def __enter__(self):
        self.started = time.time()
        return self

    def __exit__(self, *exc):
        self.run.tuning_seconds += time.time() - self.started

    def checkpoint(self, measurements: int, compiled: Compiled, label: str = "") -> None:
        """Record the latency of ``compiled`` at the current tuning time.

        ``label`` names the method in the printed line when it is not the run's own: the
        first checkpoint of a long run is also the short run it branches into.
        """
        latency = median([compiled.time_once() for _ in range(3)]) * 1e3
        self.run.measurements = measurements
        self.run.checkpoints.append(Checkpoint(self.run.tuning_seconds, measurements, latency))
        print(
            f"  [{self.run.network} {label or self.run.method}] {measurements} measurements, "
            f"{self.run.tuning_seconds:.0f} s tuning: {latency:.2f} ms end to end",
            flush=True,
        )


def count_lines(path: Path) -> int:
    """Records in a tuning log or JSON database (one per line); 0 when it does not exist."""
    if not path.is_file():
        return 0
    with open(path, encoding="utf-8") as records:
        return sum(1 for _ in records)
