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
"""Tuner with the Droplet Search algorithm.

The tuner maps the knobs of a task's :any:`ConfigSpace` onto the points of
:class:`tvm.contrib.droplet_search.DropletSearch`: a point is the knob-index
vector of a configuration (``ConfigSpace.point2knob`` of its index), the size
of dimension ``i`` is the number of values of knob ``i``, and a point is valid
when ``ConfigSpace.is_index_valid`` accepts its index (the space's
``multi_filter``; per-knob filters already shrink the knobs).  All search
decisions -- neighbourhood walk, boundaries, statistical acceptance, stopping --
are made by the engine; see its documentation.
"""
import json
import logging
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from tvm.contrib.droplet_search import DropletSearch

from ..measure import MeasureErrorNo
from .tuner import Tuner

LOGGER = logging.getLogger("autotvm")


class DropletTuner(Tuner):
    """Tuner with the Droplet Search algorithm (Canesche et al., ACM TACO 2024).

    Starting from ``start_position`` (the unoptimised kernel at the origin of
    the knob space by default), the tuner measures the neighbours of the best
    configuration along each knob, in both directions, at growing step
    lengths, moves to a neighbour when it is faster (a one-sided Welch t-test
    at ``pvalue`` when both have at least two costs, a plain mean comparison
    otherwise), and stops once the neighbourhood of the best configuration is
    exhausted.  Configurations rejected by the space's filters are never
    proposed and none is proposed twice.

    Parameters
    ----------
    task : autotvm.task.Task
        The tuning task.
    start_position : Optional[Sequence[int]]
        The knob-index vector to start from, one index per knob.  Defaults to
        the origin ``[0, 0, ..., 0]``, or, when the space's filter rejects the
        origin, to the valid configuration with the lowest index.
    pvalue : float
        Significance level of the test that accepts a faster configuration.
    batch_size : Optional[int]
        How many configurations are proposed together before the search
        decides where to move (one round).  A round larger than the batch the
        tuning loop asks for is handed out over several batches; a smaller one
        caps the batches.  Defaults to the size of each batch the tuning loop
        asks for, that is the parallel measurement capacity.
    failure_limit : Optional[int]
        How many failed measurements in a row end the search (an all-invalid
        neighbourhood).  Defaults to twice the number of knobs (at least 1).
    """

    def __init__(
        self,
        task,
        start_position: Optional[Sequence[int]] = None,
        pvalue: float = 0.05,
        *,
        batch_size: Optional[int] = None,
        failure_limit: Optional[int] = None,
    ):
        super().__init__(task)
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be a positive number of configs, got {batch_size}")
        self.dims: List[int] = [int(size) for size in self.space.dims]
        self.pvalue = pvalue
        self.batch_size = batch_size
        self.search = DropletSearch(
            self.dims,
            self._start_point(start_position),
            pvalue=pvalue,
            is_valid=lambda point: self.space.is_index_valid(self._index(point)),
            failure_limit=failure_limit,
            logger=LOGGER,
        )
        # Points of the current round drawn from the search, not yet handed out.
        self._pending: List[Tuple[int, ...]] = []
        # Config index -> point, handed out by next_batch and awaiting update.
        self._handed: Dict[int, Tuple[int, ...]] = {}

    def _index(self, point: Sequence[int]) -> int:
        return int(self.space.knob2point(list(point)))

    def _point(self, index: int) -> Tuple[int, ...]:
        return tuple(int(knob) for knob in self.space.point2knob(index))

    def _start_point(self, start_position: Optional[Sequence[int]]) -> Tuple[int, ...]:
        if start_position is None:
            index = 0
            if not self.space.is_index_valid(index):
                index = self.space.get_next_index(index)
                if index is None:
                    raise ValueError(f"the config space of task {self.task} has no valid config")
            return self._point(index)
        start = tuple(int(knob) for knob in start_position)
        if len(start) != len(self.dims):
            raise ValueError(
                f"start_position {list(start_position)} has {len(start)} knob indices, "
                f"the config space has {len(self.dims)} knobs of sizes {self.dims}"
            )
        for knob, (value, size) in enumerate(zip(start, self.dims)):
            if not 0 <= value < size:
                raise ValueError(
                    f"start_position {list(start_position)} is out of range on knob {knob} "
                    f"(size {size})"
                )
        if not self.space.is_index_valid(self._index(start)):
            raise ValueError(
                f"start_position {list(start_position)} (config index {self._index(start)}) "
                "is rejected by the config space's filter"
            )
        return start

    @property
    def visited(self) -> Set[int]:
        """Indices of the configs measured, loaded from history, or out for measurement."""
        points = list(self.search.measured) + self._pending + list(self._handed.values())
        return {self._index(point) for point in points}

    @property
    def best_choice(self) -> Optional[Tuple[int, List[int], Tuple[float, ...]]]:
        """The best config found as ``(index, knob indices, costs)``; None before any success."""
        best = self.search.best
        if best is None:
            return None
        point, costs = best
        return self._index(point), list(point), costs

    def next_batch(self, batch_size):
        if batch_size < 1:
            raise ValueError(f"next_batch needs a positive batch_size, got {batch_size}")
        if not self._pending and not self._handed:
            self._pending = self.search.ask(self.batch_size or batch_size)
        taken, self._pending = self._pending[:batch_size], self._pending[batch_size:]
        configs = []
        for point in taken:
            index = self._index(point)
            self._handed[index] = point
            configs.append(self.space.get(index))
        return configs

    def update(self, inputs, results):
        for inp, res in zip(inputs, results):
            index = inp.config.index
            point = self._handed.pop(index, None)
            if point is None:
                LOGGER.debug("DropletTuner ignores config %d: it did not propose it", index)
                continue
            self.search.tell(point, res.costs if res.error_no == MeasureErrorNo.NO_ERROR else None)

    def has_next(self):
        if self._pending:
            return True
        return not self._handed and not self.search.finished

    def load_history(self, data_set, min_seed_records=500):
        """Resume from earlier tuning records of the same task.

        Every record whose task has the same workload and target as this
        tuner's, and whose config still belongs to the space, is given to the
        search as already measured: it is never proposed again, failed records
        included, and the search continues from the fastest one.

        Parameters
        ----------
        data_set : Iterable[Tuple[autotvm.measure.MeasureInput, autotvm.measure.MeasureResult]]
            Tuning records, for example ``autotvm.record.load_from_file(path)``;
            records of other tasks are skipped.
        min_seed_records : int
            Accepted for compatibility with :any:`Tuner.load_history`; the
            search resumes from any number of records, so it is not used.
        """
        if self._pending or self._handed:
            raise RuntimeError(
                "DropletTuner.load_history must be called between rounds, "
                "not while configs are out for measurement"
            )
        costs, failed, skipped = self._records_of_task(data_set)
        for index in sorted(failed - set(costs)):
            self.search.observe(self._point(index), None)
        for index, index_costs in sorted(costs.items()):
            self.search.observe(self._point(index), index_costs)
        if not costs and not failed:
            LOGGER.debug("DropletTuner found no records of %s to resume from", self.task.name)
        else:
            best = self.best_choice
            LOGGER.info(
                "DropletTuner resumes from %d measured configs of %s (%d failed); %s",
                len(set(costs) | failed),
                self.task.name,
                len(failed - set(costs)),
                "best so far: config %d" % best[0] if best else "none succeeded",
            )
        if skipped:
            LOGGER.warning(
                "DropletTuner skipped %d records of %s whose config is not in the current space",
                skipped,
                self.task.name,
            )

    def _records_of_task(self, data_set: Iterable) -> Tuple[Dict[int, List[float]], Set[int], int]:
        """The costs of successful and the indices of failed records of this task."""
        target = str(self.task.target)
        costs: Dict[int, List[float]] = {}
        failed: Set[int] = set()
        skipped = 0
        for inp, res in data_set:
            if inp.task.workload != self.task.workload or str(inp.target) != target:
                continue
            index = inp.config.index
            if not self._config_in_space(inp.config):
                skipped += 1
                continue
            if res.error_no == MeasureErrorNo.NO_ERROR and res.costs:
                costs.setdefault(index, []).extend(float(cost) for cost in res.costs)
            else:
                failed.add(index)
        return costs, failed, skipped

    def _config_in_space(self, config) -> bool:
        """Whether a logged config is the valid config of the same index in this space."""
        index = config.index
        if not 0 <= index < self.space.range_length or not self.space.is_index_valid(index):
            return False

        def entities(entity):
            return json.loads(json.dumps(entity.to_json_dict()["entity"]))

        return entities(config) == entities(self.space.get(index))
