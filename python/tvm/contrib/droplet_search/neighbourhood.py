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
"""The neighbourhood of a Droplet Search centre, walked in order of promise.

From a centre, the walk proposes axis moves (one coordinate changed) at growing
radius ``r = 1, 2, ...``: ``O(len(dims))`` points per radius.  Moves that
change several coordinates are generated lazily from measured evidence instead
of enumerated (an enumeration of all sign-uniform diagonal directions, as in
the first Droplet tuner, is exponential in the number of dimensions):

- after a round without a move, diagonal moves at radius ``r`` (two
  coordinates changed by ``r``) are ranked by the gains their two axis moves
  measured, and the best of them, at most ``2 * len(dims)`` per radius (or a
  quota given by the caller), are proposed before the walk goes on;

- *promoted* points, proposed before anything else: after a move from ``a``
  to ``b``, the pattern move ``b + (b - a)`` and ``b`` plus each other step
  that improved on ``a`` (that step combined with the accepted one);
- within a radius, the directions that improved recently come first (their
  score decays as other directions improve), so on a budget the likeliest
  winners are measured first;
- *repaired* moves, after the axis moves of each radius: an axis move that
  leaves the valid points (a tile factor that no longer divides the loop with
  the other factors of its split) combined with each step on another axis
  that makes it valid again (the factor taken from another level of the
  split), one step at this radius and the other at it or one shorter, at most
  ``2 * len(dims)`` per radius.  Where validity couples coordinates, these are
  the single steps of the space's own geometry, which no axis move makes.

Steps that leave the box are dropped: no wrap-around, no clamping.
"""
from collections import deque
from itertools import chain, product
from typing import Callable, Deque, Dict, Iterator, List, Optional, Sequence, Set, Tuple

Point = Tuple[int, ...]
"""A point of the search space: one index per dimension."""

Direction = Tuple[int, int]
"""An axis and a sign (+1 or -1)."""

Step = Tuple[int, int]
"""An axis and a signed number of indices to move along it."""

DECAY = 0.5
"""How much of a direction's score survives each later improvement elsewhere."""


def shifted(point: Point, axis: int, step: int) -> Point:
    """``point`` with ``step`` added to coordinate ``axis``."""
    return point[:axis] + (point[axis] + step,) + point[axis + 1 :]


def in_box(point: Sequence[int], dims: Sequence[int]) -> bool:
    """Whether every coordinate of ``point`` lies in ``[0, dims[i])``."""
    return all(0 <= index < size for index, size in zip(point, dims))


class DirectionScores:
    """Recent improvements per direction: the order in which a radius is walked.

    Parameters
    ----------
    dims : Sequence[int]
        The sizes of the dimensions.
    """

    def __init__(self, dims: Sequence[int]):
        self.scores: Dict[Direction, float] = {}
        self.natural: List[Direction] = [
            (axis, sign) for axis, size in enumerate(dims) if size > 1 for sign in (1, -1)
        ]

    def reward(self, direction: Direction, gain: float) -> None:
        """Record that a step along ``direction`` lowered the mean cost by ``gain`` (relative)."""
        for known in list(self.scores):
            self.scores[known] *= DECAY
        self.scores[direction] = self.scores.get(direction, 0.0) + gain

    def order(self) -> List[Direction]:
        """Directions by descending score, then axis order (up before down)."""
        rank = {direction: position for position, direction in enumerate(self.natural)}
        return sorted(self.natural, key=lambda d: (-self.scores.get(d, 0.0), rank[d]))


