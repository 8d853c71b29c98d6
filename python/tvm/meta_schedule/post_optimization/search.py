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
"""The Droplet Search of one workload: trace-space points in, committed records out."""

import dataclasses
import logging
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from tvm.contrib.droplet_search import BatchDriver, DropletSearch, mean
from tvm.contrib.droplet_search.transfer import add_taken_over, transfer_limit
from tvm.tir.schedule import Schedule

from ..builder import Builder
from ..database import TuningRecord
from ..logging import get_logger
from ..runner import Runner
from .journal import Journal
from .measure import Measurement, measure_schedules
from .programs import ProgramKey, seconds
from .trace_space import Point, TraceSpace
from .verification import OutputCheck
from .workloads import PostOptimizationJob, mean_run_secs

logger = get_logger(__name__)  # pylint: disable=invalid-name


class _WorkloadLogger(logging.LoggerAdapter):
    """Prefixes the search's messages with the workload's name."""

    def process(self, msg, kwargs):
        return "Post-optimization of %s: %s" % (self.extra["name"], msg), kwargs


class WorkloadSearch:
    """Droplet Search over the trace space of one workload's best record.

    A point is valid when it replays into a postprocessed schedule.  Points
    whose programs are structurally equal are measured once.  The database's
    records of the workload whose traces are points of the space are given to
    the search before it starts (never measured again; the start is measured
    again once, alongside its first challengers).  The others are built and
    run in batches through the builder and runner, their outputs checked when
    they could become the workload's best (see :class:`~.verification.OutputCheck`),
    and committed to the database right after their batch.

    Parameters
    ----------
    job : PostOptimizationJob
        The workload, its best record and its postprocessors.
    journal : Journal
        The database records of the workload, where measurements are committed.
    pvalue : float
        Significance level of the engine's acceptance test.
    budget : int
        The largest number of programs to build and run.
    batch_size : Optional[int]
        Programs measured together; by default two per dimension of the space.
    transfer : bool
        Whether the fastest schedules of the database's other workloads with the
        same instructions are taken over and measured with the start.

    Raises
    ------
    ValueError
        When the best record does not replay into a valid schedule.
    """

    def __init__(
        self,
        job: PostOptimizationJob,
        journal: Journal,
        *,
        pvalue: float,
        budget: int,
        batch_size: Optional[int] = None,
        transfer: bool = True,
    ):
        self.job = job
        self.transfer = transfer
        self.budget = budget
        self.batch_size = batch_size
        # How many schedules of other workloads were taken over (see run()).
        self.transferred = 0
        self.journal = journal
        self.space = TraceSpace(job.record.trace, job.workload.mod, job.postprocs)
        self._schedules: Dict[Point, Optional[Schedule]] = {}
        self.records: Dict[Point, TuningRecord] = {}
        start = self._schedule(self.space.start)
        if start is None:
            raise ValueError(
                f"the best record of {job.name!r} does not replay into a valid schedule "
                "with the task's postprocessors"
            )
        self._start_schedule = start
        self.search = DropletSearch(
            self.space.dims,
            self.space.start,
            pvalue=pvalue,
            is_valid=self._replays,
            budget=budget,
            logger=_WorkloadLogger(logger, {"name": job.name}),
        )
        self.driver = BatchDriver(
            self.search, batch_size or max(1, 2 * len(self.space.dims)), identify=self._identify
        )
        self.reused = 0
        self.wrong_results = 0
        # The mean run time of the fastest candidate whose outputs were checked.
        self.best_checked_secs: Optional[float] = None

    def _schedule(self, point: Point) -> Optional[Schedule]:
        """The postprocessed schedule of a point (kept until the point is measured)."""
        if point not in self._schedules:
            self._schedules[point] = self.space.schedule(point)
        return self._schedules[point]

    def _replays(self, point: Point) -> bool:
        """Whether a point replays into a valid schedule (kept, see :meth:`_schedule`)."""
        return self._schedule(point) is not None

    def _identify(self, point: Point):
        schedule = self._schedule(point)
        return point if schedule is None else ProgramKey(schedule.mod)

    def _observe_journal(self) -> None:
        """Give the search the database's records of points of the space.

        Every record was measured in an earlier run, under other load: whichever
        point ends up the centre (the start, the workload's best record) is
        measured again alongside its first challengers.
        """
        for record in self.journal.records:
            point = self.space.point_of(record.trace)
            if point is None:
                continue
            costs = seconds(record.run_secs) if mean_run_secs(record) is not None else None
            self.driver.observe(point, costs, remeasure=True)
            self.reused += 1

    def _evaluate(self, builder: Builder, runner: Runner):
        """The driver's callback: build, run, check and commit a batch of points."""

        def evaluate(points: List[Point], contends) -> List[Optional[Tuple[float, ...]]]:
            schedules = [
                self._schedules.pop(point, None) or self.space.schedule(point) for point in points
            ]
            measurements = measure_schedules(
                schedules,
                self.job.target,
                builder,
                runner,
                inspect=lambda measured: self._check_outputs(points, measured, contends),
            )
            for point, schedule, measurement in zip(points, schedules, measurements):
                self.records[point] = self.journal.commit(schedule, measurement.run_secs)
            return [seconds(measurement.run_secs) or None for measurement in measurements]

        return evaluate

    def _check_outputs(
        self, points: Sequence[Point], measurements: List[Measurement], contends
    ) -> None:
        """Check, fastest first, the candidates that could become the best record or centre.

        When the batch holds the start again, its artifact is the check's reference.
        A start that computes a wrong result (see
        :attr:`~.verification.OutputCheck.start_difference`) is recorded as a failure
        there, and no longer sets the run time that candidates must beat.
        """
        for point, measurement in zip(points, measurements):
            if point == self.space.start and measurement.artifact_path is not None:
                self.check.reference_from(measurement.artifact_path)
                if self.check.start_difference is not None and measurement.run_secs:
                    measurement.fail(f"wrong result: {self.check.start_difference}")
                    self.wrong_results += 1
        timed = sorted(
            (mean(seconds(m.run_secs)), position)
            for position, m in enumerate(measurements)
            if seconds(m.run_secs)
        )
        for secs, position in timed:
            costs = seconds(measurements[position].run_secs)
            to_beat = self._secs_to_beat()
            if not (to_beat is None or secs < to_beat or contends(costs)):
                continue
            reason = self.check.mismatch(measurements[position].artifact_path)
            if reason is None:
                self.best_checked_secs = (
                    secs if self.best_checked_secs is None else min(secs, self.best_checked_secs)
                )
                continue
            measurements[position].fail(f"wrong result: {reason}")
            self.wrong_results += 1
            logger.warning(
                "Post-optimization of %s: a candidate (%s) measured %.4g us but computes a "
                "wrong result, recorded as a failure: %s",
                self.job.name,
                self.space.describe(points[position]),
                secs * 1e6,
                reason,
            )

    def _secs_to_beat(self) -> Optional[float]:
        """The mean run time a candidate must beat to become the workload's best record:
        the fastest checked candidate's, or the start record's unless the start is wrong."""
        times = [self.best_checked_secs]
        if self.check.start_difference is None:
            times.append(mean_run_secs(self.job.record))
        return min((secs for secs in times if secs is not None), default=None)

    def run(self, builder: Builder, runner: Runner, budget: Optional[int] = None) -> None:
        """Search until the neighbourhood is exhausted or the budget is spent.

        Parameters
        ----------
        builder : Builder
            The builder of the candidates.
        runner : Runner
            The runner of the candidates.
        budget : Optional[int]
            At most this many measurements, when fewer than the search's own
            budget are left of a budget shared with other workloads.
        """
        if not self.space.dims:
            return
        if budget is not None:
            self.search.budget = min(self.search.budget, budget)
        self._observe_journal()
        if self.transfer:
            self._transfer()
        self.check = OutputCheck(
            self._start_schedule, self.job.target, self.job.name, builder, self.job.workload.mod
        )
        self.driver.run(self._evaluate(builder, runner))

    def _transfer(self) -> None:
        """Measure the fastest schedules of other workloads, taken over, with the start.

        A network's workloads of the same kind (convolutions of other sizes) are
        tuned by the same rules into traces with the same instructions; the
        fastest records of each such workload whose decisions this space can take
        over (:meth:`~.trace_space.TraceSpace.point_like`) into a valid point are
        measured in the first round, as :func:`~tvm.contrib.droplet_search.transfer.add_taken_over`
        picks them, unless measured before, and the search starts from the fastest
        of them that beats the start (as from a sample).
        """
        # Per other workload, its valid points fastest first, replayed only when asked for.
        # As many as the workload's own budget allows, also in a first pass of a few.
        added = add_taken_over(
            self.search,
            [self._taken_over(records) for records in self.journal.related()],
            transfer_limit(self.budget),
        )
        self.transferred = len(added)
        if self.transferred:
            logger.info(
                "Post-optimization of %s: measuring %d schedules of other workloads with the start",
                self.job.name,
                self.transferred,
            )

    def fastest_record(self) -> Optional[TuningRecord]:
        """The workload's fastest successful record: the database's before the search,
        and the search's own; None when there is none."""
        timed = [
            record
            for record in list(self.journal.records) + list(self.records.values())
            if mean_run_secs(record) is not None
        ]
        return min(timed, key=mean_run_secs, default=None)

    def continued(self) -> "WorkloadSearch":
        """A new search of the workload from its fastest record now (a second pass).

        The same settings, without transfer (this search measured the other
        workloads' schedules already); the database's records of the new
        space, this search's among them, are not measured again, and only the
        new start is measured again.

        Raises
        ------
        ValueError
            When that record does not replay into a valid schedule.
        """
        job = dataclasses.replace(self.job, record=self.fastest_record() or self.job.record)
        return WorkloadSearch(
            job,
            Journal(self.journal.database, job.workload, job.target),
            pvalue=self.search.pvalue,
            budget=self.budget,
            batch_size=self.batch_size,
            transfer=False,
        )

    def _taken_over(self, records: Sequence[TuningRecord]) -> Iterator[Point]:
        """The valid points that ``records`` (another workload's) take over, in their order."""
        for record in records:
            point = self.space.point_like(record.trace, is_valid=self._replays)
            if point is not None and self._replays(point):
                yield point

    @property
    def stop_reason(self) -> str:
        """Why the search ended."""
        if not self.space.dims:
            return "the record's trace has no decision to search"
        return self.search.stop_reason or "the search did not run"
