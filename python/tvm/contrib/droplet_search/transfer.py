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
"""Other workloads' fastest schedules, taken over, measured with a search's start.

A network's workloads of the same kind (convolutions of other sizes) are
scheduled by the same template, rules or sketch, and their fastest schedules
are often alike.  Each integration maps another workload's records into its own
space (by knob values, trace decisions or transform-step values); this module
picks which of those points a search measures in its first round, as a sample:
every workload's fastest before any workload's second fastest.
"""
from typing import Callable, Iterator, List, Optional, Sequence, Set

from .neighbourhood import Point
from .search import DropletSearch

TRANSFER_SAMPLE = 8
"""How many schedules of other workloads a search takes over, at most."""

TRANSFER_PER_WORKLOAD = 2
"""How many of each other workload's fastest schedules are taken over, at most."""


def transfer_limit(budget: Optional[int]) -> int:
    """How many schedules a search with ``budget`` measurements takes over: at
    most ``TRANSFER_SAMPLE`` and a quarter of the budget (at least one)."""
    if budget is None:
        return TRANSFER_SAMPLE
    return min(TRANSFER_SAMPLE, max(1, budget // 4))


def take_over(
    sources: Sequence[Iterator[Point]],
    limit: int = TRANSFER_SAMPLE,
    skip: Optional[Callable[[Point], bool]] = None,
) -> List[Point]:
    """The points of other workloads to measure with the start, in order.

    Parameters
    ----------
    sources : Sequence[Iterator[Point]]
        One iterator per other workload: the valid points its records take
        over in this space, fastest record first.  A point a workload gave
        before (a schedule measured twice) is passed over; each is advanced no
        further than its ``TRANSFER_PER_WORKLOAD``-th distinct point, so that
        points can be made lazily.
    limit : int
        The largest number of points taken.
    skip : Optional[Callable[[Point], bool]]
        Points not to take (e.g. the start, or points measured before); such a
        point, or one another workload gave, still uses its workload's turn.

    Returns
    -------
    points : List[Point]
        Distinct points: every workload's first, then every workload's second.
    """
    points: List[Point] = []
    given: List[Set[Point]] = [set() for _ in sources]
    for _ in range(TRANSFER_PER_WORKLOAD):
        for source, before in zip(sources, given):
            if len(points) >= limit:
                return points
            point = next((candidate for candidate in source if candidate not in before), None)
            if point is None:
                continue
            before.add(point)
            if point not in points and not (skip and skip(point)):
                points.append(point)
    return points


def add_taken_over(
    search: DropletSearch, sources: Sequence[Iterator[Point]], limit: Optional[int] = None
) -> List[Point]:
    """Add the points :func:`take_over` picks from ``sources`` to ``search``'s next round.

    At most ``limit`` points, by default ``transfer_limit(search.budget)``; the
    search's centre and the points it measured before are skipped (each still
    uses its workload's turn), so a repeated call takes over nothing twice.

    Parameters
    ----------
    search : DropletSearch
        The search, between rounds (see :meth:`DropletSearch.add_sample`).
    sources : Sequence[Iterator[Point]]
        As for :func:`take_over`: one iterator per other workload.
    limit : Optional[int]
        The most points taken over (e.g. ``transfer_limit`` of the task's whole
        budget, when the search has only a first pass of it).

    Returns
    -------
    added : List[Point]
        The points the search will measure with its centre, in order.
    """
    points = take_over(
        sources,
        transfer_limit(search.budget) if limit is None else limit,
        skip=lambda point: point == search.centre or search.costs(point) is not None,
    )
    return search.add_sample(points)
