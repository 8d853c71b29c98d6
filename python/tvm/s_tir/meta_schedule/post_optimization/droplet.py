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
"""``Droplet``: the search of the first post-optimization, now run by ``post_optimize``.

Deprecated (see :class:`Droplet`).
"""

import warnings
from typing import Any, List

from tvm.target import Target

from ..database import MemoryDatabase, TuningRecord, Workload
from .post_optimizer import post_optimize
from .programs import seconds
from .space import Space
from .utils import append_lines, best_line, deprecated


class Droplet:
    """Droplet Search around one tuning record (deprecated).

    :meth:`tune` runs :func:`~.post_optimizer.post_optimize` on the record in
    a fresh in-memory database, with the default builder and runner of
    ``post_optimize``, and writes what the first version wrote to ``log``: the
    record first (when the object is made), then every program measured, as
    lines ``[workload index, record]`` (failures with run time ``[1e10]``).
    ``space`` is the :class:`Space` of the record; ``best_choice`` is ``[point
    index, point, run times]`` of the fastest line of ``log``.  The first
    version's stepping methods (``next_batch``, ``update``, ``speculation``,
    ``search_space``, ``next_pos``, ``num_to_bin``, ``has_next``) and their
    state are gone: the search is the engine's.

    Parameters
    ----------
    json_file : list
        A line of ``database_tuning_record.json``: ``[workload index, record]``.
    workload_file : list
        The line of ``database_workload.json`` of that workload.
    target : Union[str, dict, Target]
        The target of the record.
    log : str
        The JSON-lines file written (overwritten when the object is made).
    pvalue : float
        Significance level of the acceptance test.
    """

    def __init__(self, json_file, workload_file, target, log, pvalue=0.05) -> None:
        deprecated("Droplet", "post_optimization.post_optimize(database, trials, ...)")
        self.record_line = json_file
        self.workload_line = workload_file
        self.target = target if isinstance(target, Target) else Target(target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # said once, for Droplet
            self.space = Space(json_file, workload_file, self.target)
        self.final_log = append_lines([json_file], log)
        self.pvalue = pvalue
        self.dims = self.space.dims
        self.trials = 0
        self.best_choice: List[Any] = self._best_choice()

    def _best_choice(self) -> List[Any]:
        run_secs, line = best_line(self.final_log)
        point = self.space.start
        if line is not None:
            record = TuningRecord.from_json(line[1], self.space.workload)
            point = list(self.space.trace_space.point_of(record.trace) or point)
        return [self.space.knob2point(point), list(point), run_secs]

    def tune(self, n_trial: int = 100) -> None:
        """Search around the record with ``n_trial`` programs at most; see the class."""
        self.trials = n_trial
        database = MemoryDatabase()
        workload = database.commit_workload(Workload.from_json(self.workload_line).mod)
        start = TuningRecord.from_json(self.record_line[1], workload)
        database.commit_tuning_record(start)
        post_optimize(database, n_trial, target=self.target, pvalue=self.pvalue)
        lines = []
        for record in list(database.get_all_tuning_records())[1:]:  # after the start
            line = [self.record_line[0], record.as_json()]
            line[1][1] = list(seconds(record.run_secs)) or [1e10]
            lines.append(line)
        append_lines(lines, self.final_log, "a")
        self.best_choice = self._best_choice()
