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
"""``PostOpt``: post-optimization of the JSON database in a tuning work directory."""

import os
from typing import List, Union

from tvm.target import Target

from ..builder import Builder
from ..database import JSONDatabase
from ..runner import Runner
from .defaults import DEFAULT_TRIALS
from .journal import check_appendable
from .post_optimizer import PostOptimizationResult, post_optimize


class PostOpt:
    """Post-optimize every workload tuned in ``work_dir``.

    The database is the one ``tune_tir`` / ``tune_tasks`` write there
    (``database_workload.json`` and ``database_tuning_record.json``); every
    measurement is appended to it, and running again resumes from it.  See
    :func:`post_optimize` for the search, the journal and the budget.

    Parameters
    ----------
    work_dir : str
        The working directory of a tuning run.
    target : Union[str, dict, Target]
        The target whose records are exploited.
    trials : int
        The budget per workload: distinct programs evaluated, measured or
        recovered from the database.
    builder : Builder.BuilderType
        The builder; ``"local"`` works on small machines (see ``default_builder``).
    runner : Runner.RunnerType
        The runner and its evaluator configuration.
    """

    def __init__(
        self,
        work_dir: str,
        target: Union[str, dict, Target],
        trials: int = DEFAULT_TRIALS,
        *,
        builder: Builder.BuilderType = "local",
        runner: Runner.RunnerType = "local",
    ) -> None:
        self.work_dir = work_dir
        self.target = target if isinstance(target, Target) else Target(target)
        self.trials = trials
        self.builder = builder
        self.runner = runner

    def run(self) -> List[PostOptimizationResult]:
        """Execute the post-optimization.

        Returns
        -------
        results : List[PostOptimizationResult]
            What was done for each workload.

        Raises
        ------
        ValueError
            When a database file is missing, or has a line that is not a JSON
            record (a record cut short by a process stopped mid-write); the
            files are left as they are.
        """
        paths = [
            os.path.join(self.work_dir, "database_workload.json"),
            os.path.join(self.work_dir, "database_tuning_record.json"),
        ]
        missing = [path for path in paths if not os.path.isfile(path)]
        if missing:
            raise ValueError(f"no tuning database in {self.work_dir!r}: missing {missing}")
        check_appendable(paths)
        database = JSONDatabase(*paths, allow_missing=False)
        return post_optimize(
            database, self.trials, target=self.target, builder=self.builder, runner=self.runner
        )
