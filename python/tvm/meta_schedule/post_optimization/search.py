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
"""The Droplet Search of one workload: engine points in, measured programs out."""

import logging
from typing import Dict, List, Optional

from tvm.contrib.droplet_search import DropletSearch
from tvm.tir.schedule import Schedule

from ..builder import Builder
from ..runner import Runner
from .candidates import Candidate, CandidateTable
from .measure import measure_schedules
from .space import Point, TraceSpace
from .workloads import PostOptimizationJob

logger = logging.getLogger("meta_schedule")  # pylint: disable=invalid-name


class WorkloadSearch:
    """Droplet Search over the trace space of one workload's best record.

    The engine proposes points; a point is valid when it replays into a
    postprocessed schedule.  Points whose programs are structurally equal to a
    program already proposed share its measurement: only new programs are
    built and run, in batches, through the builder and runner.

    Parameters
    ----------
    job : PostOptimizationJob
        The workload, its best record and its postprocessors.
    pvalue : float
        Significance level of the engine's acceptance test.

    Raises
    ------
    ValueError
        When the best record does not replay into a valid schedule.
    """

    def __init__(self, job: PostOptimizationJob, pvalue: float):
        self.job = job
        self.space = TraceSpace(job.record.trace, job.workload.mod, job.postprocs)
        self.table = CandidateTable()
        self._schedules: Dict[Point, Schedule] = {}
        self._candidates: Dict[Point, Candidate] = {}
        if not self._is_valid(self.space.start):
            raise ValueError(
                f"the best record of {job.name!r} does not replay into a valid schedule "
                "with the task's postprocessors"
            )
        self.search = DropletSearch(
            self.space.dims,
            self.space.start,
            pvalue=pvalue,
            is_valid=self._is_valid,
            logger=logger,
        )
        self.trials = 0
        self.duplicates = 0

    def _is_valid(self, point: Point) -> bool:
        """A point is valid when it yields a postprocessed schedule (kept for ask)."""
        if point in self._schedules:
            return True
        sch = self.space.schedule(point)
        if sch is None:
            return False
        self._schedules[point] = sch
        return True

    def _next_batch(self, size: int) -> List[Candidate]:
        """Up to ``size`` new programs; points of known programs are told at once."""
        batch: List[Candidate] = []
        while len(batch) < size:
            points = self.search.ask(size - len(batch))
            if not points:
                break
            for point in points:
                candidate, added = self.table.find_or_add(self._schedules.pop(point))
                candidate.points.append(point)
                self._candidates[point] = candidate
                if added:
                    batch.append(candidate)
                    continue
                self.duplicates += 1
                if candidate.measured:
                    self.search.tell(point, candidate.costs)
                # else: told with the candidate's costs once its batch is measured
        return batch

    def run(
        self, trials: int, batch_size: int, builder: Builder, runner: Runner
    ) -> Optional[Candidate]:
        """Search until the neighbourhood is exhausted or ``trials`` programs were measured.

        Parameters
        ----------
        trials : int
            The largest number of programs to build and run.
        batch_size : int
            The largest number of programs built and run together.
        builder : Builder
            The builder of the candidates.
        runner : Runner
            The runner of the candidates.

        Returns
        -------
        best : Optional[Candidate]
            The fastest accepted candidate; None when even the start failed,
            or when the trace has no decision to search.
        """
        if not self.space.dims:
            return None
        while self.trials < trials and not self.search.finished:
            batch = self._next_batch(min(batch_size, trials - self.trials))
            if not batch:
                break
            results = measure_schedules(
                [candidate.schedule for candidate in batch], self.job.target, builder, runner
            )
            self.trials += len(batch)
            for candidate, run_secs in zip(batch, results):
                candidate.run_secs = run_secs
                candidate.measured = True
                for point in candidate.points:
                    self.search.tell(point, candidate.costs)
        best = self.search.best
        if best is None:
            return None
        return self._candidates[best[0]]

    @property
    def stop_reason(self) -> str:
        """Why the search ended."""
        if not self.space.dims:
            return "the record's trace has no decision to search"
        if self.search.stop_reason is not None:
            return self.search.stop_reason
        return f"the budget of {self.trials} measurements is spent"
