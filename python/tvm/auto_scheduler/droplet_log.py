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
"""The auto-scheduler log as the journal of a Droplet exploitation.

The exploitation reads the log once, refusing a damaged one with the file and
line named (TVM's own readers fail on it obscurely), and indexes the records by
task (workload key and target) and by state, so that states measured before
are taken from the log instead of being measured again.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tvm._ffi.base import TVMError
from tvm.contrib.droplet_search import error_summary, has_lower_mean, mean
from tvm.contrib.droplet_search.journal import check_json_lines

from . import _ffi_api
from .measure import MeasureErrorNo, MeasureInput, MeasureResult
from .measure_record import load_record_from_string

Record = Tuple[MeasureInput, MeasureResult]


def costs_of(result: MeasureResult) -> Optional[Tuple[float, ...]]:
    """The costs of a successful measurement, None for a failed one."""
    if result.error_no != MeasureErrorNo.NO_ERROR or len(result.costs) == 0:
        return None
    return tuple(float(cost.value) for cost in result.costs)


def state_key(measure_input: MeasureInput) -> str:
    """A canonical key of the state of a measure input: its serialized transform steps.

    Two inputs of the same task have the same key exactly when their states
    have the same steps, i.e. describe the same program.

    Parameters
    ----------
    measure_input : MeasureInput
        The input.

    Returns
    -------
    key : str
        The JSON text of the state's steps.
    """
    return steps_key(steps_of(measure_input))


def steps_of(measure_input: MeasureInput) -> list:
    """The transform steps of a measure input's state, in the record format."""
    return json.loads(_ffi_api.SerializeMeasureInput(measure_input))[1][1]


def steps_key(steps: list) -> str:
    """The :func:`state_key` of a list of transform steps (record format)."""
    return json.dumps(steps, separators=(",", ":"))


def read_log(log_file: str) -> List[Record]:
    """Read every record of an auto-scheduler log, refusing a damaged one.

    Lines starting with ``#`` or a space are comments, as for
    :class:`~tvm.auto_scheduler.RecordReader`.  The log is only read.

    Parameters
    ----------
    log_file : str
        The log to read.

    Returns
    -------
    records : List[Tuple[MeasureInput, MeasureResult]]
        The records, in file order.

    Raises
    ------
    ValueError
        When the file does not exist, holds no record, has a blank line or a
        line that is not an auto-scheduler record (TVM's reader fails on them
        too), or its last line is incomplete or lacks its newline (a process
        killed while writing it; the next record appended would be glued to it).
    """
    if not os.path.isfile(log_file):
        raise ValueError(f"the auto-scheduler log {log_file} does not exist")
    check_json_lines(log_file, "the auto-scheduler log", comment_prefixes=(b"#", b" "))
    records = []
    with open(log_file, encoding="utf-8") as stream:
        for number, line in enumerate(stream, 1):
            if line[0] in "# ":
                continue
            try:
                record = load_record_from_string(line)
            except TVMError as err:
                raise ValueError(
                    f"line {number} of the auto-scheduler log {log_file} is not an "
                    f"auto-scheduler record: {error_summary(err)}"
                ) from None
            if record[0].task is None:  # e.g. "{}": TVM's reader gives an input without task
                raise ValueError(
                    f"line {number} of the auto-scheduler log {log_file} is not an "
                    "auto-scheduler record: it names no task"
                )
            records.append(record)
    if not records:
        raise ValueError(f"the auto-scheduler log {log_file} holds no record")
    return records


@dataclass
class TaskRecords:
    """The records of one task (workload key and target) in a log.

    Parameters
    ----------
    records : List[Record]
        Every record of the task, in log order.
    best : Optional[Record]
        The successful record with the lowest mean cost.
    """

    records: List[Record] = field(default_factory=list)
    best: Optional[Record] = None

    def add(self, record: Record) -> None:
        """Add a record of the task."""
        self.records.append(record)
        best_costs = None if self.best is None else costs_of(self.best[1])
        if has_lower_mean(costs_of(record[1]), best_costs):
            self.best = record

    def by_state(self) -> Dict[str, Record]:
        """The record to reuse for each state: its fastest success, else its last failure."""
        chosen: Dict[str, Record] = {}
        for record in self.records:
            key = state_key(record[0])
            previous = chosen.get(key)
            if previous is not None:
                previous_costs = costs_of(previous[1])
                if previous_costs and not has_lower_mean(costs_of(record[1]), previous_costs):
                    continue
            chosen[key] = record
        return chosen


def records_by_task(records: List[Record], target: str) -> Dict[str, TaskRecords]:
    """The records of ``target``, by workload key, in the order the log first names them."""
    tasks: Dict[str, TaskRecords] = {}
    for record in records:
        task = record[0].task
        if str(task.target) == target:
            tasks.setdefault(task.workload_key, TaskRecords()).add(record)
    return tasks


def best_cost_of_workload(records: List[Record], workload_key: str, target) -> float:
    """The lowest mean cost of a successful record of a workload, for the targets that
    share a key with ``target``.

    :class:`~tvm.auto_scheduler.ApplyHistoryBest` compares the records of a
    workload across the targets that share a target key (e.g. ``cpu``), so a
    record of another such target may be the one it picks.

    Parameters
    ----------
    records : List[Record]
        The records of a log.
    workload_key : str
        The workload.
    target : Target
        The target the records are compared for.

    Returns
    -------
    cost : float
        The lowest mean cost (seconds); infinity when no such record succeeded.
    """
    keys = {str(key) for key in target.keys}
    costs = [
        costs_of(result)
        for measure_input, result in records
        if measure_input.task.workload_key == workload_key
        and keys & {str(key) for key in measure_input.task.target.keys}
    ]
    return min((mean(value) for value in costs if value is not None), default=float("inf"))
