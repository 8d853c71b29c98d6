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
"""A cost model that orders a workload's candidates, trained on its measurements."""

from typing import List, Optional, Sequence, Union

from tvm.ir import IRModule
from tvm.target import Target
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..cost_model import CostModel
from ..database import TuningRecord
from ..logging import get_logger
from ..runner import RunnerResult
from ..search_strategy import MeasureCandidate
from ..tune_context import TuneContext
from .programs import seconds
from .workloads import mean_run_secs

logger = get_logger(__name__)  # pylint: disable=invalid-name

CostModelChoice = Union[None, str, CostModel]
"""``"xgb"``, a :class:`~tvm.meta_schedule.cost_model.CostModel`, or None (no ranking)."""


def resolve_cost_model(cost_model: CostModelChoice) -> Optional[CostModel]:
    """The cost model ``post_optimize`` was given, created when named.

    ``"xgb"`` is a new :class:`~tvm.meta_schedule.cost_model.XGBModel` that
    predicts from its first training sample on (no warm-up of random scores)
    and retrains on every batch.

    Raises
    ------
    ValueError
        For another name, another type, or ``"xgb"`` without the xgboost package.
    """
    if cost_model is None or isinstance(cost_model, CostModel):
        return cost_model
    if cost_model != "xgb":
        raise ValueError(
            f"cost_model must be 'xgb', a meta_schedule CostModel or None, got {cost_model!r}"
        )
    try:
        import xgboost  # type: ignore # pylint: disable=import-outside-toplevel,unused-import
    except ImportError as error:
        raise ValueError(
            "cost_model='xgb' needs the xgboost package (pip install xgboost); "
            "pass cost_model=None to search in the neighbourhood's own order"
        ) from error
    from ..cost_model import XGBModel  # pylint: disable=import-outside-toplevel

    return XGBModel(num_warmup_samples=0, adaptive_training=False)


class CandidateRanking:
    """Scores a workload's candidate schedules with a cost model of its measurements.

    The model learns the workload's database records before the search and
    every batch the search measures; it scores the candidates of the next
    batch (higher is more promising), which the engine measures first.

    Parameters
    ----------
    cost_model : CostModel
        The model: trained here, possibly shared with other workloads (it keeps
        one group of samples per workload).
    mod : IRModule
        The workload.
    target : Target
        Its target.
    """

    def __init__(self, cost_model: CostModel, mod: IRModule, target: Target):
        self.cost_model = cost_model
        self.mod = mod
        self.context = TuneContext(mod=mod, target=target, task_name="post-optimization")
        self.learned = 0

    @staticmethod
    def _candidate(schedule: Schedule) -> MeasureCandidate:
        return MeasureCandidate(schedule, ArgInfo.from_entry_func(schedule.mod, remove_preproc=True))

    def learn(
        self, schedules: Sequence[Optional[Schedule]], run_secs: Sequence[Optional[list]]
    ) -> None:
        """Train on measured schedules; ``run_secs`` None for a failure (a None schedule is skipped)."""
        pairs = [(sch, secs) for sch, secs in zip(schedules, run_secs) if sch is not None]
        if not pairs:
            return
        candidates = [self._candidate(sch) for sch, _ in pairs]
        results = [
            RunnerResult(run_secs=list(secs), error_msg=None)
            if secs
            else RunnerResult(run_secs=None, error_msg="failed")
            for _, secs in pairs
        ]
        self.cost_model.update(self.context, candidates, results)
        self.learned += len(pairs)

    def learn_records(self, records: Sequence[TuningRecord]) -> None:
        """Train on database records of the workload, replayed as ``query_schedule`` does.

        Records whose trace no longer replays are left out.
        """
        schedules, run_secs = [], []
        for record in records:
            sch = Schedule(self.mod, debug_mask="none", error_render_level="none")
            try:
                record.trace.apply_to_schedule(sch, remove_postproc=False)
            except Exception:  # pylint: disable=broad-except
                continue
            schedules.append(sch)
            run_secs.append(seconds(record.run_secs) if mean_run_secs(record) is not None else None)
        self.learn(schedules, run_secs)

    def scores(self, schedules: Sequence[Schedule]) -> List[float]:
        """The model's predicted throughput of each schedule, higher first."""
        if not self.learned:
            return [0.0] * len(schedules)
        predicted = self.cost_model.predict(
            self.context, [self._candidate(sch) for sch in schedules]
        )
        return [float(score) for score in predicted]
