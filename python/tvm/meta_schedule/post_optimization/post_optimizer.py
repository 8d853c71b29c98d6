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
"""Post-optimization: Droplet Search around the best tuning record of each workload.

MetaSchedule's evolutionary search explores; once it has found a good
schedule, coordinate descent over that schedule's own decisions exploits it
(Canesche et al., "Explore as a Storm, Exploit as a Raindrop", 2024).  This
module is the adapter between MetaSchedule and the Droplet Search engine
:class:`tvm.contrib.droplet_search.DropletSearch`: the engine proposes points
of a :class:`~.space.TraceSpace`, the adapter turns them into postprocessed
schedules, measures each distinct program once through the user's builder and
runner, checks the outputs of those that would become the best record, and
commits every measurement to the database with ``Database.commit_tuning_record``
(the database is the search's journal, see :mod:`.journal`).
"""

import logging
import numbers
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from tvm.ir import IRModule
from tvm.target import Target

from ..builder import Builder
from ..database import Database, TuningRecord, Workload
from ..runner import Runner
from ..tune_context import TuneContext
from .defaults import resolve_builder, resolve_runner
from .journal import Journal, check_appendable, database_files
from .search import WorkloadSearch
from .workloads import collect_jobs, mean_run_secs

logger = logging.getLogger("meta_schedule")  # pylint: disable=invalid-name


@dataclass
class PostOptimizationResult:
    """What the post-optimization of one workload did.

    Parameters
    ----------
    name : str
        The task name, or the workload's structural hash for database workloads.
    workload : Workload
        The database's workload.
    target : Target
        The target its records were tuned and measured for.
    before : float
        Mean run time (s) of the workload's best record before post-optimization.
    after : float
        Mean run time (s) of its best record afterwards (``before`` when
        nothing better was found).
    trials : int
        Distinct programs the search evaluated (the start included): the
        ``measured`` ones and the ``recovered`` ones.
    record : Optional[TuningRecord]
        The committed record of the fastest schedule, None when nothing
        improved on ``before``.
    stop_reason : str
        Why the search ended.
    measured : int
        Programs built and run, each committed to the database.
    recovered : int
        Programs whose run times were taken from records already in the
        database (the start, and measurements of an earlier run).
    wrong_results : int
        Measured programs whose outputs differed from the start schedule's,
        committed as failures.
    """

    name: str
    workload: Workload
    target: Target
    before: float
    after: float
    trials: int
    record: Optional[TuningRecord] = None
    stop_reason: str = ""
    measured: int = 0
    recovered: int = 0
    wrong_results: int = 0

    @property
    def speedup(self) -> float:
        """``before / after``: 1.0 when nothing improved."""
        return self.before / self.after

    @property
    def improved(self) -> bool:
        """Whether a record faster than the start was committed."""
        return self.record is not None


