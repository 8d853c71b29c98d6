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
"""``Space``: the search space of the first post-optimization, now a view of a ``TraceSpace``.

Deprecated (see :class:`Space`): the space of a tuning record's decisions is
:class:`~.trace_space.TraceSpace`.
"""

import math
from copy import deepcopy
from typing import Any, List, Optional, Sequence

from tvm.target import Target

from ..builder import LocalBuilder
from ..database import TuningRecord, Workload
from ..runner import EvaluatorConfig, LocalRunner
from .measure import measure_schedules, runner_device_type
from .programs import seconds
from .trace_space import TraceSpace
from .utils import append_lines, deprecated
from .workloads import _postprocs_for


class Space:
    """The decisions of a tuning record as a box of points (deprecated).

    A view of :class:`~.trace_space.TraceSpace`, the space
    :func:`~.post_optimizer.post_optimize` searches, under the names of the
    first post-optimization: ``dims``, ``total_dims``, ``knob2point``,
    ``point2knob``, ``template`` and ``run``.  Its dimensions are those of the
    trace space (perfect tilings of every tile, categorical choices, code
    generation annotations), not the fixed power-of-two ladders of the first
    version; its helpers ``config_space``, ``get_value``, ``add_space``,
    ``power_of_two`` and ``get_index`` are gone.

    Parameters
    ----------
    data : list
        A line of ``database_tuning_record.json``: ``[workload index, record]``.
    workload : list
        The line of ``database_workload.json`` of that workload.
    target : Union[str, dict, Target]
        The target of the record.
    """

    def __init__(self, data: Any, workload: Any, target: Any):
        deprecated("Space", "post_optimization.TraceSpace (searched by post_optimize)")
        self.cfg = deepcopy(data)
        self._id = data[0]
        self.workload = Workload.from_json(workload)
        self.target = target if isinstance(target, Target) else Target(target)
        self.dev = runner_device_type(self.target)
        record = TuningRecord.from_json(data[1], self.workload)
        postprocs = _postprocs_for(self.workload.mod, self.target, "post-optimization")
        self.trace_space = TraceSpace(record.trace, self.workload.mod, postprocs)
        self.dims: List[int] = list(self.trace_space.dims)
        self.total_dims = math.prod(self.dims)
        # The first version's origin was the record itself; so is the trace space's.
        self.start: List[int] = list(self.trace_space.start)

    def __repr__(self) -> str:
        return f"Space(dims={self.dims}, total_dims={self.total_dims})"

    def knob2point(self, knob: Sequence[int]) -> int:
        """The index of a point (the first coordinate varies fastest)."""
        point = 0
        for position, value in enumerate(knob):
            point += math.prod(self.dims[:position]) * int(value)
        return point

    def point2knob(self, point: int) -> List[int]:
        """The coordinates of a point index."""
        knob = []
        for dim in self.dims:
            knob.append(point % dim)
            point //= dim
        return knob

    def get_device_type(self, target: Target) -> str:
        """The name of the device a runner opens for ``target`` (any target kind)."""
        return runner_device_type(target)

    def template(self, values: Optional[Sequence[int]] = None, create: bool = True):
        """The record of the point ``values``: a line like ``data``, None if invalid.

        With ``create`` (the first version built its space this way) it returns None.
        """
        if create:
            return None
        trace = self.trace_space.trace_of(values)
        if trace is None:
            return None
        config = deepcopy(self.cfg[1])
        config[0] = trace.as_json(remove_postproc=True)
        return config

    def save_log(self, path: str, record: TuningRecord, results: Sequence[float]) -> None:
        """Append ``record`` with run times ``results`` to the JSON-lines file ``path``."""
        line = [self._id, record.as_json()]
        line[1][1] = list(results)
        append_lines([line], path, "a")

    def run(
        self,
        json_file_list: Sequence[Any],
        final_log: str,
        timeout: float = 10,
        number: int = 2,
        repeat: int = 3,
        min_repeat_ms: int = 0,
        cpu_cache: bool = False,
    ) -> List[List[float]]:
        """Build and run records made by :meth:`template`, appending each to ``final_log``.

        Every candidate is postprocessed like MetaSchedule's own candidates, and
        a failure is reported as ``[1e10]`` at its own position.

        Returns
        -------
        results : List[List[float]]
            The run times of each record, in order.
        """
        builder = LocalBuilder(timeout_sec=timeout)
        runner = LocalRunner(
            evaluator_config=EvaluatorConfig(
                number=number,
                repeat=repeat,
                min_repeat_ms=min_repeat_ms,
                enable_cpu_cache_flush=cpu_cache,
            )
        )
        results: List[List[float]] = [[1e10] for _ in json_file_list]
        schedules, positions, records = [], [], []
        for position, config in enumerate(json_file_list):
            record = TuningRecord.from_json(config, self.workload)
            point = self.trace_space.point_of(record.trace)
            schedule = None if point is None else self.trace_space.schedule(point)
            if schedule is not None:
                schedules.append(schedule)
                positions.append(position)
                records.append(record)
        measured = measure_schedules(schedules, self.target, builder, runner) if schedules else []
        for position, record, measurement in zip(positions, records, measured):
            if measurement.run_secs is not None:
                results[position] = list(seconds(measurement.run_secs))
                self.save_log(final_log, record, results[position])
        return results
