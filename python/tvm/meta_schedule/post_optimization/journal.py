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
"""The user's database as the journal of a post-optimization.

Every program the post-optimizer builds and runs is committed to the database
right after its batch, as MetaSchedule's ``AddToDatabase`` measure callback
commits the candidates of the evolutionary search: a failed build or run (or,
here, a wrong result) is committed with ``run_secs = [1e10]``.  A
post-optimization run again on the same database finds its earlier
measurements there and reuses them instead of measuring again.

Records are matched by their trace without its postprocessing part, rendered
as Python (``Trace.as_python(remove_postproc=True)``): it names every
instruction, decision and annotation value, and replaying it is
deterministic, so equal texts are the same program.  Nothing is ever removed
or rewritten: records are only appended through ``commit_tuning_record``.
"""

import json
import logging
import os
from typing import Dict, List, Optional, Sequence

from tvm.target import Target
from tvm.tir.schedule import Schedule, Trace

from ..arg_info import ArgInfo
from ..database import Database, TuningRecord, Workload
from .candidates import seconds
from .workloads import FAILED_RUN_SECS, mean_run_secs, target_key

logger = logging.getLogger("meta_schedule")  # pylint: disable=invalid-name


def trace_key(trace: Trace) -> str:
    """The text identifying the program of a trace: its non-postprocessing part."""
    return "\n".join(str(line) for line in trace.as_python(remove_postproc=True))


class Journal:
    """The records of one workload and target, and the commits of new ones.

    Parameters
    ----------
    database : Database
        The user's database.
    workload : Workload
        The workload being post-optimized (already in the database).
    target : Target
        The target the candidates are measured for; records of other targets
        are not reused.
    """

    def __init__(self, database: Database, workload: Workload, target: Target):
        self.database = database
        self.workload = workload
        self.target = target
        self._recorded: Dict[str, Optional[list]] = {}
        key = target_key(target)
        for record in database.get_top_k(workload, len(database)):
            if record.target is None or target_key(record.target) != key:
                continue
            self._remember(trace_key(record.trace), record.run_secs, mean_run_secs(record))
        self.committed = 0

    def _remember(self, key: str, run_secs, mean: Optional[float]) -> None:
        """Keep the fastest successful run times of a program, None if all failed."""
        if mean is None:
            self._recorded.setdefault(key, None)
            return
        known = self._recorded.get(key)
        if known is None or mean < _mean(known):
            self._recorded[key] = list(run_secs)

    def __contains__(self, schedule: Schedule) -> bool:
        return trace_key(schedule.trace) in self._recorded

    def run_secs(self, schedule: Schedule) -> Optional[list]:
        """The recorded run times of ``schedule``'s program, None when it failed.

        A program with several records takes the fastest successful one; it is
        a failure only when all its records are failures.
        """
        return self._recorded[trace_key(schedule.trace)]

    def commit(self, schedule: Schedule, run_secs: Optional[Sequence]) -> TuningRecord:
        """Append the measurement of ``schedule`` to the database.

        Parameters
        ----------
        schedule : Schedule
            The postprocessed schedule that was built and run.
        run_secs : Optional[Sequence]
            Its measured run times, or None for a failure (committed as
            ``[1e10]``, MetaSchedule's failure record).

        Returns
        -------
        record : TuningRecord
            The committed record.
        """
        secs = list(run_secs) if run_secs else [FAILED_RUN_SECS]
        record = TuningRecord(
            schedule.trace,
            self.workload,
            secs,
            self.target,
            ArgInfo.from_entry_func(schedule.mod, remove_preproc=True),
        )
        self.database.commit_tuning_record(record)
        self.committed += 1
        self._remember(trace_key(schedule.trace), secs, mean_run_secs(record))
        return record


def _mean(run_secs) -> float:
    values = seconds(run_secs)
    return sum(values) / len(values)


def database_files(database: Database) -> List[str]:
    """The files a JSONDatabase appends to; none for other databases."""
    paths = [getattr(database, name, None) for name in ("path_workload", "path_tuning_record")]
    return [str(path) for path in paths if path is not None]


def check_appendable(paths: Sequence[str]) -> None:
    """Check that the JSON database files ``paths`` can be read and appended to.

    A process killed while TVM appends a record can leave a last line cut short.
    TVM's JSONDatabase then fails to load without naming the file, and a record
    appended after a line missing its newline would be glued to it.  This check
    names the file and the line instead; it reads the files and never changes
    them: the user decides what to do with the cut record.

    Parameters
    ----------
    paths : Sequence[str]
        The files of a JSONDatabase (missing files are skipped).

    Raises
    ------
    ValueError
        When a line is not valid JSON or the file does not end with a newline.
    """
    for path in paths:
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as stream:
            data = stream.read()
        if not data:
            continue
        lines = data.split(b"\n")
        for number, line in enumerate(lines[:-1], start=1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except ValueError:
                cut = " (cut short: the process writing it was stopped mid-write?)"
                raise ValueError(
                    f"line {number} of the database file {path!r} is not a JSON record"
                    f"{cut if number == len(lines) - 1 else ''}; remove or repair that line "
                    "before using the database"
                ) from None
        if lines[-1]:
            raise ValueError(
                f"the database file {path!r} does not end with a newline: its last record "
                f"(line {len(lines)}) was cut short by a process stopped mid-write, and "
                "TVM would glue the next record to it; remove or complete that line before "
                "using the database"
            )