def post_optimize(
    database: Database,
    trials: int,
    *,
    tasks: Optional[Sequence[Union[TuneContext, IRModule, Workload]]] = None,
    target: Union[None, str, dict, Target] = None,
    builder: Builder.BuilderType = "local",
    runner: Runner.RunnerType = "local",
    batch_size: Optional[int] = None,
    pvalue: float = 0.05,
    skip_unusable: bool = False,
) -> List[PostOptimizationResult]:
    """Exploit the best tuning record of each workload with Droplet Search.

    For each workload, the decisions of its fastest record (tile sizes,
    categorical choices, code-generation annotations, see
    :class:`~.space.TraceSpace`) are searched by coordinate descent starting
    from that record.  Every candidate is postprocessed with the task's
    postprocessors, structurally identical programs are measured once, and
    candidates are built and run in batches through ``builder`` and
    ``runner``.  A neighbour replaces the current best when it is faster by a
    one-sided Welch test at ``pvalue`` (a plain comparison when the runner
    repeats once).  The search stops when the neighbourhood of the best is
    exhausted, when ``trials`` programs were evaluated, or when a run of
    failures says the neighbourhood is all invalid.

    The database is the journal of the search.  Every program built and run
    is committed with ``database.commit_tuning_record`` right after its
    batch, as MetaSchedule's ``AddToDatabase`` measure callback does: a
    failed build or run with ``run_secs = [1e10]``.  A measured program
    faster than the best valid run time seen so far (the database's best
    record of the workload, then the best checked candidate) could become
    the workload's best record: its outputs are first compared with the
    start schedule's on the same random inputs (see
    :class:`~.verification.OutputCheck`), and a mismatch is committed as a
    failure and logged.  Nothing is ever removed or rewritten.

    Resuming: the search starts from the workload's best record for the
    target, and every program it proposes whose trace (without its
    postprocessing part) is already recorded in the database for the target
    is evaluated from that record, not measured; the start is such a
    program.  Re-running the same call after an interruption (Ctrl-C, a
    killed process) therefore measures nothing twice and appends only new
    records; it starts from the best record committed so far.

    Budget: ``trials`` bounds the distinct programs one call evaluates,
    measured or recovered from the database, the start included; programs
    structurally equal to one already evaluated are not counted again.  A
    call after an interrupted one spends its budget on programs recovered
    along its walk as well as on new ones.

    Parameters
    ----------
    database : Database
        Any MetaSchedule database holding tuning records.
    trials : int
        The budget per workload: distinct programs evaluated, measured or
        recovered from the database (at least 1; the start counts).
    tasks : Optional[Sequence[Union[TuneContext, IRModule, Workload]]]
        The workloads to post-optimize: tuning tasks (their postprocessors are
        used), modules or workloads of the database.  All workloads of the
        database when omitted.
    target : Union[None, str, dict, Target]
        Only records for this target are exploited.  By default, a task's own
        target, or the target of a workload's best record.
    builder : Builder.BuilderType
        The builder; ``"local"`` is :func:`~.defaults.default_builder`.
    runner : Runner.RunnerType
        The runner with its evaluator configuration; ``"local"`` is
        :func:`~.defaults.default_runner`.
    batch_size : Optional[int]
        Candidates built and run together; by default one neighbourhood of
        radius 1, two per dimension of the space.
    pvalue : float
        Significance level of the acceptance test.
    skip_unusable : bool
        Skip, with a log message, the tasks that cannot be post-optimized (not
        in the database, no successful record for the target, a best record
        that does not replay) instead of raising; ``tune_tasks`` uses this.

    Returns
    -------
    results : List[PostOptimizationResult]
        One per workload post-optimized, in order.

    Raises
    ------
    ValueError
        On bad input (an empty database, an unknown workload, a budget below 1,
        no record for the target, a JSON database file cut short by a process
        stopped mid-write), before anything is measured or committed.
    """
    if isinstance(trials, bool) or not isinstance(trials, numbers.Integral) or trials < 1:
        raise ValueError(
            f"post-optimization needs a positive number of trials per workload, got {trials!r}"
        )
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if target is not None and not isinstance(target, Target):
        target = Target(target)
    jobs = collect_jobs(database, tasks, target, skip_unusable)
    check_appendable(database_files(database))
    searches = []
    for job in jobs:
        try:
            journal = Journal(database, job.workload, job.target)
            searches.append(WorkloadSearch(job, pvalue, journal))
        except ValueError as error:
            if not skip_unusable:
                raise
            logger.warning("Post-optimization skips %s: %s", job.name, error)
    builder = resolve_builder(builder)
    runner = resolve_runner(runner)
    return [
        _post_optimize_one(search, int(trials), builder, runner, batch_size)
        for search in searches
    ]


def _post_optimize_one(
    search: WorkloadSearch,
    trials: int,
    builder: Builder,
    runner: Runner,
    batch_size: Optional[int],
) -> PostOptimizationResult:
    """Run one workload's search; its measurements are committed as it goes."""
    job = search.job
    before = mean_run_secs(job.record)
    size = batch_size if batch_size is not None else max(1, 2 * len(search.space.dims))
    best = search.run(trials, size, builder, runner)
    result = PostOptimizationResult(
        name=job.name,
        workload=job.workload,
        target=job.target,
        before=before,
        after=before,
        trials=search.trials,
        stop_reason=search.stop_reason,
        measured=search.measured,
        recovered=search.recovered,
        wrong_results=search.wrong_results,
    )
    if best is not None and best.costs:
        after = sum(best.costs) / len(best.costs)
        if after < before:
            result.after = after
            result.record = best.record
    logger.info(
        "Post-optimization of %s: %.4g us -> %.4g us (%.3fx) in %d trials (%d measured, "
        "%d from the database, %d wrong results; %d duplicate programs not measured); %s. "
        "Best: %s",
        job.name,
        before * 1e6,
        result.after * 1e6,
        result.speedup,
        result.trials,
        result.measured,
        result.recovered,
        result.wrong_results,
        search.duplicates,
        result.stop_reason,
        search.space.describe(search.search.centre),
    )
    return result
