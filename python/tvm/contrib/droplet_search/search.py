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
"""Droplet Search: coordinate descent with statistical acceptance, on integer points.

The algorithm is the Droplet Search of Canesche et al., "The Droplet Search
Algorithm for Kernel Scheduling", ACM TACO 21(2), 2024, with the neighbourhood
of :mod:`.neighbourhood`:

1. The start point is the first *centre*.  It is measured in the first round,
   together with the points of an optional ``sample`` (for a start that is not
   a good schedule), or with its first neighbours.
2. A *round* is the set of points proposed since the last decision.  When all
   of them are told, its successful points are considered in ascending order of
   mean cost, and the first one that :func:`~.statistics.is_faster` than the
   centre becomes the new centre.  The walk then starts again around it.
3. The search has *converged* when the centre has no valid, unmeasured
   neighbour left (:attr:`DropletSearch.converged_after` keeps the number of
   measurements then); it finishes.  It also finishes when the ``budget`` of
   counted measurements is spent, or when ``failure_limit`` counted
   measurements in a row failed (an all-invalid neighbourhood).

No point is proposed twice, points rejected by ``is_valid`` are never proposed,
and a failed point (no costs) never becomes a centre.  Points measured before the
search (a log being resumed) are given to :meth:`DropletSearch.observe`: they are
never proposed; one whose costs were measured under other conditions can be
re-measured once should it become the centre, so that it is compared with its
challengers on costs measured alongside theirs.
"""
import logging
import math
import numbers
import types
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .neighbourhood import DirectionScores, Point, Walk, combined, step_of
from .statistics import has_lower_mean, is_faster, mean

Costs = Tuple[float, ...]
"""The costs (seconds per run) measured for one point; empty when it failed."""

_LOGGER = logging.getLogger("droplet_search")


