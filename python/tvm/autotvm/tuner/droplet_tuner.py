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
import operator
import os
from collections.abc import Mapping
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from tvm.contrib.droplet_search import DropletSearch

from ..env import GLOBAL_SCOPE
from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from ..record import decode
from .tuner import Tuner

LOGGER = logging.getLogger("autotvm")


class _TaskLogger(logging.LoggerAdapter):
    """Prefixes the search's messages with the name of the task being tuned."""

    def process(self, msg, kwargs):
        return "DropletTuner [%s]: %s" % (self.extra["task"], msg), kwargs


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
            logger=_TaskLogger(LOGGER, {"task": task.name}),
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
        knobs = ", ".join(
            "%s (%d values)" % (name, size) for name, size in zip(self.space.space_map, self.dims)
        )
        expected = (
            "start_position must be a sequence of integer knob indices, one per knob in the "
            f"order of the config space [{knobs}], got {start_position!r}"
        )
        if isinstance(start_position, (str, bytes, Mapping)):
            raise TypeError(expected)
        try:
            start = tuple(operator.index(knob) for knob in start_position)
        except TypeError as error:
            raise TypeError(f"{expected} ({error})") from None
        if len(start) != len(self.dims):
            raise ValueError(
                f"start_position {list(start_position)} has {len(start)} knob indices, "
                f"the config space has {len(self.dims)} knobs [{knobs}]"
            )
        for knob, (name, value, size) in enumerate(zip(self.space.space_map, start, self.dims)):
            if not 0 <= value < size:
                raise ValueError(
                    f"start_position {list(start_position)} is out of range on knob {knob} "
                    f"({name}: index {value}, the knob has {size} values)"
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

    def tune(self, n_trial, measure_option, early_stopping=None, callbacks=(), si_prefix="G"):
        """Tune the task; see :any:`Tuner.tune`.

        ``n_trial`` must be a positive number of measurements.  A tuning run
        interrupted while configs were out for measurement (``KeyboardInterrupt``)
        can be continued by calling ``tune`` again: those configs were never
        reported, so they are handed out again.
        """
        if not n_trial >= 1:
            raise ValueError(f"n_trial must be a positive number of measurements, got {n_trial!r}")
        if self._handed:
            self._pending = list(self._handed.values()) + self._pending
            self._handed = {}
        in_tuning = GLOBAL_SCOPE.in_tuning
        try:
            super().tune(n_trial, measure_option, early_stopping, callbacks, si_prefix)
        finally:
            # Tuner.tune leaves the global tuning flag set when interrupted.
            GLOBAL_SCOPE.in_tuning = in_tuning

    def load_history(self, data_set, min_seed_records=500):
        """Resume from earlier tuning records of the same task.

        Every record whose task has the same workload and target as this
        tuner's, and whose config still belongs to the space, is given to the
        search as already measured: it is never proposed again, failed records
        included, and the search continues from the fastest one.  Records are
        only read; the history is checked whole before the search is touched,
        so a history that cannot be read leaves the tuner as it was.

        Parameters
        ----------
        data_set : Union[str, os.PathLike, Iterable[Tuple[MeasureInput, MeasureResult]]]
            Tuning records, for example ``autotvm.record.load_from_file(path)``,
            or the path of an AutoTVM log (then an unreadable line is named by
            its number).  Records of other workloads or targets are skipped.
        min_seed_records : int
            Accepted for compatibility with :any:`Tuner.load_history`; the
            search resumes from any number of records, so it is not used.

        Raises
        ------
        ValueError
            When a record cannot be read (a log cut by a crash mid-write, or a
            corrupt line): TVM's own readers reject such a log too.
        """
        if self._pending or self._handed:
            raise RuntimeError(
                "DropletTuner.load_history must be called between rounds, "
                "not while configs are out for measurement"
            )
        records = _read_records(data_set)
        costs, failed, skipped = self._records_of_task(records)
        for index in sorted(failed - set(costs)):
            self.search.observe(self._point(index), None)
        for index, index_costs in sorted(costs.items()):
            self.search.observe(self._point(index), index_costs)
        other_tasks = skipped["workload"] + skipped["target"]
        if other_tasks:
            LOGGER.info(
                "DropletTuner ignored %d records of other workloads and %d records of the same "
                "workload for other targets (this task: %s, target %s)",
                skipped["workload"],
                skipped["target"],
                self.task.name,
                self.task.target,
            )
        if costs or failed:
            best = self.best_choice
            LOGGER.info(
                "DropletTuner resumes %s from %d measured configs (%d failed); %s",
                self.task.name,
                len(set(costs) | failed),
                len(failed - set(costs)),
                "best so far: config %d" % best[0] if best else "none succeeded",
            )
        elif skipped["target"]:
            LOGGER.warning(
                "DropletTuner found records of %s for other targets only, none for %s: "
                "the search starts afresh",
                self.task.name,
                self.task.target,
            )
        else:
            LOGGER.info("DropletTuner found no records to resume %s from", self.task.name)
        if skipped["space"]:
            LOGGER.warning(
                "DropletTuner skipped %d records of %s whose config is not in the current space",
                skipped["space"],
                self.task.name,
            )

    def _records_of_task(
        self, records: Sequence[Tuple[MeasureInput, MeasureResult]]
    ) -> Tuple[Dict[int, List[float]], Set[int], Dict[str, int]]:
        """The costs of successful and the indices of failed records of this task.

        Also counts the records skipped because of their workload, their
        target, or a config that is not in this space.
        """
        target = str(self.task.target)
        costs: Dict[int, List[float]] = {}
        failed: Set[int] = set()
        skipped = {"workload": 0, "target": 0, "space": 0}
        for inp, res in records:
            if inp.task.workload != self.task.workload:
                skipped["workload"] += 1
                continue
            if str(inp.target) != target:
                skipped["target"] += 1
                continue
            index = inp.config.index
            if not self._config_in_space(inp.config):
                skipped["space"] += 1
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


_UNREADABLE = (
    "a log cut by a crash in the middle of a write ends with such a line, and TVM's own readers "
    "(autotvm.record.load_from_file, apply_history_best, tvmc --tuning-records) reject the whole "
    "log: remove or repair the line, then resume"
)


def _reason(error: Exception) -> str:
    """The type and the last line of an error's message (TVM's messages carry a traceback)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return "%s: %s" % (type(error).__name__, lines[-1].strip() if lines else "")


def _read_records(
    data_set: Union[str, bytes, os.PathLike, Iterable[Tuple[MeasureInput, MeasureResult]]]
) -> List[Tuple[MeasureInput, MeasureResult]]:
    """All tuning records of a history, or a ValueError naming the first unreadable one."""
    records: List[Tuple[MeasureInput, MeasureResult]] = []
    if isinstance(data_set, (str, bytes, os.PathLike)):
        path = os.fsdecode(data_set)
        with open(path) as log:
            for line_number, row in enumerate(log, 1):
                if row.startswith("#"):  # as autotvm.record.load_from_file
                    continue
                try:
                    record = decode(row)
                except Exception as error:  # pylint: disable=broad-except
                    raise ValueError(
                        f"line {line_number} of {path} is not an AutoTVM tuning record "
                        f"({_reason(error)}); {_UNREADABLE}"
                    ) from error
                if record is not None:
                    records.append(record)
        return records
    iterator = iter(data_set)
    while True:
        try:
            record = next(iterator)
        except StopIteration:
            break
        except OSError:
            raise
        except Exception as error:  # pylint: disable=broad-except
            raise ValueError(
                f"the tuning records cannot be read after {len(records)} records: the next line "
                f"is not an AutoTVM tuning record ({_reason(error)}); {_UNREADABLE}"
            ) from error
        try:
            inp, res = record
        except (TypeError, ValueError):
            inp = res = None
        if not isinstance(inp, MeasureInput) or not isinstance(res, MeasureResult):
            raise TypeError(
                "DropletTuner.load_history takes (MeasureInput, MeasureResult) pairs, as "
                f"autotvm.record.load_from_file yields, or a log path; item {len(records)} is "
                f"{record!r:.200}"
            )
        records.append((inp, res))
    return records
