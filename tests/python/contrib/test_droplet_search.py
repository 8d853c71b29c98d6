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
"""Algorithm tests of the Droplet Search engine, with deterministic costs."""
import itertools
import random

import pytest
import scipy.stats

from tvm.contrib.droplet_search import (
    DropletSearch,
    is_faster,
    regularized_incomplete_beta,
    welch_pvalue,
)


def bowl(optimum, repeats=3):
    """A convex cost with a unique minimum at ``optimum`` and tiny, fixed spread."""

    def cost(point):
        base = 1.0 + sum((x - o) ** 2 for x, o in zip(point, optimum))
        return [base * (1.0 + 1e-3 * k) for k in range(repeats)]

    return cost


def run(search, cost, batch_size):
    """Drive ``search`` to completion; returns every batch it proposed."""
    batches = []
    while not search.finished:
        batch = search.ask(batch_size)
        assert batch, "an unfinished search with nothing outstanding must propose"
        batches.append(batch)
        for point in batch:
            search.tell(point, cost(point))
    return batches


@pytest.mark.parametrize("batch_size", [1, 3, 8, 64])
def test_converges_to_bowl_optimum(batch_size):
    optimum = (5, 2, 7)
    search = DropletSearch((10, 10, 10))
    batches = run(search, bowl(optimum), batch_size)
    assert search.best[0] == optimum
    assert search.stop_reason.startswith("the neighbourhood")
    measured = [point for batch in batches for point in batch]
    assert len(measured) == len(set(measured)), "a point was proposed twice"
    assert len(measured) < 10 * 10 * 10 / 4, "droplet search should not enumerate the space"


def test_first_batch_holds_start_and_radius_one_neighbours():
    search = DropletSearch((4, 4), start=(1, 2))
    assert search.ask(5) == [(1, 2), (2, 2), (0, 2), (1, 3), (1, 1)]


def test_neighbourhood_is_linear_in_dimensions_and_drops_out_of_box_steps():
    search = DropletSearch((3,) * 12)
    assert len(search.neighbourhood((1,) * 12, 1)) == 24
    corner = search.neighbourhood((0,) * 12, 1)
    assert len(corner) == 12 and all(max(point) == 1 for point in corner)
    assert search.neighbourhood((0,) * 12, 3) == []


def test_never_proposes_invalid_points():
    optimum = (6, 6)
    valid = lambda point: (point[0] + point[1]) % 3 != 1
    search = DropletSearch((9, 9), is_valid=valid)
    batches = run(search, bowl(optimum), 4)
    proposed = [point for batch in batches for point in batch]
    assert all(valid(point) for point in proposed)
    assert search.best[0] == optimum


def test_invalid_start_is_rejected():
    with pytest.raises(ValueError, match="not a valid point"):
        DropletSearch((4, 4), is_valid=lambda point: point != (0, 0))
    with pytest.raises(ValueError, match="out of range on dimension 1"):
        DropletSearch((4, 4), start=(0, 4))
    with pytest.raises(ValueError, match="has 1 coordinates"):
        DropletSearch((4, 4), start=(0,))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"budget": 0}, "budget"),
        ({"pvalue": 0.0}, "pvalue"),
        ({"failure_limit": 0}, "failure_limit"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DropletSearch((2, 2), **kwargs)
    with pytest.raises(ValueError, match="at least one value"):
        DropletSearch((2, 0))


def test_failures_never_become_best_and_results_match_by_identity():
    optimum = (3, 3)
    cost = bowl(optimum)
    search = DropletSearch((8, 8))
    poisoned = {(1, 0), (0, 1)}
    while not search.finished:
        batch = search.ask(4)
        # Tell in reverse order, failing the points that would otherwise be best.
        for point in reversed(batch):
            search.tell(point, None if point in poisoned else cost(point))
    assert search.best[0] == optimum
    assert all(search.measured[point] == () for point in poisoned if point in search.measured)


def test_each_point_is_told_once():
    search = DropletSearch((4,))
    (point,) = search.ask(1)
    search.tell(point, [1.0])
    with pytest.raises(KeyError):
        search.tell(point, [1.0])
    with pytest.raises(KeyError):
        search.tell((3,), [1.0])


def test_all_invalid_neighbourhood_stops():
    search = DropletSearch((50, 50))
    batches = run(search, lambda point: None, 16)
    assert "all failed" in search.stop_reason
    assert search.best is None
    assert sum(len(batch) for batch in batches) <= 16 + 4


def test_budget_is_respected():
    search = DropletSearch((100, 100), budget=7)
    batches = run(search, bowl((90, 90)), 3)
    assert [len(batch) for batch in batches] == [3, 3, 1]
    assert "budget" in search.stop_reason


def test_space_without_dimensions():
    search = DropletSearch(())
    assert search.ask(8) == [()]
    search.tell((), [2.0])
    assert search.finished and search.best == ((), (2.0,))


def test_observe_resumes_without_remeasuring():
    optimum = (4, 1, 3)
    cost = bowl(optimum)
    first = DropletSearch((6, 6, 6))
    history = {}
    for _ in range(3):
        for point in first.ask(5):
            history[point] = cost(point)
            first.tell(point, history[point])
    resumed = DropletSearch((6, 6, 6))
    for point, costs in history.items():
        resumed.observe(point, costs)
    assert resumed.centre == min(history, key=lambda point: history[point][0])
    batches = run(resumed, cost, 5)
    again = [point for batch in batches for point in batch]
    assert not set(again) & set(history)
    assert resumed.best[0] == optimum


def test_noisy_candidates_need_significance():
    incumbent = [1.00, 1.20, 0.90, 1.10]
    slightly_lower = [0.98, 1.18, 0.88, 1.08]
    clearly_lower = [0.50, 0.51, 0.49, 0.50]
    assert not is_faster(slightly_lower, incumbent, 0.05)
    assert is_faster(clearly_lower, incumbent, 0.05)
    assert is_faster([0.9], [1.0], 0.05), "single costs fall back to comparing means"
    assert not is_faster([1.0], [1.0], 0.05)
    assert not is_faster([], [1.0], 0.05) and is_faster([5.0], [], 0.05)


def test_welch_matches_scipy():
    rng = random.Random(7)
    for _ in range(300):
        sample_a = [rng.gauss(1.0, rng.choice([0.01, 0.1, 0.5])) for _ in range(rng.randint(2, 9))]
        sample_b = [rng.gauss(1.05, rng.choice([0.01, 0.1, 0.5])) for _ in range(rng.randint(2, 9))]
        expected = scipy.stats.ttest_ind(
            sample_a, sample_b, equal_var=False, alternative="less"
        ).pvalue
        assert welch_pvalue(sample_a, sample_b) == pytest.approx(expected, abs=1e-9)


def test_incomplete_beta_matches_scipy():
    for alpha, beta, x in itertools.product([0.5, 1.0, 3.7, 40.0], [0.5, 2.0, 11.0], [0.01, 0.3, 0.9]):
        expected = scipy.special.betainc(alpha, beta, x)
        assert regularized_incomplete_beta(alpha, beta, x) == pytest.approx(expected, abs=1e-10)


def test_rugged_cost_reaches_a_local_minimum():
    rng = random.Random(3)
    table = {point: [rng.uniform(1, 10)] * 2 for point in itertools.product(range(7), range(7))}
    search = DropletSearch((7, 7))
    run(search, table.__getitem__, 6)
    best_point, best_costs = search.best
    for radius in range(1, 7):
        for neighbour in search.neighbourhood(best_point, radius):
            assert table[neighbour][0] >= best_costs[0]
