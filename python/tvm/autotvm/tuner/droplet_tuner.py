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

The tuner maps the configurations of a task's :any:`ConfigSpace` onto the
points of :class:`tvm.contrib.droplet_search.DropletSearch` through a
:class:`~.droplet_space.KnobGeometry` (one dimension per inner factor of a
split, the tile sizes that divide the loop first; one per other knob).  The
search decisions -- neighbourhood, boundaries, statistical acceptance,
convergence -- are made by the engine; see its documentation.  Once Droplet
Search has converged, another tuner (``handover``) goes on with every
measurement made so far, and each new best configuration it finds is polished
by a short Droplet Search around it (``polish``).
"""
import logging
import operator
from collections.abc import Mapping
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from tvm.contrib.droplet_search import DropletSearch, has_lower_mean, is_count
from tvm.contrib.droplet_search.transfer import take_over

from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from .droplet_history import read_records, task_history
from .droplet_space import KnobGeometry
from .tuner import Tuner

LOGGER = logging.getLogger("autotvm")

HANDOVERS = ("xgb", None)
"""The ``handover`` choices of :class:`DropletTuner`."""

ORIGIN_SAMPLE = 8
"""How many random configurations are measured with the origin, the start of a
template without a fallback config (see ``start_sample``)."""

POLISH_RADIUS = 1
"""The longest step, in knob (or tile factor) indices, of a polishing descent (see ``polish``)."""

REPEAT_ADVICE = (
    "runner repeat=2 or repeat >= 4: of more than two costs AutoTVM's runner keeps all but the "
    "largest and the smallest, so its default repeat=3 reports one"
)
"""How to get two or more costs per measurement from AutoTVM's runners (``tvmc tune --repeat``)."""


class _TaskLogger(logging.LoggerAdapter):
    """Prefixes the search's messages with the name of the task being tuned."""

    def process(self, msg, kwargs):
        return "DropletTuner [%s]: %s" % (self.extra["task"], msg), kwargs