class Walk:
    """The points around one centre, in the order they are proposed.

    Promoted points first, then for each radius ``r = 1, 2, ...`` the axis
    moves at ``r``, directions in the given order, then (given ``is_valid``)
    the repaired moves at ``r``.

    Parameters
    ----------
    centre : Point
        The point walked around.
    dims : Sequence[int]
        The sizes of the dimensions.
    directions : Sequence[Direction]
        The order of the directions within each radius.
    max_radius : Optional[int]
        The largest step length; by default the largest that fits the box.
    is_valid : Optional[Callable[[Point], bool]]
        Whether a point is valid; without it, no repaired moves are made.
    pairs_per_radius : Optional[int]
        How many diagonal moves :meth:`pairs` proposes at most per radius; by
        default ``2 * len(dims)``, as many as the axis moves of a radius.
    """

    def __init__(
        self,
        centre: Point,
        dims: Sequence[int],
        directions: Sequence[Direction],
        max_radius: Optional[int] = None,
        is_valid: Optional[Callable[[Point], bool]] = None,
        pairs_per_radius: Optional[int] = None,
    ):
        self.centre = centre
        self.dims = tuple(dims)
        self.max_radius = max(self.dims, default=1) - 1 if max_radius is None else max_radius
        self.pairs_per_radius = 2 * len(self.dims) if pairs_per_radius is None else pairs_per_radius
        self.directions = list(directions)
        self.is_valid = is_valid
        self.paired: Set[Point] = set()
        self._promoted: Deque[Point] = deque()
        self._moves: Iterator[Point] = self._axis_moves()

    def _axis_moves(self) -> Iterator[Point]:
        shorter: List[Step] = []
        for radius in range(1, self.max_radius + 1):
            steps = []
            for axis, sign in self.directions:
                index = self.centre[axis] + sign * radius
                if 0 <= index < self.dims[axis]:
                    steps.append((axis, sign * radius))
                    yield shifted(self.centre, axis, sign * radius)
            if self.is_valid is not None:
                yield from self._repaired_moves(steps, shorter)
            shorter = steps

    def _repaired_moves(self, steps: Sequence[Step], shorter: Sequence[Step]) -> Iterator[Point]:
        """The repaired moves of one radius: each invalid axis move combined with a step
        on another axis that makes it valid, of this radius or one shorter.

        First the invalid moves of ``steps`` (this radius) with the other ``steps``,
        then with the ``shorter`` steps (of the radius before), then the invalid
        ``shorter`` moves with ``steps``: a divisor's index and its double's are
        not always the same distance apart on two axes.  At most ``2 * len(dims)``
        per radius, as many as its axis moves, so that a space where most points
        are invalid keeps a neighbourhood linear in its dimensions.
        """
        broken = [step for step in steps if not self.is_valid(shifted(self.centre, *step))]
        broken_shorter = [
            step for step in shorter if not self.is_valid(shifted(self.centre, *step))
        ]
        candidates = chain(
            product(broken, steps), product(broken, shorter), product(broken_shorter, steps)
        )
        proposed: Set[Point] = set()
        for invalid, repair in candidates:
            if repair[0] != invalid[0]:
                point = combined(self.centre, [invalid, repair])
                if point not in proposed and self.is_valid(point):
                    proposed.add(point)
                    yield point
                    if len(proposed) >= 2 * len(self.dims):
                        return

    def promote(self, points: Sequence[Point]) -> None:
        """Propose ``points`` (those inside the box) before every other point."""
        for point in reversed(points):
            if in_box(point, self.dims) and point != self.centre:
                self._promoted.appendleft(point)

    def next_point(self) -> Optional[Point]:
        """The next point of the walk, None when it is exhausted."""
        if self._promoted:
            return self._promoted.popleft()
        return next(self._moves, None)

    def pairs(self, gain: Callable[[Point], Optional[float]]) -> List[Point]:
        """The most promising diagonal moves not proposed yet, best first.

        For each radius at which at least two axis moves were measured, the
        pairs of those moves on different axes, ranked by the sum of their
        gains; at most ``pairs_per_radius`` per radius over the walk.

        Parameters
        ----------
        gain : Callable[[Point], Optional[float]]
            The relative gain of a measured point over the centre (positive
            when cheaper); None for a failed or unmeasured point.

        Returns
        -------
        points : List[Point]
            The diagonal moves to promote.
        """
        chosen: List[Point] = []
        for radius in range(1, self.max_radius + 1):
            measured = []
            for axis, sign in self.directions:
                index = self.centre[axis] + sign * radius
                if 0 <= index < self.dims[axis]:
                    point = shifted(self.centre, axis, sign * radius)
                    value = gain(point)
                    if value is not None:
                        measured.append((value, axis, sign))
            if len(measured) < 2:
                continue
            measured.sort(reverse=True)
            scored = []
            for first, (gain_a, axis_a, sign_a) in enumerate(measured):
                for gain_b, axis_b, sign_b in measured[first + 1 :]:
                    if axis_a != axis_b:
                        point = combined(
                            self.centre, [(axis_a, sign_a * radius), (axis_b, sign_b * radius)]
                        )
                        scored.append((gain_a + gain_b, point))
            scored.sort(key=lambda item: -item[0])
            quota = self.pairs_per_radius - sum(
                1 for point in self.paired if _radius(self.centre, point) == radius
            )
            for _, point in scored:
                if quota <= 0:
                    break
                if point not in self.paired:
                    self.paired.add(point)
                    chosen.append(point)
                    quota -= 1
        return chosen


def _radius(centre: Point, point: Point) -> int:
    return max(abs(a - b) for a, b in zip(centre, point))


def step_of(centre: Point, point: Point) -> Optional[Tuple[int, int]]:
    """``(axis, step)`` when ``point`` differs from ``centre`` in one coordinate, else None."""
    changed = [axis for axis, (a, b) in enumerate(zip(centre, point)) if a != b]
    if len(changed) != 1:
        return None
    axis = changed[0]
    return axis, point[axis] - centre[axis]


def combined(point: Point, steps: Sequence[Tuple[int, int]]) -> Point:
    """``point`` moved by every ``(axis, step)`` of ``steps``."""
    for axis, step in steps:
        point = shifted(point, axis, step)
    return point