def is_count(value, minimum: int = 1) -> bool:
    """Whether ``value`` is an integer of at least ``minimum``: a budget, a batch size
    (a bool is not)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Integral) and value >= minimum


class DropletSearch:
    """Droplet Search over the integer box ``prod(range(size) for size in dims)``.

    Parameters
    ----------
    dims : Sequence[int]
        The number of values of each dimension; each must be positive.  An empty
        sequence is a space with a single point, ``()``.
    start : Optional[Sequence[int]]
        The first centre; the origin (all zeros) when omitted.  It must lie in
        the box and satisfy ``is_valid``.
    sample : Sequence[Sequence[int]]
        Points measured with the start, all in the first round (a sample of the
        space, for a start that may be a poor schedule); the search moves to the
        fastest of them that is faster than the start, as it would to a
        neighbour.  Each must lie in the box and satisfy ``is_valid``; their
        failures do not count towards ``failure_limit``.  Points
        of the sample not proposed yet are dropped when :meth:`observe` is given
        a successful point: a resumed search starts from its records
        (:meth:`add_sample` adds a sample after them).
    pvalue : float
        Significance level of the acceptance test, see :func:`~.statistics.is_faster`.
    is_valid : Optional[Callable[[Point], bool]]
        Whether a point is a legal configuration; points it rejects are never
        proposed.  Every point is valid when omitted.
    budget : Optional[int]
        The largest number of counted measurements (see :meth:`tell`); unlimited
        when omitted.
    failure_limit : Optional[int]
        How many counted measurements in a row may fail before the search ends.
        Defaults to a full radius-1 neighbourhood, ``2 * len(dims)`` (at least 1).
    diagonals : bool
        Whether the walk also makes the most promising diagonal moves of each
        radius (see :class:`~.neighbourhood.Walk`); axis moves only otherwise.
    pairs_per_radius : Optional[int]
        How many diagonal moves of each radius are made at most, the best
        ranked; by default ``2 * len(dims)``, as many as the radius's axis moves.
    max_radius : Optional[int]
        The longest step the walk makes, in indices of a dimension; by default
        the longest that fits the box.  A short limit makes a local polish: the
        search converges once the closest points around the best are measured.
    logger : Optional[Union[logging.Logger, logging.LoggerAdapter]]
        Where moves and the reason the search finished are reported.
    repeat_advice : str
        How the caller's runner measures each program at least twice, quoted
        in the warning logged (once) when costs with a single value leave no
        variance to test.
    """

    def __init__(
        self,
        dims: Sequence[int],
        start: Optional[Sequence[int]] = None,
        *,
        sample: Sequence[Sequence[int]] = (),
        pvalue: float = 0.05,
        is_valid: Optional[Callable[[Point], bool]] = None,
        budget: Optional[int] = None,
        failure_limit: Optional[int] = None,
        diagonals: bool = True,
        pairs_per_radius: Optional[int] = None,
        max_radius: Optional[int] = None,
        logger: Optional[Union[logging.Logger, logging.LoggerAdapter]] = None,
        repeat_advice: str = "runner repeat >= 2",
    ):
        self.dims: Point = tuple(int(size) for size in dims)
        if any(size < 1 for size in self.dims):
            raise ValueError(f"every dimension needs at least one value, got sizes {self.dims}")
        if not 0.0 < pvalue <= 1.0:
            raise ValueError(f"pvalue must be in (0, 1], got {pvalue}")
        if budget is not None and not is_count(budget):
            raise ValueError(f"the budget must be a positive number of measurements, got {budget}")
        self.pvalue = float(pvalue)
        self.budget = budget
        self.failure_limit = max(1, 2 * len(self.dims)) if failure_limit is None else failure_limit
        if self.failure_limit < 1:
            raise ValueError(f"failure_limit must be positive, got {failure_limit}")
        if pairs_per_radius is not None and not is_count(pairs_per_radius, minimum=0):
            raise ValueError(
                f"pairs_per_radius must be a number of moves (0 or more), got {pairs_per_radius!r}"
            )
        self.pairs_per_radius = pairs_per_radius
        if max_radius is not None and not is_count(max_radius):
            raise ValueError(f"max_radius must be a positive step length, got {max_radius!r}")
        self.max_radius = max_radius
        self.logger = logger or _LOGGER
        self.repeat_advice = repeat_advice
        self._is_valid = is_valid
        self._invalid: Set[Point] = set()
        self._history: Dict[Point, Costs] = {}
        self._stale: Set[Point] = set()
        self._outstanding: Dict[Point, None] = {}
        self._round: List[Point] = []
        self._failure_streak = 0
        self._scores = DirectionScores(self.dims)
        self._diagonals = diagonals
        # Whether the warning about costs with a single value was logged (it is
        # logged once; a caller running several searches may set it for the later ones).
        self.warned_single_costs = False
        self.measurements = 0
        self.moves = 0
        self.converged_after: Optional[int] = None
        self.stop_reason: Optional[str] = None
        centre = self._point(start, "start point") if start is not None else (0,) * len(self.dims)
        if not self.is_valid(centre):
            raise ValueError(f"the start point {centre} is not a valid point of the space")
        self.centre: Point = centre
        self._centres: Dict[Point, None] = {centre: None}
        self._walk = self._new_walk(centre)
        self._lookahead: Optional[Point] = None
        self._sample: Dict[Point, None] = {}
        # The sample's points, never the base of a pattern move (they are not steps).
        self._sampled: Set[Point] = set()
        # Whether the first round, the start and its sample, is yet to be decided.
        self._sampling = False
        self.add_sample(sample)

    def add_sample(self, points: Sequence[Sequence[int]]) -> List[Point]:
        """Measure ``points`` with the centre in the next round, before its neighbours.

        The constructor's ``sample``, for points known only after :meth:`observe`
        (a sample given to the constructor is dropped by a successful observed
        point): the search moves to the fastest of them that is faster than the
        centre, as it would to a neighbour.  Points already measured or observed,
        and the centre, are passed over.

        Parameters
        ----------
        points : Sequence[Sequence[int]]
            Points of the box that satisfy ``is_valid``.

        Returns
        -------
        added : List[Point]
            The points that will be measured, in order.

        Raises
        ------
        ValueError
            When a point is outside the box or not valid.
        RuntimeError
            When a round is under way (points proposed and not all decided).
        """
        if self._outstanding or self._round:
            raise RuntimeError("add_sample() must be called between rounds")
        added = []
        for point in points:
            point = self._point(point, "sample point")
            if not self.is_valid(point):
                raise ValueError(f"the sample point {point} is not a valid point of the space")
            if point != self.centre and point not in self._history and point not in self._sample:
                self._sample[point] = None
                self._sampled.add(point)
                added.append(point)
        self._sampling = self._sampling or bool(added)
        return added

    # ------------------------------------------------------------------ space
    def _point(self, point: Sequence[int], what: str) -> Point:
        point = tuple(int(index) for index in point)
        if len(point) != len(self.dims):
            raise ValueError(
                f"the {what} {point} has {len(point)} coordinates, the space has {len(self.dims)}"
            )
        for axis, (index, size) in enumerate(zip(point, self.dims)):
            if not 0 <= index < size:
                raise ValueError(
                    f"the {what} {point} is out of range on dimension {axis} (size {size})"
                )
        return point

    def is_valid(self, point: Point) -> bool:
        """Whether ``point`` may be proposed (the ``is_valid`` predicate, cached)."""
        if point in self._invalid:
            return False
        if self._is_valid is None or self._is_valid(point):
            return True
        self._invalid.add(point)
        return False

    # -------------------------------------------------------------- reading
    @property
    def history(self) -> Mapping[Point, Costs]:
        """Every point told or observed, with its costs (empty for a failure)."""
        return types.MappingProxyType(self._history)

    def costs(self, point: Sequence[int]) -> Optional[Costs]:
        """The costs of ``point``: None when unknown, empty when it failed."""
        return self._history.get(tuple(point))

    @property
    def best(self) -> Optional[Tuple[Point, Costs]]:
        """The centre with the lowest mean cost, with its costs (the start's costs may
        have been measured under other conditions than its successors').

        None while no centre was measured successfully.
        """
        measured = [
            (point, self._history[point]) for point in self._centres if self._history.get(point)
        ]
        if not measured:
            return None
        return min(measured, key=lambda item: mean(item[1]))

    def contends(self, costs: Optional[Sequence[float]]) -> bool:
        """Whether a point with ``costs`` would become the best point or the next centre.

        Adapters check the outputs of such points before telling them.
        """
        if not costs:
            return False
        best = self.best
        if has_lower_mean(costs, None if best is None else best[1]):
            return True
        return is_faster(costs, self._history.get(self.centre, ()), self.pvalue)

    @property
    def remaining_budget(self) -> Optional[int]:
        """How many more counted measurements may be proposed; None when unlimited."""
        if self.budget is None:
            return None
        return max(0, self.budget - self.measurements - len(self._outstanding))

    @property
    def finished(self) -> bool:
        """Whether the search is over: nothing outstanding and nothing left to propose."""
        if self._outstanding:
            return False
        if self.stop_reason is None and self.remaining_budget == 0:
            self._finish(f"the budget of {self.budget} measurements is spent")
        if self._sampling and self.stop_reason is None:
            return False
        if self.stop_reason is None and not self._centre_needs_measuring():
            self._peek()
        return self.stop_reason is not None

    def _finish(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.logger.info(
                "Droplet search finished after %d measurements: %s", self.measurements, reason
            )

    # ------------------------------------------------------------- ask / tell
    def _centre_needs_measuring(self) -> bool:
        centre = self.centre
        if centre in self._outstanding:
            return False
        return centre not in self._history or centre in self._stale

    def ask(self, count: int) -> List[Point]:
        """Propose up to ``count`` points to measure next.

        Parameters
        ----------
        count : int
            The largest number of points wanted (the batch size), at least 1.

        Returns
        -------
        points : List[Point]
            Distinct valid points never proposed before (but for a centre whose
            observed costs are re-measured); fewer than ``count``, possibly
            none, when the budget runs out or a round must be decided first.
        """
        if not is_count(count):
            raise ValueError(f"ask() needs a positive number of points, got {count!r}")
        if self.stop_reason is not None:
            return []
        remaining = self.remaining_budget
        if remaining is not None:
            count = min(count, remaining)
        batch: List[Point] = []
        if count and self._centre_needs_measuring():
            batch.append(self.centre)
            self._outstanding[self.centre] = None
        while len(batch) < count and self._sample:
            point = next(iter(self._sample))
            del self._sample[point]
            if point not in self._history and point not in self._outstanding:
                self._outstanding[point] = None
                batch.append(point)
        if self._sampling and not (self._sample or self._outstanding or self._round):
            self._sampling = False  # every point of the sample was observed, none succeeded
        while len(batch) < count and not self._sampling:
            point = self._peek()
            if point is None:
                break
            self._lookahead = None
            self._outstanding[point] = None
            batch.append(point)
        return batch

    def _peek(self) -> Optional[Point]:
        """The next point the walk would propose; finishes the search when there is none."""
        while self.stop_reason is None:
            if self._lookahead is None:
                self._lookahead = self._walk.next_point()
            point = self._lookahead
            if point is None:
                if self._outstanding or self._centre_needs_measuring():
                    return None  # the round must be decided before the search converges
                self._converge()
                continue
            if (
                point not in self._history
                and point not in self._outstanding
                and self.is_valid(point)
            ):
                return point
            self._lookahead = None
        return None

    def tell(
        self, point: Sequence[int], costs: Optional[Sequence[float]], *, counted: bool = True
    ) -> None:
        """Report the costs of a point returned by :meth:`ask`.

        Parameters
        ----------
        point : Sequence[int]
            A point returned by :meth:`ask` and not told yet.
        costs : Optional[Sequence[float]]
            The measured costs, lower is better; None or empty when the
            measurement failed (compile error, run error, timeout, wrong result).
        counted : bool
            Whether this was a measurement of its own.  Pass False when the
            costs are those of another point (the same program reached twice):
            it then counts neither towards the budget nor the failure limit.

        Raises
        ------
        KeyError
            When the point is not outstanding.
        ValueError
            When a cost is negative, infinite or not a number.
        """
        point = tuple(point)
        if point not in self._outstanding:
            raise KeyError(f"point {point} was not proposed by ask() or was already told")
        cleaned = self._clean(point, costs)
        del self._outstanding[point]
        if point == self.centre:
            self._stale.discard(point)
        else:
            self._round.append(point)
        self._history[point] = cleaned
        if counted:
            self.measurements += 1
            if cleaned:
                self._failure_streak = 0
            elif point not in self._sampled:  # the limit is about the neighbourhood
                self._failure_streak += 1
            if self._failure_streak >= self.failure_limit:
                self._finish(
                    f"the last {self._failure_streak} measurements all failed "
                    "(all-invalid neighbourhood)"
                )
        if not self._outstanding and not self._sample and self.stop_reason is None:
            self._decide()

    def observe(
        self, point: Sequence[int], costs: Optional[Sequence[float]], *, remeasure: bool = False
    ) -> None:
        """Record a point measured before this search (a log or database being resumed).

        The point is never proposed.  A successful point with a lower mean cost
        than the centre becomes the centre (no test: both come from the record).
        A point observed twice keeps the successful costs with the lower mean,
        the record a scheduler's database reports as the point's best: so the
        centre after observing a database is the database's best record.  Call
        it only while no proposed point is outstanding.

        Parameters
        ----------
        point : Sequence[int]
            A point of the box (validity is not re-checked: it was measured).
        costs : Optional[Sequence[float]]
            Its costs, None or empty when it failed.
        remeasure : bool
            Whether these costs were measured under other conditions (another
            run, other load): should the point be the centre, it is measured
            again first, and its challengers are compared with the new costs.
        """
        point = self._point(point, "observed point")
        if self._outstanding:
            raise RuntimeError("observe() must not be called while measurements are outstanding")
        cleaned = self._clean(point, costs)
        if cleaned:
            self._sample.clear()
            self._sampling = False
        previous = self._history.get(point)
        if previous and not has_lower_mean(cleaned, previous):
            return
        self._history[point] = cleaned
        if remeasure and cleaned:
            self._stale.add(point)
        else:
            self._stale.discard(point)
        if has_lower_mean(cleaned, self._history.get(self.centre)):
            self._move(point)

    @staticmethod
    def _clean(point: Point, costs: Optional[Sequence[float]]) -> Costs:
        if not costs:
            return ()
        values = tuple(float(cost) for cost in costs)
        for value in values:
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"the costs of point {point} must be finite and non-negative, got "
                    f"{list(values)}; report a failed measurement as None"
                )
        return values

    # ---------------------------------------------------------------- moves
    def _move(self, point: Point, promoted: Sequence[Point] = ()) -> None:
        self.centre = point
        self._centres[point] = None
        self._walk = self._new_walk(point)
        self._walk.promote(list(promoted))
        self._lookahead = None
        self.moves += 1

    def _new_walk(self, centre: Point) -> Walk:
        return Walk(
            centre,
            self.dims,
            self._scores.order(),
            is_valid=self.is_valid,
            pairs_per_radius=self.pairs_per_radius,
            max_radius=self.max_radius,
        )

    def _gain(self, point: Point) -> Optional[float]:
        """The relative gain of ``point`` over the centre; None unless both succeeded."""
        costs, incumbent = self._history.get(point), self._history.get(self.centre)
        if not costs or not incumbent:
            return None
        return (mean(incumbent) - mean(costs)) / mean(incumbent)

    def _decide(self) -> None:
        """Decide a finished round: move to the best convincing point, or walk on."""
        round_points, self._round = self._round, []
        self._sampling = False
        centre = self.centre
        incumbent = self._history.get(centre, ())
        successes = sorted(
            (point for point in round_points if self._history[point]),
            key=lambda point: mean(self._history[point]),
        )
        improving = []  # (gain, axis, step) of single-axis steps with a lower mean
        for point in successes:
            step = step_of(centre, point)
            if step is None or not incumbent:
                continue
            gain = (mean(incumbent) - mean(self._history[point])) / mean(incumbent)
            if gain > 0:
                improving.append((gain, step))
                self._scores.reward((step[0], 1 if step[1] > 0 else -1), gain)
        if (
            not self.warned_single_costs
            and any(len(self._history[point]) < 2 for point in successes)
            and len(incumbent) > 0
        ):
            self.warned_single_costs = True
            self.logger.warning(
                "Droplet search: costs with a single value (one per measurement), so a "
                "candidate is accepted whenever its mean is lower, without a significance test; "
                "measure at least twice (%s) for the test at pvalue %g",
                self.repeat_advice,
                self.pvalue,
            )
        accepted = next(
            (
                point
                for point in successes
                if is_faster(self._history[point], incumbent, self.pvalue)
            ),
            None,
        )
        steps = [step for _, step in sorted(improving, reverse=True)]
        if accepted is not None:
            self.logger.debug(
                "Droplet search moves to %s (mean cost %.4g s, was %s)",
                accepted,
                mean(self._history[accepted]),
                "%.4g s" % mean(incumbent) if incumbent else "failed",
            )
            own = step_of(centre, accepted)
            others = [combined(accepted, [step]) for step in steps if step != own]
            if accepted not in self._sampled:
                others.insert(0, tuple(2 * b - a for a, b in zip(centre, accepted)))
            self._move(accepted, others)
            return
        pairs = self._walk.pairs(self._gain) if self._diagonals else []
        if self._lookahead is not None:
            # A point already looked at goes back to the walk, after the promotions.
            pairs.append(self._lookahead)
            self._lookahead = None
        self._walk.promote(pairs)

    def _converge(self) -> None:
        """The centre's neighbourhood is exhausted: the search has converged."""
        self.converged_after = self.measurements
        self._finish("the neighbourhood of the best point is exhausted")
