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
"""The measurement loop of a Droplet Search, shared by the scheduler integrations.

A scheduler integration maps its schedules to points of a
:class:`~.search.DropletSearch` and gives the driver one callback that builds,
runs, checks and records a batch of points.  The driver owns everything else:
asking for points, recognising a program reached from two points (it is
measured once; the other point is told the same costs, uncounted), telling the
results, and stopping.  Budget and failure limit are the search's own.
"""
from collections import defaultdict
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from .neighbourhood import Point
from .search import Costs, DropletSearch, is_count
from .statistics import has_lower_mean

Evaluate = Callable[
    [List[Point], Callable[[Optional[Sequence[float]]], bool]], List[Optional[Sequence[float]]]
]
"""Builds and runs points, checks and records them: ``evaluate(points, contends)``.

It returns the costs of each point in order (None for a failure).  A point
whose costs satisfy ``contends`` would become the best point or the next
centre: that is the point whose outputs deserve a check before its costs are
returned.
"""


class BatchDriver:
    """Drives a :class:`~.search.DropletSearch` batch by batch.

    Parameters
    ----------
    search : DropletSearch
        The search to drive.
    batch_size : int
        The largest number of programs measured together.
    identify : Optional[Callable[[Point], Hashable]]
        The identity of the program of a point; points with equal identities
        are the same program, measured once.  The point itself by default.
    """

    def __init__(
        self,
        search: DropletSearch,
        batch_size: int,
        identify: Optional[Callable[[Point], Hashable]] = None,
    ):
        if not is_count(batch_size):
            raise ValueError(
                f"batch_size must be a positive number of programs, got {batch_size!r}"
            )
        self.search = search
        self.batch_size = batch_size
        self._identify = identify or (lambda point: point)
        self._known: Dict[Hashable, Costs] = {}
        self.measured = 0
        self.duplicates = 0

    def observe(
        self, point: Sequence[int], costs: Optional[Sequence[float]], *, remeasure: bool = False
    ) -> None:
        """Record a point measured before (see :meth:`DropletSearch.observe`).

        Its program is known from then on: a point reaching the same program is
        told the costs of its record with the lowest mean (a failure when every
        record failed) instead of being measured.

        Parameters
        ----------
        point : Sequence[int]
            A point of the search's box.
        costs : Optional[Sequence[float]]
            Its recorded costs, None or empty when it failed.
        remeasure : bool
            Whether the costs were measured under other conditions: should the
            point be the centre, it is measured again, and points of the same
            batch reaching its program wait for the new costs.

        Raises
        ------
        RuntimeError
            When measurements are outstanding (see :meth:`DropletSearch.observe`).
        """
        self.search.observe(point, costs, remeasure=remeasure)
        key = self._identify(tuple(point))
        observed = self.search.costs(point) or ()
        known = self._known.get(key)
        if known is None or has_lower_mean(observed, known):
            self._known[key] = observed

    def run(self, evaluate: Evaluate) -> None:
        """Measure batches until the search finishes.

        Parameters
        ----------
        evaluate : Evaluate
            Builds, runs, checks and records a batch of points.

        Raises
        ------
        RuntimeError
            When ``evaluate`` returns another number of results than points.
        ValueError
            When a cost is negative, infinite or not a number (see
            :meth:`DropletSearch.tell`).
        """
        search = self.search
        while not search.finished:
            fresh, waiting = self._next_batch()
            if not fresh:
                if search.finished:
                    break
                raise RuntimeError("the search neither finished nor proposed a point")
            results = list(evaluate(fresh, search.contends))
            if len(results) != len(fresh):
                raise RuntimeError(
                    f"evaluate returned {len(results)} results for {len(fresh)} points"
                )
            for point, costs in zip(fresh, results):
                search.tell(point, costs)
                self.measured += 1
                key = self._identify(point)
                self._known[key] = search.costs(point)
                for duplicate in waiting.pop(key, []):
                    search.tell(duplicate, costs, counted=False)

    def _next_batch(self) -> Tuple[List[Point], Dict[Hashable, List[Point]]]:
        """New programs to measure; points of known programs are told at once."""
        search = self.search
        fresh: List[Point] = []
        keys: Dict[Hashable, Point] = {}
        waiting: Dict[Hashable, List[Point]] = defaultdict(list)
        while len(fresh) < self.batch_size:
            points = search.ask(self.batch_size - len(fresh))
            if not points:
                break
            for point in points:
                key = self._identify(point)
                if search.costs(point) is not None:
                    # An observed centre, measured again on purpose: points reaching
                    # its program wait for the new costs.
                    self._known.pop(key, None)
                    keys[key] = point
                    fresh.append(point)
                    continue
                if key in self._known:
                    self.duplicates += 1
                    search.tell(point, self._known[key], counted=False)
                elif key in keys:
                    self.duplicates += 1
                    waiting[key].append(point)
                else:
                    keys[key] = point
                    fresh.append(point)
        return fresh, waiting
