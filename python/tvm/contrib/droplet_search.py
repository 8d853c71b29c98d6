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
"""Droplet Search: coordinate descent with statistical acceptance.

This is the search engine shared by the Droplet integrations of AutoTVM
(``tvm.autotvm.tuner.DropletTuner``), the auto-scheduler
(``tvm.auto_scheduler.droplet_exploit``) and MetaSchedule
(``post_optimization``).  It imports nothing from TVM: a *point* is a tuple of
integers, one per dimension, dimension ``i`` ranging over ``[0, dims[i])``.
A scheduler-specific *space* maps points to configurations, states or traces;
the engine only proposes points (:meth:`DropletSearch.ask`) and receives their
measured costs (:meth:`DropletSearch.tell`).

The algorithm is the Droplet Search of Canesche et al., "The Droplet Search
Algorithm for Kernel Scheduling", ACM TACO 21(2), 2024:

1. The start point is the first *centre* (the origin of the space unless
   given).  It is measured together with the first neighbours.
2. The neighbourhood of the centre is walked by growing radius ``r = 1, 2,
   ...``: for each dimension, the point ``r`` steps up and then the point
   ``r`` steps down along that axis.  This costs ``O(len(dims))`` points per
   radius.  Boundaries: a step that leaves ``[0, dims[i])`` is dropped (no
   wrap-around, no clamping), so both directions of every axis are treated
   alike and no point is proposed twice.  Points rejected by ``is_valid`` are
   never proposed, and no point is proposed more than once over the whole
   search.  A batch is filled from the current radius outward.
3. When every proposed point has been told, the measured neighbours are
   considered in ascending order of mean cost; the first one that
   :func:`is_faster` than the centre becomes the new centre, and the walk
   restarts at radius 1 around it.  Otherwise the radius keeps growing.
4. The search finishes when the centre has no unproposed valid neighbour at
   any radius (the neighbourhood is exhausted), when the ``budget`` of
   measurements is spent, or when ``failure_limit`` measurements in a row
   failed (an all-invalid neighbourhood).

A failed measurement (``costs`` empty or ``None``) is remembered, so the point
is not proposed again, and never becomes the centre.
"""
import logging
import math
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

Point = Tuple[int, ...]
"""A point of the search space: one index per dimension."""

Costs = Tuple[float, ...]
"""The costs (seconds per run) measured for one point; empty when it failed."""

_LOGGER = logging.getLogger("droplet_search")


def _log_beta(alpha: float, beta: float) -> float:
    return math.lgamma(alpha) + math.lgamma(beta) - math.lgamma(alpha + beta)


