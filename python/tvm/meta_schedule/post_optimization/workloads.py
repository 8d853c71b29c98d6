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
"""The workloads a post-optimization works on, checked before anything is measured."""

import json
import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from tvm.contrib.droplet_search import check_task_weights
from tvm.ir import IRModule
from tvm.target import Target

from ..database import Database, TuningRecord, Workload
from ..logging import get_logger
from ..postproc import Postproc
from ..tune_context import TuneContext, _normalize_mod
from ..utils import shash2hex
from .programs import seconds, structural_equal, structural_hash

logger = get_logger(__name__)  # pylint: disable=invalid-name

# MetaSchedule records a failed measurement with this run time (AddToDatabase).
FAILED_RUN_SECS = 1e10


@dataclass
class PostOptimizationJob:
    """One workload to post-optimize, with everything checked up front.

    Parameters
    ----------
    name : str
        The task name, or the workload's structural hash.
    workload : Workload
        The database's workload.
    target : Target
        The target of its best record.
    record : TuningRecord
        Its fastest successful record for ``target``: the start of the search.
    postprocs : List[Postproc]
        The postprocessors every candidate goes through.
    weight : float
        How many times a run of the model runs the workload (the task weight).
    """

    name: str
    workload: Workload
    target: Target
    record: TuningRecord
    postprocs: List[Postproc] = field(default_factory=list)
    weight: float = 1.0

    @property
    def share_secs(self) -> float:
        """The workload's part of the model's run time: its best record's mean x its weight."""
        return mean_run_secs(self.record) * self.weight


def mean_run_secs(record: TuningRecord) -> Optional[float]:
    """The mean run time of a successful record, None for a failed one."""
    values = seconds(record.run_secs)
    if not values:
        return None
    mean = sum(values) / len(values)
    if not math.isfinite(mean) or mean >= FAILED_RUN_SECS:
        return None
    return mean


def _canonical(value):
    """Plain, order-independent Python form of a target's exported attributes."""
    if hasattr(value, "items"):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or (
        hasattr(value, "__len__") and hasattr(value, "__getitem__") and not isinstance(value, str)
    ):
        return [_canonical(item) for item in value]
    if isinstance(value, (bool, int, float)):
        return value
    if isinstance(getattr(value, "value", None), (int, float)):  # IntImm, FloatImm
        return value.value
    return str(value)


def same_target(first: Target, second: Target) -> bool:
    """Whether two targets are equal.

    Neither ``str(target)`` (which depends on attribute order) nor structural
    equality (a target read back from a JSON database holds ``num-cores`` as an
    int64 immediate, a new one as an int32) says so reliably: their exported
    attributes, as plain values, do.
    """
    return json.dumps(_canonical(first.export()), sort_keys=True) == json.dumps(
        _canonical(second.export()), sort_keys=True
    )


def _best_record(database: Database, workload: Workload, target: Optional[Target]):
    """The fastest successful record of ``workload`` (for ``target`` when given).

    Returns ``(record, targets)``: the record or None, and the distinct targets
    of all successful records of the workload (for error messages).
    """
    records = database.get_top_k(workload, len(database))
    best, best_mean, targets = None, None, []
    for record in records:
        mean = mean_run_secs(record)
        if mean is None or record.target is None:
            continue
        if not any(same_target(record.target, known) for known in targets):
            targets.append(record.target)
        if target is not None and not same_target(record.target, target):
            continue
        if best_mean is None or mean < best_mean:
            best, best_mean = record, mean
    return best, targets


def _postprocs_for(mod: IRModule, target: Target, name: str) -> List[Postproc]:
    """The postprocessors MetaSchedule's default space generator uses for ``target``."""
    context = TuneContext(
        mod=mod, target=target, space_generator="post-order-apply", task_name=name
    )
    return list(context.space_generator.postprocs)


def records_by_workload(
    records: Iterable[TuningRecord],
) -> List[Tuple[Workload, List[TuningRecord]]]:
    """Tuning records grouped by workload (structurally equal modules), in the order the
    records first name each workload; each group's records in their own order."""
    buckets: Dict[int, List[Tuple[Workload, List[TuningRecord]]]] = {}
    groups: List[Tuple[Workload, List[TuningRecord]]] = []
    for record in records:
        bucket = buckets.setdefault(structural_hash(record.workload.mod), [])
        for workload, members in bucket:
            if structural_equal(workload.mod, record.workload.mod):
                members.append(record)
                break
        else:
            bucket.append((record.workload, [record]))
            groups.append(bucket[-1])
    return groups


def _database_workloads(database: Database) -> List[Workload]:
    """The distinct workloads of the database's tuning records, in record order."""
    return [workload for workload, _ in records_by_workload(database.get_all_tuning_records())]


