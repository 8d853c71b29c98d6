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

import dataclasses
import numbers
from dataclasses import dataclass
from typing import List, Optional, Sequence, Set, Union

from tvm.contrib.droplet_search import (
    DropletResult,
    FirstPass,
    SharedBudget,
    is_count,
    mean,
)
from tvm.contrib.droplet_search.budget import NOT_REACHED, check_first_pass
from tvm.contrib.droplet_search.transfer import TRANSFER_SAMPLE
from tvm.ir import IRModule
from tvm.target import Target

from ..builder import Builder
from ..database import Database, Workload
from ..logging import get_logger
from ..runner import Runner
from ..tune_context import TuneContext
from .defaults import resolve_builder, resolve_runner
from .journal import Journal, check_appendable, database_files
from .search import WorkloadSearch
from .trace_space import trace_key
from .workloads import collect_jobs, mean_run_secs

logger = get_logger(__name__)  # pylint: disable=invalid-name


@dataclass
class PostOptimizationResult(DropletResult):
    """What the post-optimization of one workload did (see :class:`DropletResult`).

    ``name`` is the task name (or the workload's structural hash), ``target``
    the :class:`~tvm.target.Target` of its records, ``before`` the mean run time
    of its best record measured again alongside the first candidates, and
    ``record`` (with its mean run time ``after``) the workload's fastest record
    in the database afterwards -- what ``query_schedule`` picks -- when it is of
    another program than the start.

    Parameters
    ----------
    workload : Optional[Workload]
        The database's workload.
    transferred : int
        How many schedules of other workloads were taken over and measured with
        the start (see ``transfer`` of :func:`post_optimize`).
    """

    workload: Optional[Workload] = None
    transferred: int = 0

    @property
    def trials(self) -> int:
        """Programs evaluated: ``measured`` and ``reused`` from the database."""
        return self.measured + self.reused

    @property
    def recovered(self) -> int:
        """Programs whose run times came from the database (``reused``)."""
        return self.reused

    @property
    def wrong_results(self) -> int:
        """Measured programs with wrong outputs, committed as failures (``wrong_outputs``)."""
        return self.wrong_outputs

    def followed_by(self, later: "PostOptimizationResult") -> "PostOptimizationResult":
        """This search and ``later``, which continued it from its best record, as one
        (see :meth:`DropletResult.followed_by`); the schedules taken over add up."""
        return dataclasses.replace(
            super().followed_by(later), transferred=self.transferred + later.transferred
        )


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
    task_weights: Optional[Sequence[float]] = None,
    max_trials_global: Optional[int] = None,
    transfer: bool = True,
    first_pass_trials: Optional[int] = None,
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
    failures says the neighbourhood is all invalid.  With ``transfer``, the
    first batch also holds the fastest schedules of the database's other
    workloads with the same trace instructions, their decisions taken over
    (a network's convolutions of other sizes are tuned by the same rules), and
    the search starts from the fastest of them that beats the start.

    The database is the journal of the search.  Every program built and run
    is committed with ``database.commit_tuning_record`` right after its
    batch, as MetaSchedule's ``AddToDatabase`` measure callback does: a
    failed build or run with ``run_secs = [1e10]``.  A measured program
    faster than the best valid run time seen so far (the database's best
    record of the workload, then the best checked candidate) could become
    the workload's best record: its outputs are first compared with the
    start schedule's on the same random inputs (see
    :class:`~.verification.OutputCheck`), and a mismatch is committed as a
    failure and logged.  The start's own outputs are compared with the
    unscheduled workload's first: a start that computes a wrong result is
    logged, its measurement committed as a failure, and candidates are then
    compared with the unscheduled workload.  Nothing is ever removed or
    rewritten.

    Resuming: the search starts from the workload's best record for the
    target, and every record of the workload for the target whose trace
    (without its postprocessing part) is a point of the search space is given
    to the search first: it is never measured again, failures included.  Only
    the start is measured again, once, in the first batch, so that the
    candidates are compared with run times measured under the same
    conditions.  Re-running the same call after an interruption (Ctrl-C, a
    killed process) therefore measures nothing else twice and appends only
    new records; it starts from the best record committed so far.

    Budget: ``trials`` bounds the programs one call builds and runs for a
    workload, the start's re-measurement included; programs taken from the
    database and programs structurally equal to one already measured do not
    count.  The workloads are searched in descending order of their share of
    the model's run time, the mean run time of their best record times their
    task weight, so that the budget goes first where a faster kernel saves
    the most; ``max_trials_global`` bounds the programs of all workloads
    together, and a workload whose turn comes after it is spent is not
    searched (MetaSchedule's task scheduler spends its ``max_trials_global``
    likewise by weighted run time).

    Parameters
    ----------
    database : Database
        Any MetaSchedule database holding tuning records.
    trials : int
        The budget per workload: programs built and run (at least 1).
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
    task_weights : Optional[Sequence[float]]
        How many times a run of the model runs each task (one weight per task,
        as ``tune_tasks`` takes them); 1 for every workload when omitted.
    max_trials_global : Optional[int]
        The budget of all workloads together; unbounded (``trials`` per
        workload) when omitted.
    transfer : bool
        Whether each search also measures, with the start, the two fastest
        schedules of each of the database's other workloads (a network's other
        tasks) whose traces have the same instructions, their decisions taken
        over where this workload's loops allow them: every workload's fastest
        before any second, at most 8 in all, and at most a quarter of
        ``trials``.  Those of the workloads searched before it are read after
        their search.
    first_pass_trials : Optional[int]
        With ``max_trials_global``, spend it in two passes: first every
        workload in share order with at most ``first_pass_trials``
        measurements, the first pass taking at most a third of
        ``max_trials_global``; then the rest by the shares after that pass, to
        the workloads whose first search used its whole first budget (each
        searched again from its fastest record, without transfer, up to
        ``trials`` in all) and to those the first pass did not reach.  By
        default, with ``transfer``, 9: the start and the 8 schedules taken
        over, a first round that gains most of what a search of 32 gains, so
        that it reaches more workloads; one pass without ``transfer``.  0 for
        one pass, as is a first pass of ``trials`` or more.

    Returns
    -------
    results : List[PostOptimizationResult]
        One per workload, in the order of ``tasks`` (of the database's records
        when omitted); a workload left without budget has ``measured == 0``
        and says so in its ``stop_reason``.

    Raises
    ------
    ValueError
        On bad input (an empty database, an unknown workload, a budget below 1,
        task weights that do not match the tasks, no record for the target, a
        JSON database file cut short by a process stopped mid-write), before
        anything is measured or committed.
    """
    if not is_count(trials):
        raise ValueError(
            f"post-optimization needs a positive number of trials per workload, got {trials!r}"
        )
    shared = SharedBudget(max_trials_global)
    check_first_pass(first_pass_trials, max_trials_global)
    if batch_size is not None and not is_count(batch_size):
        raise ValueError(f"batch_size must be a positive number of programs, got {batch_size!r}")
    if isinstance(pvalue, bool) or not isinstance(pvalue, numbers.Real) or not 0 < pvalue <= 1:
        raise ValueError(f"pvalue must be in (0, 1], got {pvalue!r}")
    if target is not None and not isinstance(target, Target):
        target = Target(target)
    jobs = collect_jobs(database, tasks, target, skip_unusable, task_weights)
    check_appendable(database_files(database))
    searches = []
    for job in jobs:
        try:
            journal = Journal(database, job.workload, job.target)
            searches.append(
                WorkloadSearch(
                    job,
                    journal,
                    pvalue=pvalue,
                    budget=int(trials),
                    batch_size=batch_size,
                    transfer=bool(transfer),
                )
            )
        except ValueError as error:
            if not skip_unusable:
                raise
            logger.warning("Post-optimization skips %s: %s", job.name, error)
    builder = resolve_builder(builder)
    runner = resolve_runner(runner)
    shares = [search.job.share_secs for search in searches]
    total = sum(shares)

    def announce(position: int) -> None:
        job = searches[position].job
        logger.info(
            "Post-optimization of %s: %.1f%% of the model's run time (%.4g us x weight %g)",
            job.name,
            100.0 * shares[position] / total if total else 0.0,
            mean_run_secs(job.record) * 1e6,
            job.weight,
        )

    searched: Set[int] = set()

    def search(position: int, budget: int) -> PostOptimizationResult:
        if position in searched:
            try:
                searches[position] = searches[position].continued()
            except ValueError as error:
                logger.warning(
                    "Post-optimization of %s: no second pass: %s",
                    searches[position].job.name,
                    error,
                )
                return _not_reached(searches[position], f"no second pass: {error}")
            logger.info(
                "Post-optimization of %s: second pass, at most %d more measurements from its "
                "fastest record (%.4g us)",
                searches[position].job.name,
                budget,
                mean_run_secs(searches[position].job.record) * 1e6,
            )
        searched.add(position)
        return _post_optimize_one(searches[position], builder, runner, budget)

    return shared.search_in_share_order(
        shares,
        int(trials),
        search,
        lambda position: _not_reached(searches[position]),
        announce,
        _first_pass(first_pass_trials, max_trials_global, int(trials), bool(transfer), searches),
    )


def _first_pass(
    first_pass_trials: Optional[int],
    max_trials_global: Optional[int],
    trials: int,
    transfer: bool,
    searches: Sequence[WorkloadSearch],
) -> Optional[FirstPass]:
    """The first pass of ``post_optimize`` (see its ``first_pass_trials``); None for one pass."""
    if first_pass_trials is None:
        first_pass_trials = 1 + TRANSFER_SAMPLE if transfer else 0
    if max_trials_global is None or first_pass_trials == 0 or first_pass_trials >= trials:
        return None  # a first pass as large as a workload's budget is the one pass
    return FirstPass(
        int(first_pass_trials),
        lambda position, result: result.after * searches[position].job.weight,
        lambda first, later: first.followed_by(later),
        max_trials=max(1, int(max_trials_global) // 3),
    )


def _not_reached(search: WorkloadSearch, reason: str = NOT_REACHED) -> PostOptimizationResult:
    """The result of a workload not searched: by default, its turn came after the
    shared budget was spent."""
    logged = mean_run_secs(search.job.record)
    logger.info("Post-optimization of %s: not searched, %s", search.job.name, reason)
    return PostOptimizationResult(
        name=search.job.name,
        target=search.job.target,
        before=logged,
        after=logged,
        measured=0,
        stop_reason=reason,
        workload=search.job.workload,
    )


def _post_optimize_one(
    search: WorkloadSearch, builder: Builder, runner: Runner, budget: int
) -> PostOptimizationResult:
    """Run one workload's search, within ``budget`` measurements; its measurements
    are committed as it goes."""
    job = search.job
    logged = mean_run_secs(job.record)
    search.run(builder, runner, budget)
    start = search.search.costs(search.space.start)
    before = mean(start) if start else logged
    result = PostOptimizationResult(
        name=job.name,
        target=job.target,
        before=before,
        after=before,
        measured=search.driver.measured,
        reused=search.reused,
        wrong_outputs=search.wrong_results,
        stop_reason=search.stop_reason,
        converged_after=search.search.converged_after,
        workload=job.workload,
        transferred=search.transferred,
    )
    # Report what the database's queries now pick: the workload's fastest successful
    # record, which need not be the search's centre (faster, but not significantly).
    fastest = search.fastest_record()
    if fastest is not None and trace_key(fastest.trace) != trace_key(job.record.trace):
        result.after = mean_run_secs(fastest)
        result.record = fastest
    logger.info(
        "Post-optimization of %s: %.4g us -> %.4g us (%.3fx; record %.4g us) in %d measurements "
        "(%d records reused, %d wrong results, %d duplicate programs not measured); %s. Centre: %s",
        job.name,
        before * 1e6,
        result.after * 1e6,
        result.speedup,
        logged * 1e6,
        result.measured,
        result.reused,
        result.wrong_outputs,
        search.driver.duplicates,
        result.stop_reason,
        search.space.describe(search.search.centre),
    )
    return result
