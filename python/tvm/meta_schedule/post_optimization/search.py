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
from .candidates import Candidate, CandidateTable, seconds
from .journal import Journal
from .measure import Measurement, measure_schedules
from .space import Point, TraceSpace
from .verification import OutputCheck
from .workloads import PostOptimizationJob, mean_run_secs

logger = logging.getLogger("meta_schedule")  # pylint: disable=invalid-name


class WorkloadSearch:
    """Droplet Search over the trace space of one workload's best record.

    The engine proposes points; a point is valid when it replays into a
    postprocessed schedule.  Points whose programs are structurally equal to a
    program already proposed share its evaluation.  A new program already
    recorded in the database (see :class:`~.journal.Journal`) is evaluated
    from its record; the others are built and run in batches through the
    builder and runner, their outputs checked when they could become the
    workload's best (see :class:`~.verification.OutputCheck`), and committed
    to the database right after their batch.

    Parameters
    ----------
    job : PostOptimizationJob
        The workload, its best record and its postprocessors.
    pvalue : float
        Significance level of the engine's acceptance test.
    journal : Journal
        The database records of the workload, where measurements are committed.

    Raises
    ------
    ValueError
        When the best record does not replay into a valid schedule.
    """

    def __init__(self, job: PostOptimizationJob, pvalue: float, journal: Journal):
        self.job = job
        self.journal = journal
        self.space = TraceSpace(job.record.trace, job.workload.mod, job.postprocs)
        self.table = CandidateTable()
        self._schedules: Dict[Point, Schedule] = {}
        self._candidates: Dict[Point, Candidate] = {}
        if not self._is_valid(self.space.start):
            raise ValueError(
                f"the best record of {job.name!r} does not replay into a valid schedule "
                "with the task's postprocessors"
            )
        self._start_schedule = self._schedules[self.space.start]
        self.check: Optional[OutputCheck] = None
        self.search = DropletSearch(
            self.space.dims,
            self.space.start,
            pvalue=pvalue,
            is_valid=self._is_valid,
            logger=logger,
        )
        # The mean run time a candidate must beat to become the workload's best record.
        self.best_valid_secs = mean_run_secs(job.record)
        # Distinct programs evaluated in a row that failed.  The engine counts
        # failures per point, and points whose program equals an evaluated one
        # are told that program's costs: around a valid start, its duplicates
        # would hide an all-invalid neighbourhood from the engine.
        self.failure_streak = 0
        self.wrong_results = 0
        self._all_invalid: Optional[str] = None
        self.trials = 0
        self.measured = 0
        self.recovered = 0
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
        """Up to ``size`` new programs; points of known programs are told at once.

        New programs recorded in the database take their run times from the
        record and fill a place of the batch as if measured, so that batches,
        and hence the engine's decisions, are those of a run that measured them.
        """
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
                    if candidate.schedule in self.journal:
                        candidate.run_secs = self.journal.run_secs(candidate.schedule)
                        candidate.recovered = True
                    batch.append(candidate)
                    continue
                self.duplicates += 1
                if candidate.measured:
                    self.search.tell(point, candidate.costs)
                # else: told with the candidate's costs once its batch is measured
        return batch

    def _check_outputs(self, batch: List[Candidate], measurements: List[Measurement]) -> None:
        """Check, fastest first, the candidates that would become the best record."""
        means = []
        for position, measurement in enumerate(measurements):
            costs = seconds(measurement.run_secs)
            if costs:
                means.append((sum(costs) / len(costs), position))
        order = sorted(means)
        for mean, position in order:
            if self.best_valid_secs is not None and mean >= self.best_valid_secs:
                break
            measurement = measurements[position]
            reason = self.check.mismatch(measurement.artifact_path)
            if reason is None:
                self.best_valid_secs = mean
                continue
            measurement.fail(f"wrong result: {reason}")
            self.wrong_results += 1
            logger.warning(
                "Post-optimization of %s: a candidate (%s) measured %.4g us but computes a "
                "wrong result, recorded as a failure: %s",
                self.job.name,
                self.space.describe(batch[position].points[0]),
                mean * 1e6,
                reason,
            )

    def run(
        self, trials: int, batch_size: int, builder: Builder, runner: Runner
    ) -> Optional[Candidate]:
        """Search until the neighbourhood is exhausted or ``trials`` programs were evaluated.

        Parameters
        ----------
        trials : int
            The largest number of distinct programs to evaluate: built and run,
            or found in the database.
        batch_size : int
            The largest number of programs evaluated together.
        builder : Builder
            The builder of the candidates.
        runner : Runner
            The runner of the candidates.

        Returns
        -------
        best : Optional[Candidate]
            The fastest program evaluated successfully: the workload's best
            record afterwards, which need not be the centre the search accepted
            (faster, but not significantly).  None when even the start failed,
            or when the trace has no decision to search.
        """
        if not self.space.dims:
            return None
        self.check = OutputCheck(self._start_schedule, self.job.target, self.job.name, builder)
        while self.trials < trials and not self.search.finished:
            batch = self._next_batch(min(batch_size, trials - self.trials))
            if not batch:
                break
            fresh = [candidate for candidate in batch if not candidate.recovered]
            if fresh:
                measurements = measure_schedules(
                    [candidate.schedule for candidate in fresh],
                    self.job.target,
                    builder,
                    runner,
                    inspect=lambda measured: self._check_outputs(fresh, measured),
                )
                for candidate, measurement in zip(fresh, measurements):
                    candidate.run_secs = measurement.run_secs
                    candidate.record = self.journal.commit(
                        candidate.schedule, measurement.run_secs
                    )
            self.trials += len(batch)
            self.measured += len(fresh)
            self.recovered += len(batch) - len(fresh)
            for candidate in batch:
                candidate.measured = True
                self.failure_streak = 0 if candidate.costs else self.failure_streak + 1
                for point in candidate.points:
                    self.search.tell(point, candidate.costs)
            if self.failure_streak >= self.search.failure_limit and not self.search.finished:
                self._all_invalid = (
                    f"the last {self.failure_streak} distinct programs all failed "
                    "(all-invalid neighbourhood)"
                )
                logger.info(
                    "Post-optimization of %s stops after %d trials: %s",
                    self.job.name,
                    self.trials,
                    self._all_invalid,
                )
                break
        evaluated = {id(candidate): candidate for candidate in self._candidates.values()}
        successful = [candidate for candidate in evaluated.values() if candidate.costs]
        if not successful:
            return None
        return min(successful, key=lambda candidate: sum(candidate.costs) / len(candidate.costs))

    @property
    def stop_reason(self) -> str:
        """Why the search ended."""
        if not self.space.dims:
            return "the record's trace has no decision to search"
        if self.search.stop_reason is not None:
            return self.search.stop_reason
        if self._all_invalid is not None:
            return self._all_invalid
        return f"the budget of {self.trials} trials is spent"
