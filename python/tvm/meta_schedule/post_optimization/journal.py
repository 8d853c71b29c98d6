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
measurements there, failures included, and does not measure them again.
Nothing is ever removed or rewritten: records are only appended through
``commit_tuning_record``.
"""

from typing import List, Optional, Sequence

from tvm.contrib.droplet_search.journal import check_json_lines
from tvm.target import Target
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..database import Database, TuningRecord, Workload
from ..logging import get_logger
from .programs import structural_equal
from .workloads import FAILED_RUN_SECS, mean_run_secs, records_by_workload, same_target

logger = get_logger(__name__)  # pylint: disable=invalid-name


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
        # Every record, failures included (get_top_k would leave those out).
        self.records: List[TuningRecord] = [
            record
            for record in database.get_all_tuning_records()
            if record.target is not None
            and same_target(record.target, target)
            and _same_workload(record.workload, workload)
        ]
        self.committed = 0

    def related(self) -> List[List[TuningRecord]]:
        """The successful records of the database's other workloads for the target.

        Read when called, so that the records a post-optimization committed for
        the workloads it searched before are among them.

        Returns
        -------
        related : List[List[TuningRecord]]
            One list per other workload, in the database's order of workloads,
            its records fastest first.
        """
        successes = (
            record
            for record in self.database.get_all_tuning_records()
            if record.target is not None
            and mean_run_secs(record) is not None
            and same_target(record.target, self.target)
        )
        return [
            sorted(records, key=mean_run_secs)
            for workload, records in records_by_workload(successes)
            if not _same_workload(workload, self.workload)
        ]

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
        return record


def _same_workload(first: Workload, second: Workload) -> bool:
    return first.same_as(second) or bool(structural_equal(first.mod, second.mod))


def database_files(database: Database) -> List[str]:
    """The files a JSONDatabase appends to; none for other databases."""
    paths = [getattr(database, name, None) for name in ("path_workload", "path_tuning_record")]
    return [str(path) for path in paths if path is not None]


def check_appendable(paths: Sequence[str]) -> None:
    """Check that the JSON database files ``paths`` can be read and appended to.

    A process killed while TVM appends a record can leave a last line cut
    short; TVM's JSONDatabase then fails to load without naming the file, and a
    record appended after a line missing its newline would be glued to it.
    This names the file and the line instead (see
    :func:`tvm.contrib.droplet_search.journal.check_json_lines`); it never
    changes the files: the user decides what to do with the cut record.

    Parameters
    ----------
    paths : Sequence[str]
        The files of a JSONDatabase (missing files are skipped).

    Raises
    ------
    ValueError
        When a line is blank or not valid JSON (TVM's reader fails on both), or
        a file does not end with a newline.
    """
    for path in paths:
        check_json_lines(path, "the database file")