def _beta_continued_fraction(alpha: float, beta: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c_term = 1.0
    d_term = 1.0 - (alpha + beta) * x / (alpha + 1.0)
    d_term = 1.0 / (d_term if abs(d_term) > tiny else tiny)
    fraction = d_term
    for step in range(1, 400):
        even = 2 * step
        coefficient = step * (beta - step) * x / ((alpha + even - 1.0) * (alpha + even))
        for numerator in (coefficient, None):
            if numerator is None:
                numerator = (
                    -(alpha + step) * (alpha + beta + step) * x / ((alpha + even) * (alpha + even + 1.0))
                )
            d_term = 1.0 + numerator * d_term
            d_term = 1.0 / (d_term if abs(d_term) > tiny else tiny)
            c_term = 1.0 + numerator / c_term
            c_term = c_term if abs(c_term) > tiny else tiny
            fraction *= d_term * c_term
        if abs(d_term * c_term - 1.0) < 1e-15:
            break
    return fraction


def regularized_incomplete_beta(alpha: float, beta: float, x: float) -> float:
    """The regularized incomplete beta function ``I_x(alpha, beta)``.

    Parameters
    ----------
    alpha, beta : float
        Positive shape parameters.
    x : float
        The upper limit of integration, in ``[0, 1]``.

    Returns
    -------
    value : float
        ``I_x(alpha, beta)``.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(alpha * math.log(x) + beta * math.log1p(-x) - _log_beta(alpha, beta))
    if x < (alpha + 1.0) / (alpha + beta + 2.0):
        return front * _beta_continued_fraction(alpha, beta, x) / alpha
    return 1.0 - front * _beta_continued_fraction(beta, alpha, 1.0 - x) / beta


def student_t_sf(statistic: float, dof: float) -> float:
    """Survival function ``P(T > statistic)`` of Student's t distribution.

    Parameters
    ----------
    statistic : float
        The value of the t statistic (may be infinite).
    dof : float
        Degrees of freedom, positive (need not be an integer).

    Returns
    -------
    probability : float
        The one-sided upper tail probability.
    """
    if math.isinf(statistic):
        return 0.0 if statistic > 0 else 1.0
    tail = 0.5 * regularized_incomplete_beta(dof / 2.0, 0.5, dof / (dof + statistic * statistic))
    return tail if statistic > 0 else 1.0 - tail


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _variance(values: Sequence[float]) -> float:
    centre = _mean(values)
    return sum((value - centre) ** 2 for value in values) / (len(values) - 1)


def welch_pvalue(candidate: Sequence[float], incumbent: Sequence[float]) -> float:
    """One-sided Welch t-test that ``candidate`` has a lower mean than ``incumbent``.

    Parameters
    ----------
    candidate, incumbent : Sequence[float]
        Two samples with at least two values each.

    Returns
    -------
    pvalue : float
        The p-value of the alternative "mean(candidate) < mean(incumbent)".
    """
    if len(candidate) < 2 or len(incumbent) < 2:
        raise ValueError("Welch's test needs at least two values in each sample")
    difference = _mean(incumbent) - _mean(candidate)
    var_candidate = _variance(candidate) / len(candidate)
    var_incumbent = _variance(incumbent) / len(incumbent)
    standard_error_sq = var_candidate + var_incumbent
    if standard_error_sq == 0.0:
        if difference > 0:
            return 0.0
        return 1.0 if difference < 0 else 0.5
    statistic = difference / math.sqrt(standard_error_sq)
    dof = standard_error_sq**2 / (
        var_candidate**2 / (len(candidate) - 1) + var_incumbent**2 / (len(incumbent) - 1)
    )
    return student_t_sf(statistic, dof)


def is_faster(candidate: Sequence[float], incumbent: Sequence[float], pvalue: float) -> bool:
    """Whether ``candidate`` costs are convincingly lower than ``incumbent`` costs.

    With at least two costs in each sample this is a one-sided Welch t-test at
    significance ``pvalue``.  With fewer (a runner configured with a single
    repeat), no variance can be estimated and the rule is a plain comparison:
    the candidate is faster when its mean cost is strictly lower.  An empty
    candidate (a failed measurement) is never faster; any successful candidate
    is faster than an empty incumbent.

    Parameters
    ----------
    candidate, incumbent : Sequence[float]
        Measured costs (lower is better).
    pvalue : float
        The significance level of the test, in ``(0, 1]``.

    Returns
    -------
    faster : bool
        True when the candidate should replace the incumbent.
    """
    if not candidate:
        return False
    if not incumbent:
        return True
    if _mean(candidate) >= _mean(incumbent):
        return False
    if len(candidate) < 2 or len(incumbent) < 2:
        return True
    return welch_pvalue(candidate, incumbent) <= pvalue


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
    pvalue : float
        Significance level of the acceptance test, see :func:`is_faster`.
    is_valid : Optional[Callable[[Point], bool]]
        Predicate telling whether a point is a legal configuration; points it
        rejects are never proposed.  Every point is valid when omitted.
    budget : Optional[int]
        The largest number of points to propose over the search; unlimited
        when omitted.  Points given to :meth:`observe` do not count.
    failure_limit : Optional[int]
        How many failed measurements in a row end the search.  Defaults to the
        size of a full radius-1 neighbourhood, ``2 * len(dims)`` (at least 1).
    logger : Optional[Union[logging.Logger, logging.LoggerAdapter]]
        Where to report moves and the reason the search finished.
    """

    def __init__(
        self,
        dims: Sequence[int],
        start: Optional[Sequence[int]] = None,
        *,
        pvalue: float = 0.05,
        is_valid: Optional[Callable[[Point], bool]] = None,
        budget: Optional[int] = None,
        failure_limit: Optional[int] = None,
        logger: Optional[Union[logging.Logger, logging.LoggerAdapter]] = None,
    ):
        self.dims: Point = tuple(int(size) for size in dims)
        if any(size < 1 for size in self.dims):
            raise ValueError(f"every dimension needs at least one value, got sizes {self.dims}")
        if not 0.0 < pvalue <= 1.0:
            raise ValueError(f"pvalue must be in (0, 1], got {pvalue}")
        if budget is not None and budget < 1:
            raise ValueError(f"the budget must be a positive number of measurements, got {budget}")
        self.pvalue = float(pvalue)
        self.budget = budget
        self.failure_limit = failure_limit if failure_limit is not None else max(1, 2 * len(dims))
        if self.failure_limit < 1:
            raise ValueError(f"failure_limit must be positive, got {failure_limit}")
        self.logger = logger or _LOGGER
        self._is_valid = is_valid
        self._invalid: set = set()
        centre = tuple(0 for _ in self.dims) if start is None else tuple(int(i) for i in start)
        self._check_in_box(centre, "start point")
        if not self.is_valid(centre):
            raise ValueError(f"the start point {centre} is not a valid point of the space")
        self.centre: Point = centre
        self.measured: Dict[Point, Costs] = {}
        self.proposed_count = 0
        self.moves = 0
        self.stop_reason: Optional[str] = None
        self._outstanding: Dict[Point, None] = {}
        self._round: List[Point] = []
        self._consecutive_failures = 0
        self._walk: Iterator[Point] = self._neighbourhood(self.centre)
        self._lookahead: Optional[Point] = None

    # ------------------------------------------------------------------ space
    def _check_in_box(self, point: Point, what: str) -> None:
        if len(point) != len(self.dims):
            raise ValueError(
                f"the {what} {point} has {len(point)} coordinates, the space has {len(self.dims)}"
            )
        for axis, (index, size) in enumerate(zip(point, self.dims)):
            if not 0 <= index < size:
                raise ValueError(
                    f"the {what} {point} is out of range on dimension {axis} (size {size})"
                )

    def is_valid(self, point: Point) -> bool:
        """Whether ``point`` may be proposed (cached calls of the ``is_valid`` predicate)."""
        if point in self._invalid:
            return False
        if self._is_valid is None or self._is_valid(point):
            return True
        self._invalid.add(point)
        return False

    def neighbourhood(self, centre: Point, radius: int) -> List[Point]:
        """The in-box points at ``radius`` steps from ``centre`` along one axis.

        Parameters
        ----------
        centre : Point
            The point to walk from.
        radius : int
            The step length, at least 1.

        Returns
        -------
        points : List[Point]
            For each dimension in order, the point ``radius`` steps up, then the
            point ``radius`` steps down, when it lies inside the box.
        """
        points = []
        for axis, size in enumerate(self.dims):
            for step in (radius, -radius):
                index = centre[axis] + step
                if 0 <= index < size:
                    points.append(centre[:axis] + (index,) + centre[axis + 1 :])
        return points

    def _neighbourhood(self, centre: Point) -> Iterator[Point]:
        for radius in range(1, max(self.dims, default=1)):
            yield from self.neighbourhood(centre, radius)

    # ------------------------------------------------------------- ask / tell
    @property
    def remaining_budget(self) -> Optional[int]:
        """How many more points may be proposed, or None when unlimited."""
        return None if self.budget is None else max(0, self.budget - self.proposed_count)

    @property
    def finished(self) -> bool:
        """Whether the search is over: nothing outstanding and nothing left to propose."""
        if self._outstanding:
            return False
        if self.stop_reason is not None:
            return True
        if self.remaining_budget == 0:
            self._finish("the budget of %d measurements is spent" % self.budget)
            return True
        if self.centre not in self.measured:
            return False
        if self._peek() is None:
            self._finish("the neighbourhood of the best point is exhausted")
            return True
        return False

    def _finish(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.logger.info(
                "Droplet search finished after %d measurements: %s", self.proposed_count, reason
            )

    def _take(self, point: Point) -> None:
        self._outstanding[point] = None
        self.proposed_count += 1

    def ask(self, count: int) -> List[Point]:
        """Propose up to ``count`` points to measure next.

        Parameters
        ----------
        count : int
            The largest number of points wanted (the batch size).

        Returns
        -------
        points : List[Point]
            Distinct, valid, never-before-proposed points; fewer than ``count``
            (possibly none) when the neighbourhood or the budget runs out.
        """
        if count < 1:
            raise ValueError(f"ask() needs a positive count, got {count}")
        if self.stop_reason is not None:
            return []
        remaining = self.remaining_budget
        if remaining is not None:
            count = min(count, remaining)
        batch: List[Point] = []
        if count and self.centre not in self.measured and self.centre not in self._outstanding:
            self._take(self.centre)
            batch.append(self.centre)
        while len(batch) < count:
            point = self._peek()
            if point is None:
                break
            self._lookahead = None
            self._take(point)
            batch.append(point)
        return batch

    def _peek(self) -> Optional[Point]:
        """The next point the walk would propose, without proposing it."""
        while True:
            if self._lookahead is None:
                self._lookahead = next(self._walk, None)
                if self._lookahead is None:
                    return None
            point = self._lookahead
            if point not in self.measured and point not in self._outstanding and self.is_valid(point):
                return point
            self._lookahead = None

    def tell(self, point: Sequence[int], costs: Optional[Sequence[float]]) -> None:
        """Report the measurement of a point returned by :meth:`ask`.

        Parameters
        ----------
        point : Sequence[int]
            A point returned by :meth:`ask` and not told yet.
        costs : Optional[Sequence[float]]
            The measured costs, lower is better; ``None`` or empty when the
            measurement failed (compile error, run error, timeout, wrong result).
        """
        point = tuple(point)
        if point not in self._outstanding:
            raise KeyError(f"point {point} was not proposed by ask() or was already told")
        del self._outstanding[point]
        self.measured[point] = self._clean(costs)
        if point != self.centre:
            self._round.append(point)
        if self.measured[point]:
            self._consecutive_failures = 0
        else:
            self._consecutive_failures += 1
        if not self._outstanding:
            self._decide()

    def observe(self, point: Sequence[int], costs: Optional[Sequence[float]]) -> None:
        """Record a point measured before this search (a tuning log being resumed).

        The point is not proposed again.  When it is successful and cheaper on
        average than the centre, it becomes the centre.  Call it only while no
        proposed point is outstanding.

        Parameters
        ----------
        point : Sequence[int]
            A point of the box (validity is not re-checked: it was measured).
        costs : Optional[Sequence[float]]
            Its costs, ``None`` or empty when it failed.
        """
        point = tuple(int(i) for i in point)
        self._check_in_box(point, "observed point")
        if self._outstanding:
            raise RuntimeError("observe() must not be called while measurements are outstanding")
        costs = self._clean(costs)
        previous = self.measured.get(point)
        if previous:
            costs = previous + costs if costs else previous
        self.measured[point] = costs
        centre_costs = self.measured.get(self.centre)
        if costs and (not centre_costs or _mean(costs) < _mean(centre_costs)):
            self._move(point)

    @staticmethod
    def _clean(costs: Optional[Sequence[float]]) -> Costs:
        if not costs:
            return ()
        values = tuple(float(cost) for cost in costs)
        if any(not math.isfinite(value) or value < 0 for value in values):
            return ()
        return values

    def _move(self, point: Point) -> None:
        self.centre = point
        self._walk = self._neighbourhood(point)
        self._lookahead = None
        self.moves += 1

    def _decide(self) -> None:
        round_points, self._round = self._round, []
        incumbent = self.measured.get(self.centre, ())
        successes = sorted(
            (point for point in round_points if self.measured[point]),
            key=lambda point: _mean(self.measured[point]),
        )
        for point in successes:
            if is_faster(self.measured[point], incumbent, self.pvalue):
                self.logger.debug(
                    "Droplet search moves to %s (mean cost %.3g s, was %s)",
                    point,
                    _mean(self.measured[point]),
                    "%.3g s" % _mean(incumbent) if incumbent else "failed",
                )
                self._move(point)
                break
        if self._consecutive_failures >= self.failure_limit:
            self._finish(
                "the last %d measurements all failed (all-invalid neighbourhood)"
                % self._consecutive_failures
            )

    # --------------------------------------------------------------- results
    @property
    def best(self) -> Optional[Tuple[Point, Costs]]:
        """The centre and its costs, or None while no measurement succeeded."""
        costs = self.measured.get(self.centre)
        if costs:
            return self.centre, costs
        return None

    def mean_cost(self, point: Sequence[int]) -> Optional[float]:
        """The mean measured cost of ``point``, None when unmeasured or failed."""
        costs = self.measured.get(tuple(point))
        return _mean(costs) if costs else None