class DropletTuner(Tuner):
    """Tuner with the Droplet Search algorithm (Canesche et al., ACM TACO 2024).

    Starting from ``start_position``, the tuner measures the neighbours of the
    best configuration -- one knob (or one tile factor) changed, in both
    directions, at growing step lengths, and the most promising pairs of such
    steps, at most as many pairs as dimensions at each step length -- and moves
    to a neighbour when it is faster: a one-sided Welch t-test at ``pvalue``
    when both have at least two costs, a plain mean comparison otherwise.
    When the neighbourhood of the best configuration is exhausted, Droplet
    Search has converged (logged, with the number of measurements: where the
    original Droplet tuner stops); with ``handover``, another tuner then goes
    on until ``n_trial`` is spent, trained on every measurement so far, and
    (``polish``) each faster configuration it finds is the start of a short
    descent over its closest neighbours.  Configurations rejected by the
    space's filters are never proposed and none is proposed twice.

    Parameters
    ----------
    task : autotvm.task.Task
        The tuning task.
    start_position : Optional[Sequence[int]]
        The knob-index vector to start from, one index per knob.  By default the
        template's fallback config (what TOPI's templates run before tuning), or
        the origin ``[0, 0, ..., 0]`` when the template has none -- or, when the
        space's filter rejects it, the valid configuration with the lowest index.
        (The original Droplet tuner started from the origin.)  From the origin,
        a random sample is measured first, see ``start_sample``.
    pvalue : float
        Significance level of the test that accepts a faster configuration.
        The test needs two or more costs per measurement: AutoTVM's runners
        report all but the largest and the smallest of more than two, so
        ``repeat=2`` or ``repeat >= 4``; with their default ``repeat=3`` (and
        ``repeat=1``) one cost is left, and a lower cost is accepted.
    batch_size : Optional[int]
        How many configurations are proposed together before the search
        decides where to move (one round).  A round larger than the batch the
        tuning loop asks for is handed out over several batches; a smaller one
        caps the batches.  Defaults to the size of each batch the tuning loop
        asks for, that is the parallel measurement capacity.
    failure_limit : Optional[int]
        How many failed measurements in a row end Droplet Search (an
        all-invalid neighbourhood).  Defaults to twice the number of dimensions.
    handover : Optional[str]
        The tuner that goes on once Droplet Search has finished with budget
        left: ``"xgb"`` (the default), an ``XGBTuner`` with AutoTVM's default
        loop features (``itervar``) fed every measurement so far; None stops
        there, as the original Droplet tuner did.
    start_sample : Optional[int]
        How many random valid configurations are measured together with the
        start, in the first round; the search starts from the fastest of them
        when it is faster than the start (by the test above).  Defaults to
        8 when the start is the origin by default (a template without a
        fallback config, whose origin is seldom a good schedule), 0 otherwise.
        A tuner given records of its task by ``load_history`` starts from the best
        of them instead, and measures no sample; given records of other
        workloads of the same template only (a network's tasks tuned before),
        it measures their fastest configs with the start too (see
        ``load_history``).
    polish : bool
        Whether, after the handover, each configuration the successor measures
        with a lower mean cost than every earlier one starts a descent of
        Droplet Search from it with steps of one index (the successor proposes
        nothing until it converges, and is told its measurements).  The
        successor's model finds promising regions; the descent finds the best
        point of the region it found.
    """

    def __init__(
        self,
        task,
        start_position: Optional[Sequence[int]] = None,
        pvalue: float = 0.05,
        *,
        batch_size: Optional[int] = None,
        failure_limit: Optional[int] = None,
        handover: Optional[str] = "xgb",
        start_sample: Optional[int] = None,
        polish: bool = True,
    ):
        super().__init__(task)
        if batch_size is not None and not is_count(batch_size):
            raise ValueError(f"batch_size must be a positive number of configs, got {batch_size!r}")
        if handover not in HANDOVERS:
            raise ValueError(f"handover must be one of {HANDOVERS}, got {handover!r}")
        if start_sample is not None and not is_count(start_sample, minimum=0):
            raise ValueError(
                f"start_sample must be a number of configs (0 or more), got {start_sample!r}"
            )
        self.geometry = KnobGeometry(self.space)
        self.dims: List[int] = list(self.geometry.dims)
        self.pvalue = pvalue
        self.batch_size = batch_size
        self.handover = handover
        self.polish = bool(polish)
        start, from_origin = self._start_point(start_position)
        if start_sample is None:
            start_sample = ORIGIN_SAMPLE if from_origin else 0
        self.start_sample = start_sample
        if from_origin and start_sample:
            LOGGER.info(
                "DropletTuner [%s]: the template has no fallback config; the search starts from "
                "the best of config %d and %d random configs",
                task.name,
                self._index(start),
                start_sample,
            )
        # The random configs measured with the start (the first round's sample).
        self._random_sample = self._sample(start, start_sample)
        self.search = self._new_search(
            start, sample=self._random_sample, failure_limit=failure_limit
        )
        # How many configs of other workloads' records load_history put in the first round.
        self.transferred = 0
        # The tuner that took over once Droplet Search finished, and the best config
        # measured since (by it or a polishing descent).
        self.successor: Optional[Tuner] = None
        self._successor_best: Optional[Tuple[int, Tuple[float, ...]]] = None
        # Measurements since the handover (point -> costs, empty when failed), the
        # descent polishing the successor's latest best, and how many were started.
        self._later_history: Dict[Tuple[int, ...], Tuple[float, ...]] = {}
        self.polisher: Optional[DropletSearch] = None
        self.polishes = 0
        # Points of the current round drawn from the search, not yet handed out.
        self._pending: List[Tuple[int, ...]] = []
        # Config index -> point, handed out by next_batch and awaiting update.
        self._handed: Dict[int, Tuple[int, ...]] = {}

    def _new_search(self, start: Tuple[int, ...], **options) -> DropletSearch:
        """A Droplet Search over this tuner's space from ``start`` (the first descent, or a
        polishing one); ``options`` are the engine's other keyword arguments."""
        return DropletSearch(
            self.dims,
            start,
            pvalue=self.pvalue,
            is_valid=self.geometry.is_valid,
            # Half the engine's default: the walk reaches longer steps, and converges
            # (and hands over) sooner, which took fewer measurements to a good config on
            # recorded conv2d, dense and matmul costs.
            pairs_per_radius=len(self.dims),
            logger=_TaskLogger(LOGGER, {"task": self.task.name}),
            repeat_advice=REPEAT_ADVICE,
            **options,
        )

    def _index(self, point: Sequence[int]) -> int:
        return self.geometry.index(point)

    def _point(self, index: int) -> Tuple[int, ...]:
        return self.geometry.point(index)

    def _fallback_knobs(self) -> Optional[List[int]]:
        """The knob indices of the template's fallback config, None when it has none.

        TOPI's templates set a config of their own when no tuning record
        applies (``cfg.is_fallback``): the schedule users run before tuning.
        """
        # pylint: disable=import-outside-toplevel
        from ..task.dispatcher import ApplyConfig
        from ..task.space import FallbackConfigEntity

        fallback = FallbackConfigEntity()
        try:
            with self.task.target, ApplyConfig(fallback):
                self.task.func(*self.task.args, **self.task.kwargs)
        except Exception as error:  # pylint: disable=broad-except
            LOGGER.debug("DropletTuner: no fallback config for %s (%s)", self.task.name, error)
            return None
        knobs = self.geometry.knobs_of_entities(
            fallback._entity_map  # pylint: disable=protected-access
        )
        if knobs is None:
            return None
        # A template that sets no fallback config gets the first value of every knob.
        if not any(knobs):
            return None
        if not self.space.is_index_valid(int(self.space.knob2point(knobs))):
            return None
        return knobs

    def _sample(self, start: Tuple[int, ...], size: int) -> List[Tuple[int, ...]]:
        """``size`` random valid points other than ``start`` (fewer in a smaller space)."""
        size = min(size, len(self.space) - 1)
        if size <= 0:
            return []
        start_index = self._index(start)
        indices = [int(index) for index in self.space.sample_ints(size + 1)]
        return [self._point(index) for index in indices if index != start_index][:size]

    def _start_point(self, start_position: Optional[Sequence[int]]) -> Tuple[Tuple[int, ...], bool]:
        """The start point, and whether it is the origin by default (no fallback config)."""
        if start_position is None:
            knobs = self._fallback_knobs()
            if knobs is not None:
                return self.geometry.point_of_knobs(knobs), False
            index = 0
            if not self.space.is_index_valid(index):
                index = self.space.get_next_index(index)
                if index is None:
                    raise ValueError(f"the config space of task {self.task} has no valid config")
            return self._point(index), True
        sizes = [len(subspace) for subspace in self.space.space_map.values()]
        expected = (
            "start_position must be a sequence of integer knob indices, one per knob in the "
            f"order of the config space [{self.geometry.describe()}], got {start_position!r}"
        )
        if isinstance(start_position, (str, bytes, Mapping)):
            raise TypeError(expected)
        try:
            start = tuple(operator.index(knob) for knob in start_position)
        except TypeError as error:
            raise TypeError(f"{expected} ({error})") from None
        if len(start) != len(sizes):
            raise ValueError(
                f"start_position {list(start_position)} has {len(start)} knob indices, "
                f"the config space has {len(sizes)} knobs [{self.geometry.describe()}]"
            )
        for knob, (name, value, size) in enumerate(zip(self.space.space_map, start, sizes)):
            if not 0 <= value < size:
                raise ValueError(
                    f"start_position {list(start_position)} is out of range on knob {knob} "
                    f"({name}: index {value}, the knob has {size} values)"
                )
        index = int(self.space.knob2point(list(start)))
        if not self.space.is_index_valid(index):
            raise ValueError(
                f"start_position {list(start_position)} (config index {index}) "
                "is rejected by the config space's filter"
            )
        return self.geometry.point_of_knobs(start), False

    def _transfer(self, related: Mapping[tuple, Sequence]) -> None:
        """Measure the fastest configs of other workloads of the template with the start.

        ``related`` holds each other workload's successful configs, fastest
        first.  A config is taken over by the values of its knobs (a split's inner
        sizes, another knob's value); one with a value this space does not have,
        or that the space's filter rejects, is passed over.  The first round
        then measures the start, the taken configs and the random sample, and
        the search starts from the fastest of them (as from a sample).
        """
        start = self.search.centre

        def taken_over(configs: Sequence) -> Iterator[Tuple[int, ...]]:
            """The valid points of a workload's configs other than the start."""
            for config in configs:
                knobs = self.geometry.knobs_of_entities(
                    config._entity_map  # pylint: disable=protected-access
                )
                if knobs is None:
                    continue
                point = self.geometry.point_of_knobs(knobs)
                # The engine's own validity test: the sample must pass it.
                if self.geometry.is_valid(point) and point != start:
                    yield point

        # The fastest of every workload first, then the second fastest, ...
        points = take_over([taken_over(configs) for configs in related.values()])
        if not points:
            return
        sample = points + [point for point in self._random_sample if point not in points]
        self.search = self._new_search(
            start, sample=sample, failure_limit=self.search.failure_limit
        )
        self.transferred = len(points)
        LOGGER.info(
            "DropletTuner [%s]: no records of this workload; measuring %d configs of the fastest "
            "records of %d other workloads of the template with the start",
            self.task.name,
            len(points),
            len(related),
        )

    # ------------------------------------------------------------- tuning
    @property
    def visited(self) -> Set[int]:
        """Indices of the configs measured, loaded from history, or out for measurement."""
        points = list(self.search.history) + self._pending + list(self._handed.values())
        indices = {self._index(point) for point in points}
        if self.successor is not None:
            indices |= set(self.successor.visited)
        return indices

    @property
    def best_choice(self) -> Optional[Tuple[int, List[int], Tuple[float, ...]]]:
        """The best config found as ``(index, knob indices, costs)``; None before any success.

        Droplet Search's best configuration, or a faster one measured after the
        handover (by the successor or a polishing descent).
        """
        best = self.search.best
        choice = None if best is None else (self._index(best[0]), best[1])
        if self._successor_best is not None and has_lower_mean(
            self._successor_best[1], None if choice is None else choice[1]
        ):
            choice = self._successor_best
        if choice is None:
            return None
        index, costs = choice
        return index, list(self.space.point2knob(index)), costs

    def _hand_over(self) -> None:
        """Start the successor, trained on every measurement of the search."""
        # pylint: disable=import-outside-toplevel
        from .xgboost_tuner import XGBTuner

        best = self.search.best
        LOGGER.info(
            "DropletTuner [%s]: Droplet Search ended after %d measurements (%s)%s; XGBTuner "
            "goes on with them",
            self.task.name,
            self.search.measurements,
            self.search.stop_reason,
            "" if best is None else ", best config %d" % self._index(best[0]),
        )
        self.successor = XGBTuner(self.task, feature_type="itervar", plan_size=32)
        inputs, results = [], []
        for point, costs in self.search.history.items():
            inputs.append(
                MeasureInput(self.task.target, self.task, self.space.get(self._index(point)))
            )
            if costs:
                results.append(MeasureResult(costs, MeasureErrorNo.NO_ERROR, 0.0, 0.0))
            else:
                error = RuntimeError("failed in Droplet Search")
                results.append(MeasureResult((error,), MeasureErrorNo.RUNTIME_DEVICE, 0.0, 0.0))
        self.successor.update(inputs, results)

    def _start_polish(self, point: Tuple[int, ...]) -> None:
        """Start a descent of steps of one index from ``point``, the successor's new best."""
        polisher = self._new_search(
            point, failure_limit=self.search.failure_limit, max_radius=POLISH_RADIUS
        )
        polisher.warned_single_costs = self.search.warned_single_costs
        # Everything measured is known to it (the start first: it stays the centre).
        polisher.observe(point, self._later_history[point])
        for history in (self.search.history, self._later_history):
            for known, costs in history.items():
                if known != point:
                    polisher.observe(known, costs)
        self.polisher = polisher
        self.polishes += 1
        LOGGER.info(
            "DropletTuner [%s]: the successor found a faster config, %d; polishing it with "
            "Droplet Search (steps of %d index)",
            self.task.name,
            self._index(point),
            POLISH_RADIUS,
        )

    def next_batch(self, batch_size):
        if batch_size < 1:
            raise ValueError(f"next_batch needs a positive batch_size, got {batch_size}")
        if self.successor is None and not self._pending and not self._handed:
            self._pending = self.search.ask(self.batch_size or batch_size)
            if not self._pending and self.handover is not None and self.search.finished:
                self._hand_over()
        if self.polisher is not None and not self._pending and not self._handed:
            self._pending = self.polisher.ask(self.batch_size or batch_size)
            if not self._pending:
                self.polisher = None  # converged: the successor goes on
        if self.successor is not None and self.polisher is None:
            return self.successor.next_batch(batch_size)
        taken, self._pending = self._pending[:batch_size], self._pending[batch_size:]
        configs = []
        for point in taken:
            index = self._index(point)
            self._handed[index] = point
            configs.append(self.space.get(index))
        return configs

    def update(self, inputs, results):
        if self.successor is not None:
            self._update_after_handover(inputs, results)
            return
        for inp, res in zip(inputs, results):
            index = inp.config.index
            point = self._handed.pop(index, None)
            if point is None:
                LOGGER.debug("DropletTuner ignores config %d: it did not propose it", index)
                continue
            self.search.tell(point, _measured_costs(res))

    def _update_after_handover(self, inputs, results) -> None:
        """Tell the successor (and the polishing descent) the results; polish a new best."""
        # The successor learns from every measurement, and counts them as visited.
        self.successor.update(inputs, results)
        best = self.best_choice
        best_costs = None if best is None else best[2]
        faster = None
        for inp, res in zip(inputs, results):
            index = inp.config.index
            costs = _measured_costs(res)
            point = self._handed.pop(index, None)
            if point is not None and self.polisher is not None:
                self.polisher.tell(point, costs)
            point = point or self._point(index)
            self._later_history[point] = costs
            if has_lower_mean(costs, best_costs):
                best_costs = costs
                self._successor_best = (index, costs)
                faster = point
        if faster is not None and self.polish and self.polisher is None and not self._handed:
            self._start_polish(faster)

    def has_next(self):
        if self.polisher is not None:
            return True
        if self.successor is not None:
            return self.successor.has_next()
        if self._pending:
            return True
        if self._handed:
            return False
        if not self.search.finished:
            return True
        return self.handover is not None and len(self.visited) < len(self.space)

    def tune(self, n_trial, measure_option, early_stopping=None, callbacks=(), si_prefix="G"):
        """Tune the task; see :any:`Tuner.tune`.

        ``n_trial`` must be a positive integer number of measurements.  A tuning
        run interrupted while configs were out for measurement
        (``KeyboardInterrupt``) can be continued by calling ``tune`` again: those
        configs were never reported, so they are handed out again.
        """
        if not is_count(n_trial):
            raise ValueError(
                f"n_trial must be a positive integer number of measurements, got {n_trial!r}"
            )
        if self._handed:
            self._pending = list(self._handed.values()) + self._pending
            self._handed = {}
        super().tune(n_trial, measure_option, early_stopping, callbacks, si_prefix)

    def load_history(self, data_set, min_seed_records=500):
        """Resume from earlier tuning records of the same task.

        Every record whose task has the same workload and target as this
        tuner's, and whose config still belongs to the space, is given to the
        search as already measured: it is never proposed again, failed records
        included, and the search continues from the fastest one.  Records are
        only read; the history is checked whole before the search is touched,
        so a history that cannot be read leaves the tuner as it was.

        Records of other workloads of the same template and target are transfer
        learning, as in TVM's tuning tutorials (the log of a network's tasks
        tuned so far): when the history has no successful record of this task,
        the fastest configs of each other workload (two each, at most eight in
        all) that this space has, by the values of their knobs, are measured in
        the first round with the start, and the search starts from the fastest.

        Parameters
        ----------
        data_set : Union[str, os.PathLike, Iterable[Tuple[MeasureInput, MeasureResult]]]
            Tuning records, for example ``autotvm.record.load_from_file(path)``,
            or the path of an AutoTVM log (then an unreadable line is named by
            its number).  Records of other targets are skipped, those of other
            workloads too but for the transfer above.
        min_seed_records : int
            Accepted for compatibility with :any:`Tuner.load_history`; the
            search resumes from any number of records, so it is not used.

        Raises
        ------
        ValueError
            When a record cannot be read (a log cut by a crash mid-write, or a
            corrupt line): TVM's own readers reject such a log too.
        """
        if self._pending or self._handed or self.successor is not None:
            raise RuntimeError(
                "DropletTuner.load_history must be called before tuning or between rounds of "
                "Droplet Search, not while configs are out for measurement or after the handover"
            )
        history = task_history(self.task, read_records(data_set))
        costs, failed, skipped = history.costs, history.failed, history.skipped
        if not costs and not self.search.history and history.related:
            self._transfer(history.related)
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


def _measured_costs(result: MeasureResult) -> Tuple[float, ...]:
    """The costs of a measurement, empty when it failed (as the engine is told a failure)."""
    if result.error_no == MeasureErrorNo.NO_ERROR and len(result.costs) > 0:
        return tuple(float(cost) for cost in result.costs)
    return ()