def _database_jobs(database: Database, target: Optional[Target]) -> List[PostOptimizationJob]:
    """A job for each workload of the database with a successful record (for ``target``)."""
    jobs: List[PostOptimizationJob] = []
    present: List[Target] = []
    skipped = 0
    for workload in _database_workloads(database):
        name = shash2hex(workload.mod)
        record, targets = _best_record(database, workload, target)
        present.extend(
            found for found in targets if not any(same_target(found, known) for known in present)
        )
        if record is None:
            skipped += 1
            continue
        postprocs = _postprocs_for(workload.mod, record.target, name)
        jobs.append(PostOptimizationJob(name, workload, record.target, record, postprocs))
    if not jobs:
        if target is None:
            raise ValueError("the database has no successful tuning record to start from")
        raise ValueError(
            f"target mismatch: the database has no successful tuning record for target "
            f"{str(target)!r}; its records are for {[str(found) for found in present]}"
        )
    if skipped:
        logger.info(
            "Post-optimization skips %d workload(s) without a successful record for %s",
            skipped,
            target,
        )
    return jobs


def _task_job(
    database: Database,
    task: Union[TuneContext, IRModule, Workload],
    name: str,
    target: Optional[Target],
) -> PostOptimizationJob:
    """The job of one task; raises ValueError when it cannot be post-optimized."""
    postprocs: Optional[List[Postproc]] = None
    if isinstance(task, TuneContext):
        name = task.task_name or name
        mod = task.mod
        if task.target is not None:
            if target is not None and not same_target(target, task.target):
                raise ValueError(
                    f"target mismatch: task {name!r} is for {str(task.target)!r}, "
                    f"but post-optimization was asked for {str(target)!r}"
                )
            target = task.target
        if task.space_generator is not None and task.space_generator.postprocs is not None:
            postprocs = list(task.space_generator.postprocs)
    elif isinstance(task, Workload):
        mod = task.mod
    else:
        mod = _normalize_mod(task)
    if mod is None:
        raise ValueError(f"task {name!r} has no module to post-optimize")
    if not database.has_workload(mod):
        raise ValueError(
            f"unknown workload: the database has no workload equal to the module of "
            f"task {name!r} (structural hash {shash2hex(mod)}); tune it first"
        )
    workload = database.commit_workload(mod)  # the existing workload: nothing is written
    record, targets = _best_record(database, workload, target)
    if record is None:
        if targets and target is not None:
            raise ValueError(
                f"target mismatch: the database's records of task {name!r} are for "
                f"{[str(found) for found in targets]}, not for {str(target)!r}"
            )
        raise ValueError(f"the database has no successful tuning record of task {name!r}")
    if postprocs is None:
        postprocs = _postprocs_for(mod, record.target, name)
    return PostOptimizationJob(name, workload, record.target, record, postprocs)


def collect_jobs(
    database: Database,
    tasks: Optional[Sequence[Union[TuneContext, IRModule, Workload]]],
    target: Optional[Target],
    skip_unusable: bool,
    task_weights: Optional[Sequence[float]] = None,
) -> List[PostOptimizationJob]:
    """Check the input and pair each workload with its best record.

    Parameters
    ----------
    database : Database
        The database of tuning records.
    tasks : Optional[Sequence[Union[TuneContext, IRModule, Workload]]]
        The tasks to post-optimize, or None for every workload of the database.
    target : Optional[Target]
        The target whose records are exploited, or None for each task's own.
    skip_unusable : bool
        Log and skip the tasks that cannot be post-optimized instead of raising.
    task_weights : Optional[Sequence[float]]
        The weight of each task (see :func:`check_task_weights`); 1 by default.

    Returns
    -------
    jobs : List[PostOptimizationJob]
        One per workload to post-optimize.

    Raises
    ------
    ValueError
        Naming the problem, before anything is measured or committed.
    """
    if len(database) == 0:
        if skip_unusable:
            logger.info("Post-optimization skipped: the database has no tuning record")
            return []
        raise ValueError(
            "post-optimization needs tuning records, but the database is empty: "
            "tune the workloads first (e.g. with tune_tir or tune_tasks)"
        )
    weights = check_task_weights(task_weights, tasks)
    if tasks is None:
        return _database_jobs(database, target)
    if len(tasks) == 0:
        raise ValueError("post-optimization was given an empty list of tasks")
    jobs = []
    for position, task in enumerate(tasks):
        try:
            job = _task_job(database, task, f"task {position}", target)
            if weights is not None:
                job.weight = weights[position]
            jobs.append(job)
        except ValueError as error:
            if not skip_unusable:
                raise
            logger.info("Post-optimization skips task %d: %s", position, error)
    return jobs
