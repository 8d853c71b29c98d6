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
"""One budget of measurements shared by the tasks of a model, heaviest first.

A model's tasks do not weigh the same: a task whose kernel takes a third of
the model's run time gains the model more from a faster kernel than one that
takes a hundredth.  The integrations search the tasks one after another in
descending order of their *share*, the run time of the task's best program
times its weight (how many times a run of the model runs it), and spend one
budget of measurements for all of them: each task at most its own budget, and
a task whose turn comes after the shared budget is spent is not searched.

The shares are known only from the programs found so far: after a few
measurements a task may turn out lighter or heavier than it looked.  With a
*first pass*, every task is first searched with a few measurements, and the rest
of the budget then goes by the shares the first pass left, to the tasks whose
search used all of its first budget (each searched again from its best program).
"""
import math
import numbers
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, TypeVar

from .search import is_count

NOT_REACHED = "max_trials_global was spent before its turn"
"""The stop reason of a task the shared budget did not reach."""

Result = TypeVar("Result")
"""An integration's result of one task: anything with ``measured``, its measurement count."""


def check_task_weights(
    task_weights: Optional[Sequence[float]], tasks: Optional[Sequence]
) -> Optional[List[float]]:
    """The task weights as floats, one per task, or None when not given.

    Parameters
    ----------
    task_weights : Optional[Sequence[float]]
        How many times a run of the model runs each task.
    tasks : Optional[Sequence]
        The tasks they weigh; None when the caller was given no tasks.

    Returns
    -------
    weights : Optional[List[float]]
        The weights, in the order of the tasks.

    Raises
    ------
    ValueError
        For weights without tasks, another number of weights than tasks, or a
        weight that is not a positive finite number.
    """
    if task_weights is None:
        return None
    if tasks is None:
        raise ValueError("task_weights were given without tasks: pass the tasks they weigh")
    weights = list(task_weights)
    if len(weights) != len(tasks):
        raise ValueError(
            f"task_weights has {len(weights)} weights for {len(tasks)} tasks: give one per task"
        )
    for position, weight in enumerate(weights):
        if (
            isinstance(weight, bool)
            or not isinstance(weight, numbers.Real)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise ValueError(
                f"task_weights[{position}] must be a positive number of runs, got {weight!r}"
            )
    return [float(weight) for weight in weights]


def check_global_budget(max_trials_global) -> Optional[int]:
    """``max_trials_global`` as a count, None for no shared budget, or a ValueError."""
    if max_trials_global is None:
        return None
    if not is_count(max_trials_global):
        raise ValueError(
            "max_trials_global must be a positive number of trials for all tasks, "
            f"got {max_trials_global!r}"
        )
    return int(max_trials_global)


def share_order(shares: Sequence[float]) -> List[int]:
    """The positions of the tasks in the order they are searched: largest share first.

    Parameters
    ----------
    shares : Sequence[float]
        Each task's share of the model's run time (best run time times weight).

    Returns
    -------
    order : List[int]
        Positions into ``shares``; equal shares keep their order.
    """
    return sorted(range(len(shares)), key=lambda position: -shares[position])


@dataclass
class FirstPass:
    """A first pass of :meth:`SharedBudget.search_in_share_order` over every task.

    Parameters
    ----------
    budget : int
        The measurements of each task in the first pass.
    share : Callable[[int, Result], float]
        A task's share after the first pass, from its position and first result
        (its best cost found times its weight).
    join : Callable[[Result, Result], Result]
        The result of a task searched twice, from its first and second results.
    max_trials : Optional[int]
        The most measurements of the first pass over all tasks (None: as many
        as the shared budget has).  A task whose turn in the first pass comes
        after they are spent waits for the second pass, where its share is
        its share before any search.
    """

    budget: int
    share: Callable[[int, Result], float]
    join: Callable[[Result, Result], Result]
    max_trials: Optional[int] = None

    def __post_init__(self):
        if not is_count(self.budget):
            raise ValueError(
                f"the first pass needs a positive number of measurements per task, "
                f"got {self.budget!r}"
            )
        if self.max_trials is not None and not is_count(self.max_trials):
            raise ValueError(
                f"the first pass needs a positive number of measurements in all, "
                f"got {self.max_trials!r}"
            )


class SharedBudget:
    """The measurements left to the tasks searched one after another.

    Parameters
    ----------
    max_trials_global : Optional[int]
        The budget of all tasks together; None for no shared bound.
    """

    def __init__(self, max_trials_global: Optional[int]):
        self.remaining = check_global_budget(max_trials_global)

    @property
    def spent(self) -> bool:
        """Whether nothing is left for the next task."""
        return self.remaining == 0

    def grant(self, task_budget: int) -> int:
        """The budget of the next task: its own, or what is left when that is less.

        It is 0 once the budget is :attr:`spent`, so a caller asks :attr:`spent`
        first (as :meth:`search_in_share_order` does): a search is never given a
        budget of 0, which its checks would refuse.
        """
        if self.remaining is None:
            return task_budget
        return min(task_budget, self.remaining)

    def spend(self, measured: int) -> None:
        """Count the measurements a task made."""
        if self.remaining is not None:
            self.remaining = max(0, self.remaining - measured)

    def search_in_share_order(
        self,
        shares: Sequence[float],
        task_budget: int,
        search: Callable[[int, int], Result],
        not_reached: Callable[[int], Result],
        announce: Optional[Callable[[int], None]] = None,
        first_pass: Optional[FirstPass] = None,
    ) -> List[Result]:
        """Search the tasks one after another, largest share first, within the budgets.

        Parameters
        ----------
        shares : Sequence[float]
            Each task's share of the model's run time (see :func:`share_order`).
        task_budget : int
            The most measurements one task may make (over both passes).
        search : Callable[[int, int], Result]
            Searches the task at a position within a budget of measurements and
            returns its result, whose ``measured`` is spent from this budget.
            In the second pass it is called again for the same position and
            continues the task's search (or, for a task the first pass's
            ``max_trials`` left waiting, called for the first time).
        not_reached : Callable[[int], Result]
            The result of the task at a position whose turn came after this
            budget was spent; it measures nothing.
        announce : Optional[Callable[[int], None]]
            Called with each task's position when its turn comes in the first
            pass, searched or not (e.g. to log its share).
        first_pass : Optional[FirstPass]
            Search every task with a few measurements first, then spend the
            rest by the shares after that pass (see :class:`FirstPass`); one
            pass when omitted.

        Returns
        -------
        results : List[Result]
            One result per task, in the order of ``shares``; a task searched in
            both passes has its two results joined by ``first_pass.join``.
        """
        first_budget = task_budget if first_pass is None else min(task_budget, first_pass.budget)
        first_left = None if first_pass is None else first_pass.max_trials
        results = {}
        granted = {}
        waiting = []  # tasks whose turn came after the first pass's own bound was spent
        for position in share_order(shares):
            if announce is not None:
                announce(position)
            if self.spent:
                results[position] = not_reached(position)
                continue
            if first_left == 0:
                waiting.append(position)
                continue
            granted[position] = self.grant(first_budget)
            if first_left is not None:
                granted[position] = min(granted[position], first_left)
            results[position] = search(position, granted[position])
            self.spend(results[position].measured)
            if first_left is not None:
                first_left = max(0, first_left - results[position].measured)
        if first_pass is not None and (first_budget < task_budget or waiting):
            # Searches that ended before their budget (converged, failing) are over.
            later_shares = {
                position: first_pass.share(position, results[position])
                for position in granted
                if results[position].measured >= granted[position]
            }
            later_shares.update((position, shares[position]) for position in waiting)
            for position in sorted(later_shares, key=lambda position: -later_shares[position]):
                if self.spent:
                    break
                if position in granted:
                    later = search(position, self.grant(task_budget - results[position].measured))
                    results[position] = first_pass.join(results[position], later)
                else:
                    later = results[position] = search(position, self.grant(task_budget))
                self.spend(later.measured)
        for position in waiting:
            if position not in results:
                results[position] = not_reached(position)
        return [results[position] for position in range(len(shares))]


def check_first_pass(first_pass_trials, max_trials_global: Optional[int]) -> None:
    """Refuse a ``first_pass_trials`` that is not a count, or one without a shared budget.

    Raises
    ------
    ValueError
        For a value that is not an integer of 0 or more, or a positive value
        without ``max_trials_global`` (without a shared budget, every task has
        its own and a first pass changes nothing).
    """
    if first_pass_trials is None:
        return
    if not is_count(first_pass_trials, minimum=0):
        raise ValueError(
            "first_pass_trials must be a number of trials per task (0 for a single pass), "
            f"got {first_pass_trials!r}"
        )
    if first_pass_trials and max_trials_global is None:
        raise ValueError(
            "first_pass_trials needs max_trials_global: without a shared budget every task "
            "has its own budget and a first pass changes nothing"
        )


def first_pass_budget(
    first_pass_trials: Optional[int], max_trials_global: Optional[int], tasks: int
) -> Optional[int]:
    """The measurements of each task in the first pass; None for a single pass.

    Parameters
    ----------
    first_pass_trials : Optional[int]
        The caller's choice (checked by :func:`check_first_pass`): 0 for a
        single pass, None for the default.
    max_trials_global : Optional[int]
        The shared budget; None for none, hence a single pass.
    tasks : int
        The number of tasks sharing it.

    Returns
    -------
    budget : Optional[int]
        ``first_pass_trials``, or by default half an even split of the shared
        budget (at least one measurement).
    """
    if max_trials_global is None or first_pass_trials == 0:
        return None
    if first_pass_trials is not None:
        return first_pass_trials
    return max(1, max_trials_global // (2 * max(1, tasks)))
