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
"""Recorded landscapes of AutoTVM tasks: every config measured once, replayed many times.

A search strategy is judged by the kernels it finds for the measurements it
spends.  Measuring that directly is slow and noisy on a small shared machine,
and comparing two strategies needs many repeats.  A *landscape* measures each
configuration a strategy asks for once (building it in this process and timing
it with ``time_evaluator``), stores the costs in a JSON file, and answers every
later request for that configuration from the file.  Strategies replayed on the
same landscape see the same costs, so their differences are their own, and a
hundred seeded repeats cost seconds once the landscape is filled.

Replays are for comparing search strategies.  Claims about real tuning come
from the side-by-side benchmarks (``autotvm_tuners.py``, ``networks.py``).
"""
import json
import os
import time
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

import tvm
from tvm import autotvm

FAILED = None

BUILD_TIMEOUT = 10.0
"""Seconds a build may take, as AutoTVM's ``LocalBuilder`` default; slower builds fail."""


class Landscape:
    """Costs of the configurations of one AutoTVM task, measured on demand and kept.

    Parameters
    ----------
    task : autotvm.task.Task
        The task (its target names the CPU).
    path : str
        The JSON file of the recorded costs (created when missing).
    repeats : int
        Costs recorded per configuration (``time_evaluator`` repeats).
    min_repeat_ms : int
        Minimum duration of each repeat.
    measurable : bool
        Whether configurations missing from the file may be measured here (not
        when the file was recorded on another CPU).
    """

    def __init__(self, task, path: str, repeats: int = 3, min_repeat_ms: int = 40,
                 measurable: bool = True):
        self.task = task
        self.measurable = measurable
        self.path = path
        self.repeats = repeats
        self.min_repeat_ms = min_repeat_ms
        self.costs: Dict[int, Optional[List[float]]] = {}
        self.measured_now = 0
        if os.path.isfile(path):
            with open(path) as stream:
                saved = json.load(stream)
            if saved["workload"] != repr(task.workload) or saved["target"] != str(task.target):
                raise ValueError(f"{path} records another task or target")
            self.costs = {int(index): costs for index, costs in saved["costs"].items()}

    def save(self) -> None:
        """Write the recorded costs (atomically)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        payload = {
            "workload": repr(self.task.workload),
            "target": str(self.task.target),
            "configs": len(self.task.config_space),
            "repeats": self.repeats,
            "costs": {str(index): costs for index, costs in sorted(self.costs.items())},
        }
        with open(self.path + ".tmp", "w") as stream:
            json.dump(payload, stream)
        os.replace(self.path + ".tmp", self.path)

    def measure(self, index: int) -> Optional[List[float]]:
        """The costs of config ``index``: recorded, or measured now and recorded."""
        if index in self.costs:
            return self.costs[index]
        if not self.measurable:
            raise KeyError(f"config {index} is not recorded in {self.path}, and this CPU is not "
                           "the one it was recorded on")
        config = self.task.config_space.get(index)
        try:
            start = time.perf_counter()
            with self.task.target:
                schedule, args = self.task.instantiate(config)
                module = tvm.build(schedule, args, target=self.task.target)
            if time.perf_counter() - start > BUILD_TIMEOUT:
                raise TimeoutError("the build took longer than AutoTVM's default timeout")
            dev = tvm.cpu()
            arrays = [
                tvm.nd.array(np.zeros([int(d) for d in arg.shape], dtype=arg.dtype), dev)
                for arg in args
            ]
            timer = module.time_evaluator(
                module.entry_name, dev, number=1, repeat=self.repeats,
                min_repeat_ms=self.min_repeat_ms,
            )
            costs = [float(cost) for cost in timer(*arrays).results]
        except Exception:  # pylint: disable=broad-except
            costs = FAILED
        self.costs[index] = costs
        self.measured_now += 1
        if self.measured_now % 25 == 0:
            self.save()
        return costs

    def best_known(self) -> float:
        """The lowest mean cost recorded so far."""
        return min(float(np.mean(costs)) for costs in self.costs.values() if costs)


def runner_costs(
    repeat: Optional[int], resample: Optional[int] = None
) -> Callable[[List[float], int], List[float]]:
    """What AutoTVM's runner with ``repeat`` (1-3) reports of a config's recorded costs.

    Of more than two costs the runner keeps all but the largest and the smallest, so
    ``repeat=3`` (its default) reports the middle one; ``repeat=1`` the first, ``repeat=2``
    the first two.  None reports every recorded cost.

    With ``resample`` (a seed), each config is measured again, as it would be in another
    run: its costs are drawn from its recorded ones with replacement (as many as were
    recorded) before the runner's choice, by a generator seeded with ``resample`` and the
    config's index, so every tuner replayed with the same seed sees the same costs.  A
    replay's costs are otherwise the same in every seed, and a tuner that draws nothing at
    random walks the same path in every seed; resampled, the seeds repeat the noise too.
    The returned function takes a config's recorded costs and its index.
    """
    if repeat not in (None, 1, 2, 3):
        raise ValueError(f"a runner repeat of 1, 2 or 3 (or None for every cost), got {repeat!r}")

    def reported(costs: List[float], index: int) -> List[float]:
        if resample is not None:
            draw = np.random.default_rng([resample, index])
            costs = [float(cost) for cost in draw.choice(costs, size=len(costs))]
        if repeat is None:
            return list(costs)
        measured = list(costs[:repeat])
        return sorted(measured)[1:-1] if len(measured) > 2 else measured

    return reported


def replay(
    tuner,
    landscape: Landscape,
    n_trial: int,
    batch_size: int,
    reported: Callable[[List[float], int], List[float]] = runner_costs(None),
) -> List[float]:
    """Run ``tuner`` on ``landscape``; returns the best mean cost after each measurement.

    The tuner sees AutoTVM measure results, exactly as ``Tuner.tune`` gives them, with
    ``reported(costs, index)`` of each config's recorded costs (see :func:`runner_costs`); the
    returned curve is of the mean of every recorded cost.
    """
    task = landscape.task
    best = float("inf")
    curve: List[float] = []
    while len(curve) < n_trial and tuner.has_next():
        configs = tuner.next_batch(min(batch_size, n_trial - len(curve)))
        if not configs:
            break
        inputs, results = [], []
        for config in configs:
            costs = landscape.measure(config.index)
            inputs.append(autotvm.measure.MeasureInput(task.target, task, config))
            if costs:
                results.append(
                    autotvm.measure.MeasureResult(
                        tuple(reported(costs, config.index)), 0, 0.0, time.time()
                    )
                )
                best = min(best, float(np.mean(costs)))
            else:
                results.append(
                    autotvm.measure.MeasureResult((RuntimeError("failed"),), 4, 0.0, time.time())
                )
            curve.append(best)
        tuner.update(inputs, results)
    return curve


def fill(landscapes: Sequence[Landscape]) -> None:
    """Save every landscape (call after replays measured new configs)."""
    for landscape in landscapes:
        landscape.save()
