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
"""Algorithm tests of the Droplet Search engine on deterministic cost landscapes."""
import itertools
import logging
import random
from types import SimpleNamespace

import numpy as np
import pytest

import tvm.testing
from tvm.contrib.droplet_search import BatchDriver, DropletResult, DropletSearch, error_summary
from tvm.contrib.droplet_search.budget import (
    FirstPass,
    SharedBudget,
    check_first_pass,
    check_task_weights,
    first_pass_budget,
    share_order,
)
from tvm.contrib.droplet_search.journal import check_json_lines
from tvm.contrib.droplet_search.outputs import output_difference, random_array
from tvm.contrib.droplet_search.transfer import add_taken_over, take_over, transfer_limit


def bowl(optimum, repeats=3):
    """A convex cost with a unique minimum at ``optimum`` and tiny, fixed spread."""

    def cost(point):
        base = 1.0 + sum((x - o) ** 2 for x, o in zip(point, optimum))
        return [base * (1.0 + 1e-3 * k) for k in range(repeats)]

    return cost


def diagonal_valley(point):
    """A valley along ``x == y`` sloping towards (20, 20): every axis step climbs out of it."""
    x, y = point
    base = 1.0 + 10.0 * abs(x - y) + 0.1 * (20 - x)
    return [base * (1.0 + 1e-3 * k) for k in range(3)]


def run(search, cost, batch_size):
    """Drive ``search`` to completion; returns every point it proposed, in order."""
    proposed = []
    while not search.finished:
        batch = search.ask(batch_size)
        assert batch, "an unfinished search with nothing outstanding must propose"
        proposed.extend(batch)
        for point in batch:
            search.tell(point, cost(point))
    return proposed


@pytest.mark.parametrize("batch_size", [1, 3, 8, 64])
@pytest.mark.parametrize("diagonals", [False, True])
def test_converges_to_bowl_optimum(batch_size, diagonals):
    """Converges to bowl optimum."""
    optimum = (5, 2, 7)
    search = DropletSearch((10, 10, 10), diagonals=diagonals)
    proposed = run(search, bowl(optimum), batch_size)
    assert search.best[0] == optimum
    assert search.stop_reason.startswith("the neighbourhood")
    assert search.converged_after == len(proposed) == search.measurements
    assert len(proposed) == len(set(proposed)), "a point was proposed twice"
    assert len(proposed) < 10 * 10 * 10 / 4, "droplet search should not enumerate the space"


def test_first_batch_is_start_and_neighbours():
    """First batch holds start and radius one neighbours."""
    search = DropletSearch((4, 4), start=(1, 2))
    assert search.ask(5) == [(1, 2), (2, 2), (0, 2), (1, 3), (1, 1)]


def test_diagonal_valley_needs_diagonal_moves():
    axis_only = DropletSearch((21, 21), diagonals=False)
    run(axis_only, diagonal_valley, 2)
    assert axis_only.best[0] == (0, 0), "every axis step leaves the valley"
    search = DropletSearch((21, 21))
    run(search, diagonal_valley, 2)
    assert search.best[0] == (20, 20)


def test_max_radius_polishes_the_closest_points():
    """With ``max_radius=1`` every step is of one index: the plateau the growing steps
    cross stops the search at its start, after the 8 points around it."""

    def plateau(point):
        x, y = point
        base = 1.0 if max(x, y) < 5 else 0.5 + 0.01 * ((x - 9) ** 2 + (y - 9) ** 2)
        return [base, base * 1.001, base * 1.002]

    search = DropletSearch((12, 12), (2, 2), max_radius=1)
    proposed = run(search, plateau, 4)
    assert search.best[0] == (2, 2) and search.converged_after == len(proposed)
    assert sorted(proposed[1:]) == sorted(
        (2 + dx, 2 + dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if (dx, dy) != (0, 0)
    )
    descent = DropletSearch((12, 12), (6, 6), max_radius=1)
    run(descent, bowl((9, 3)), 4)
    assert descent.best[0] == (9, 3), "a descent of one-index steps still reaches a bowl's optimum"


def test_plateau_is_crossed_by_growing_steps():
    """Plateau around the start is crossed by growing steps."""

    def plateau(point):
        x, y = point
        base = 1.0 if max(x, y) < 5 else 0.5 + 0.01 * ((x - 9) ** 2 + (y - 9) ** 2)
        return [base, base * 1.001, base * 1.002]

    search = DropletSearch((12, 12))
    run(search, plateau, 4)
    assert search.best[0] == (9, 9)


def test_never_proposes_invalid_points():
    optimum = (6, 6)
    valid = lambda point: (point[0] + point[1]) % 3 != 1
    search = DropletSearch((9, 9), is_valid=valid)
    proposed = run(search, bowl(optimum), 4)
    assert all(valid(point) for point in proposed)
    assert search.best[0] == optimum


def test_coupled_factors_are_exchanged():
    """A factor moved from one tile level to another: two coordinates, one step."""

    # The exponents of 2 at two inner levels of a split of 2^4: their sum is at most 4.
    # The more of the split at the outer level (a lower sum), the slower; with the
    # split used up, the more at level 0, the faster.  From (1, 3) every valid axis
    # move is slower and every diagonal of two valid axis moves too.
    def split_cost(point):
        first, second = point
        base = 1.0 + 10.0 * (4 - first - second) + (4 - first)
        return [base * (1.0 + 1e-3 * k) for k in range(3)]

    valid = lambda point: point[0] + point[1] <= 4
    search = DropletSearch((5, 5), start=(1, 3), is_valid=valid)
    proposed = run(search, split_cost, 4)
    assert all(valid(point) for point in proposed)
    assert search.best[0] == (4, 0)
    assert len(proposed) == len(set(proposed))


def two_basins(point):
    """A shallow basin at (2, 2, 2, 2), next to the origin, and a deep one at (15, 15, 15, 15)."""
    near = 3.0 + 0.1 * sum((x - 2) ** 2 for x in point)
    far = 1.0 + 0.1 * sum((x - 15) ** 2 for x in point)
    return [min(near, far) * (1.0 + 1e-3 * k) for k in range(3)]


@pytest.mark.parametrize("batch_size", [1, 4])
def test_sample_leaves_the_basin_next_to_the_start(batch_size):
    """A sample in the first round lets the search leave the start's basin."""
    alone = DropletSearch((20,) * 4)
    run(alone, two_basins, batch_size)
    assert alone.best[0] == (2,) * 4, "the landscape's trap: the start's basin holds the search"

    sample = [(3, 17, 4, 10), (14, 16, 15, 13)]
    sampled = DropletSearch((20,) * 4, sample=sample)
    proposed = run(sampled, two_basins, batch_size)
    assert proposed[:3] == [(0,) * 4] + sample
    assert sampled.best[0] == (15,) * 4
    assert len(proposed) == len(set(proposed))


def test_sample_is_one_round_at_any_batch_size():
    """The start and its sample are decided together, even asked for one at a time."""
    search = DropletSearch((40, 40), sample=[(3, 17), (14, 16), (0, 0)])
    for expected in [(0, 0), (3, 17)]:
        assert search.ask(1) == [expected]
        search.tell(expected, bowl((15, 15))(expected))
        assert search.centre == (0, 0) and search.moves == 0
    assert not search.finished
    assert search.ask(1) == [(14, 16)], "the start in the sample is not proposed twice"
    search.tell((14, 16), bowl((15, 15))((14, 16)))
    assert search.centre == (14, 16)
    assert (28, 32) not in search.ask(20), "no pattern move through a sampled point"

    failing = DropletSearch((9, 9), sample=[(8, 8), (7, 7), (6, 6)], failure_limit=2)
    for point in failing.ask(4):
        failing.tell(point, None if point != (0, 0) else [1.0])
    assert not failing.finished, "a failed sample is not an all-invalid neighbourhood"


def test_observed_records_replace_the_sample():
    """A resumed search starts from its records: the sample not proposed yet is dropped."""
    search = DropletSearch((20, 20), sample=[(3, 17), (14, 16)])
    search.observe((1, 1), None)
    assert search.ask(1) == [(0, 0)], "a failed record leaves the sample"
    search.tell((0, 0), bowl((15, 15))((0, 0)))
    search.observe((5, 5), bowl((15, 15))((5, 5)))
    assert search.centre == (5, 5)
    batch = search.ask(4)
    assert not {(3, 17), (14, 16)} & set(batch)
    failed = DropletSearch((20, 20), sample=[(3, 17)])
    failed.observe((0, 0), None)
    failed.observe((3, 17), None)
    assert len(failed.ask(4)) == 4, "a sample observed as failed leaves the walk to go on"
    with pytest.raises(ValueError, match="sample point .* not a valid point"):
        DropletSearch((4, 4), sample=[(1, 1)], is_valid=lambda point: point != (1, 1))
    with pytest.raises(ValueError, match="sample point .* out of range"):
        DropletSearch((4, 4), sample=[(1, 4)])


def test_sample_added_after_observed_records():
    """A sample added after a database's records: measured with the re-measured centre."""
    cost = bowl((15, 15))
    search = DropletSearch((20, 20), (2, 2))
    search.observe((2, 2), cost((2, 2)), remeasure=True)
    search.observe((2, 1), cost((2, 1)))
    added = search.add_sample([(14, 16), (2, 1), (2, 2), (14, 16), (9, 9)])
    assert added == [(14, 16), (9, 9)], "measured, centre and repeated points are passed over"
    batch = search.ask(20)
    assert batch == [(2, 2), (14, 16), (9, 9)], "one round: the centre again, then the sample"
    for point in batch:
        search.tell(point, cost(point))
    assert search.centre == (14, 16) and search.moves == 1
    batch = search.ask(20)
    assert (26, 30) not in batch, "no pattern move through a sampled point"
    with pytest.raises(RuntimeError, match="between rounds"):
        search.add_sample([(0, 0)])
    for point in batch:
        search.tell(point, cost(point))
    proposed = batch + run(search, cost, 4)
    assert search.best[0] == (15, 15) and len(proposed) == len(set(proposed))
    with pytest.raises(ValueError, match="sample point .* not a valid point"):
        DropletSearch((4, 4), is_valid=lambda point: point != (1, 1)).add_sample([(1, 1)])


def test_invalid_start_and_seeds_are_rejected():
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
        ({"budget": True}, "budget"),
        ({"pvalue": 0.0}, "pvalue"),
        ({"pvalue": 1.5}, "pvalue"),
        ({"failure_limit": 0}, "failure_limit"),
        ({"max_radius": 0}, "max_radius"),
        ({"max_radius": 1.5}, "max_radius"),
    ],
)
def test_bad_parameters(kwargs, message):
    """Bad parameters."""
    with pytest.raises(ValueError, match=message):
        DropletSearch((2, 2), **kwargs)
    with pytest.raises(ValueError, match="at least one value"):
        DropletSearch((2, 0))


@pytest.mark.parametrize("count", [0, -1, 2.5, True])
def test_ask_needs_a_positive_integer(count):
    with pytest.raises(ValueError, match="positive number"):
        DropletSearch((3, 3)).ask(count)
    assert len(DropletSearch((3, 3)).ask(np.int64(3))) == 3, "any integer type will do"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_costs_must_be_finite_and_non_negative(bad):
    search = DropletSearch((3, 3))
    (point,) = search.ask(1)
    with pytest.raises(ValueError, match="finite and non-negative"):
        search.tell(point, [1.0, bad])
    search.tell(point, [1.0])  # still outstanding: the bad report changed nothing
    with pytest.raises(ValueError, match="finite and non-negative"):
        search.observe((1, 1), [bad])


def test_failures_never_become_best():
    """Failures never become best."""
    optimum = (3, 3)
    cost = bowl(optimum)
    search = DropletSearch((8, 8))
    poisoned = {(1, 0), (0, 1), (2, 2)}
    while not search.finished:
        batch = search.ask(4)
        for point in reversed(batch):
            search.tell(point, None if point in poisoned else cost(point))
    assert search.best[0] == optimum
    assert all(search.costs(point) == () for point in poisoned if search.costs(point) is not None)


def test_each_point_is_told_once():
    search = DropletSearch((4,))
    (point,) = search.ask(1)
    search.tell(point, [1.0])
    with pytest.raises(KeyError):
        search.tell(point, [1.0])
    with pytest.raises(KeyError):
        search.tell((3,), [1.0])


def test_all_invalid_neighbourhood_stops_at_the_limit():
    search = DropletSearch((50, 50), failure_limit=5)
    proposed = run(search, lambda point: None, 3)
    assert "all failed" in search.stop_reason
    assert search.best is None
    assert len(proposed) == 6, "the limit is checked per measurement, the round is completed"


def test_uncounted_tells_spend_no_budget():
    """Uncounted tells spend neither budget nor failure limit."""
    search = DropletSearch((20, 20), budget=5, failure_limit=2)
    told = 0
    while not search.finished:
        for point in search.ask(3):
            told += 1
            search.tell(point, None, counted=point[0] % 2 == 0)
    assert search.measurements <= 5
    assert told > search.measurements


def test_budget_is_respected():
    search = DropletSearch((100, 100), budget=7)
    batches = []
    while not search.finished:
        batch = search.ask(3)
        batches.append(len(batch))
        for point in batch:
            search.tell(point, bowl((90, 90))(point))
    assert sum(batches) == 7 and max(batches) == 3
    assert "budget" in search.stop_reason


def test_space_without_dimensions():
    search = DropletSearch(())
    assert search.ask(8) == [()]
    search.tell((), [2.0])
    assert search.finished and search.best == ((), (2.0,))


def test_observe_resumes_without_remeasuring():
    """Observe resumes without remeasuring."""
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
    again = run(resumed, cost, 5)
    assert not set(again) & set(history)
    assert resumed.best[0] == optimum


def test_observed_centre_is_measured_again():
    """An observed centre can be measured again alongside its challengers."""
    search = DropletSearch((5, 5))
    search.observe((2, 2), [1.0, 1.0, 1.0], remeasure=True)  # measured under lighter load
    batch = search.ask(5)
    assert batch[0] == (2, 2) and len(set(batch)) == 5
    for point in batch:
        # Everything is 30% slower now; (3, 2) is 10% faster than the centre today.
        base = 1.17 if point == (3, 2) else 1.3
        search.tell(point, [base, base * 1.01, base * 0.99])
    assert search.centre == (3, 2), "compared with today's costs of the centre"
    assert search.costs((2, 2))[0] == 1.3


def test_observed_best_record_stays_the_centre():
    """A point observed twice keeps its best record: the database's best is the centre.

    (1, 1) was measured twice, once slow; (1, 2) once, between the two.  Pooled,
    (1, 1) would lose the centre to (1, 2) on costs from another run.
    """
    search = DropletSearch((4, 4), start=(1, 1))
    search.observe((1, 1), [1.0, 1.0], remeasure=True)
    search.observe((1, 2), [1.2, 1.2], remeasure=True)
    search.observe((1, 1), [2.0, 2.0], remeasure=True)
    search.observe((2, 1), None, remeasure=True)
    search.observe((2, 1), [1.5, 1.5], remeasure=True)
    assert search.centre == (1, 1) and search.costs((1, 1)) == (1.0, 1.0)
    assert search.costs((2, 1)) == (1.5, 1.5), "a success outranks a failure"
    batch = search.ask(3)
    assert batch[0] == (1, 1), "the centre's costs come from another run: measured again"
    assert not {(1, 2), (2, 1)} & set(batch)


def test_noisy_flat_landscape_moves_at_about_pvalue():
    """On a flat landscape, a fresh centre is left for a neighbour at a rate of about pvalue."""
    rng = np.random.default_rng(11)
    moves = 0
    for _ in range(400):
        search = DropletSearch((15, 15), pvalue=0.1, start=(7, 7))
        for point in search.ask(2):
            search.tell(point, list(1.0 + 0.05 * rng.standard_normal(5)))
        moves += search.moves
    assert 0.055 < moves / 400 < 0.145, f"false moves {moves / 400:.3f} at pvalue 0.1"


def test_single_costs_are_compared_by_mean(caplog):
    """A runner that measures once (the default of Ansor's and MetaSchedule's runners)
    leaves no variance to test: a lower mean is accepted, and the log says so once."""
    caplog.set_level(logging.WARNING, logger="droplet_search")
    search = DropletSearch((9,))
    proposed = run(search, lambda point: [1.0 + abs(point[0] - 6) * 0.001], 2)
    assert search.best[0] == (6,), "a 0.1% lower single cost is enough"
    warnings = [r.getMessage() for r in caplog.records if "single value" in r.getMessage()]
    assert len(warnings) == 1 and "(runner repeat >= 2)" in warnings[0]
    assert len(proposed) == len(set(proposed))
    # With repeats, the same differences under 5% noise do not pass the test.
    noisy = DropletSearch((9,))
    rng = np.random.default_rng(0)
    run(
        noisy,
        lambda point: list(1.0 + abs(point[0] - 6) * 0.001 + 0.05 * rng.standard_normal(3)),
        2,
    )
    assert noisy.best[0] != (6,) or noisy.moves < search.moves


@pytest.mark.parametrize("pairs_per_radius, pairs", [(None, 2 * 20), (20, 20), (0, 0)])
def test_neighbourhood_of_many_knobs_is_linear(pairs_per_radius, pairs):
    """After a round without a move, the best-ranked pairs of radius 1 (190 are possible
    among 20 axes), as many as the quota (2 x dims by default), then the axis moves."""
    search = DropletSearch((8,) * 20, pairs_per_radius=pairs_per_radius)
    first = search.ask(21)
    assert first[1:] == [(0,) * axis + (1,) + (0,) * (19 - axis) for axis in range(20)]
    for point in first:
        search.tell(point, [1.0 + 0.01 * sum(point)] * 2)  # no move: every step costs more
    rest = search.ask(10_000)
    diagonal = [point for point in rest if sum(1 for x in point if x) == 2]
    assert len(diagonal) == pairs, "the pairs of a radius are capped at the quota"
    assert all(max(point) == 1 for point in diagonal), "pairs of the radius measured"
    assert len(rest) - len(diagonal) == 20 * 6, "the axis moves of radius 2 to 7"


def test_pairs_per_radius_must_be_a_count():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="pairs_per_radius must be a number of moves"):
            DropletSearch((3, 3), pairs_per_radius=bad)


def test_repaired_moves_stay_linear_in_many_knobs():
    # A sum that may not grow: every step up is invalid, and each of the 20 is
    # repaired by a step down any of 10 other axes: about 190 repaired moves.
    start = (1,) * 10 + (0,) * 10
    valid = lambda point: sum(point) <= 10
    search = DropletSearch((8,) * 20, start=start, is_valid=valid)
    first = search.ask(10_000)
    repaired = [point for point in first if sum(1 for a, b in zip(start, point) if a != b) == 2]
    assert 0 < len(repaired) <= 2 * 20, "the repaired moves of a radius are capped at 2 x dims"


def test_rugged_cost_reaches_an_axis_local_minimum():
    rng = random.Random(3)
    table = {point: [rng.uniform(1, 10)] * 2 for point in itertools.product(range(7), range(7))}
    search = DropletSearch((7, 7))
    run(search, table.__getitem__, 6)
    (x, y), costs = search.best
    for other in range(7):
        assert table[(other, y)][0] >= costs[0] and table[(x, other)][0] >= costs[0]


def test_contenders_could_become_best_or_centre():
    """Contenders are those that could become best or centre."""
    search = DropletSearch((5, 5))
    batch = search.ask(2)
    search.tell(batch[0], [1.0, 1.0, 1.01])
    search.tell(batch[1], [2.0, 2.0, 2.01])
    assert search.contends([0.5, 0.5, 0.51])
    assert not search.contends([1.5, 1.5, 1.51])
    assert not search.contends(None)


# ----------------------------------------------------- the batch driver, outputs and errors


def test_driver_measures_each_program_once():
    """Driver measures each program once."""
    # Points (x, y) and (x, y') with y, y' >= 3 are the same program.
    identify = lambda point: (point[0], min(point[1], 3))
    cost = lambda point: bowl((4, 1))(identify(point))
    search = DropletSearch((8, 8))
    driver = BatchDriver(search, batch_size=4, identify=identify)
    measured = []

    def evaluate(points, _contends):
        measured.extend(identify(point) for point in points)
        return [cost(point) for point in points]

    driver.run(evaluate)
    assert len(measured) == len(set(measured)), "a program was measured twice"
    assert driver.duplicates > 0 and search.measurements == len(measured)
    assert identify(search.best[0]) == (4, 1)


def test_driver_reuses_observed_programs():
    """Driver reuses observed programs and remeasures a stale centre."""
    cost = bowl((2, 2))
    search = DropletSearch((6, 6))
    driver = BatchDriver(search, batch_size=3)
    driver.observe((1, 1), cost((1, 1)), remeasure=True)
    driver.observe((1, 0), cost((1, 0)))
    batches = []

    def evaluate(points, _contends):
        batches.append(list(points))
        return [cost(point) for point in points]

    driver.run(evaluate)
    assert batches[0][0] == (1, 1), "the stale centre is measured again first"
    assert all((1, 0) not in batch for batch in batches)
    assert search.best[0] == (2, 2)


def test_driver_tells_a_recorded_programs_best():
    """A point of a recorded program is told its best record, never measured."""
    identify = lambda point: (point[0], point[1] // 3)  # (x, 0), (x, 1), (x, 2): one program
    search = DropletSearch((4, 4), (1, 1))
    driver = BatchDriver(search, batch_size=8, identify=identify)
    driver.observe((0, 0), [3.0, 3.1, 3.2])
    driver.observe((0, 2), None)  # the same program failed once: its success stays known
    measured = []

    def evaluate(points, _contends):
        measured.extend(points)
        return [[10.0, 10.1, 10.2] for _ in points]

    driver.run(evaluate)
    assert search.costs((0, 1)) == (3.0, 3.1, 3.2) and (0, 1) not in measured
    assert driver.duplicates >= 1 and driver.measured == len(measured) == search.measurements


def test_driver_stale_centres_program_waits():
    """Points of a stale centre's program are told its new costs, not its record's."""
    identify = lambda point: (point[0], point[1] // 2)  # (x, 0) and (x, 1): one program
    search = DropletSearch((3, 3), (1, 1))
    driver = BatchDriver(search, batch_size=8, identify=identify)
    driver.observe((1, 1), [5.0, 5.1, 5.2], remeasure=True)
    measured = []

    def evaluate(points, _contends):
        measured.extend(points)
        return [[6.0, 6.1, 6.2] if point == (1, 1) else [10.0, 10.1, 10.2] for point in points]

    driver.run(evaluate)
    assert measured[0] == (1, 1) and (1, 0) not in measured
    assert search.costs((1, 0)) == (6.0, 6.1, 6.2)


def test_driver_checks_the_number_of_results():
    driver = BatchDriver(DropletSearch((4, 4)), batch_size=2)
    with pytest.raises(RuntimeError, match="returned 1 results for 2 points"):
        driver.run(lambda points, contends: [[1.0]])
    with pytest.raises(ValueError, match="batch_size"):
        BatchDriver(DropletSearch((4, 4)), batch_size=0)


def test_output_difference():
    """Output difference."""
    reference = [np.arange(6, dtype="float32").reshape(2, 3)]
    assert output_difference([reference[0] + 1e-6], reference) is None
    wrong = reference[0].copy()
    wrong[1, 2] = -1.0
    assert "1 of 6 values of output 0 differ (at (1, 2): -1.0, expected 5.0)" in (
        output_difference([wrong], reference)
    )
    assert "float32[3, 2], expected float32[2, 3]" in output_difference([wrong.T], reference)
    assert "float64[2, 3], expected float32[2, 3]" in output_difference(
        [reference[0].astype("float64")], reference
    )
    integers = [np.arange(4, dtype="int32")]
    assert output_difference([integers[0] + 1], integers, 0.5) is not None
    assert "2 outputs, expected 1" in output_difference(reference * 2, reference)
    # The absolute tolerance scales with the reference's largest magnitude.
    large = [np.array([1e6, 1.0], dtype="float32")]
    assert output_difference([large[0] + np.array([0, 100], dtype="float32")], large) is None
    assert output_difference([large[0] + np.array([0, 2000], dtype="float32")], large) is not None


def test_output_difference_with_nan_and_infinity():
    """A NaN or infinity in the reference must be met, and does not set the tolerance."""
    expected = [np.array([np.nan, 1.0, 2.0, np.inf], dtype="float32")]
    assert output_difference([expected[0].copy()], expected) is None
    wrong = np.array([np.nan, -5.0, 77.0, np.inf], dtype="float32")
    assert "2 of 4 values of output 0 differ (at (2,): 77.0, expected 2.0)" in (
        output_difference([wrong], expected)
    )
    lost = np.array([np.nan, 1.0, 2.0, 3.0], dtype="float32")
    assert "(at (3,): 3.0, expected inf)" in output_difference([lost], expected)
    # The worst place is a differing value, not a larger difference within tolerance.
    near = [np.array([100.0, 0.0], dtype="float32")]
    within = np.array([100.05, 0.5], dtype="float32")
    assert "(at (1,): 0.5, expected 0.0)" in output_difference([within], near)


def test_random_inputs_are_reproducible():
    first = random_array((3, 4), "float32", np.random.default_rng(0))
    assert first.dtype == np.float32 and first.min() >= -1 and first.max() < 1
    assert np.array_equal(first, random_array((3, 4), "float32", np.random.default_rng(0)))
    assert random_array((5,), "int8", np.random.default_rng(0)).dtype == np.int8
    assert random_array((5,), "bool", np.random.default_rng(0)).dtype == np.bool_


def test_json_lines_check_names_the_damaged_line(tmp_path):
    """Blank, broken and unterminated lines are named; each format's comments are skipped."""
    log = tmp_path / "log.json"
    assert check_json_lines(str(log), "the log") == 0, "a missing file holds no line"
    log.write_bytes(b'# comment\n{"a": 1}\n [1]\n')
    assert check_json_lines(str(log), "the log", comment_prefixes=(b"#", b" ")) == 1
    assert check_json_lines(str(log), "the log", comment_prefixes=(b"#",)) == 2
    with pytest.raises(ValueError, match="line 1 of the log .* is not a JSON record"):
        check_json_lines(str(log), "the log")  # a format without comments
    for content, message in [
        (b'{"a": 1}\n\n{"b": 2}\n', "line 2 of the log .* is not a JSON record but a blank line"),
        (b'{"a": 1}\n{"b": \n{"c": 3}\n', r"line 2 of the log .* is not a JSON record; remove"),
        (b'{"a": 1}\n{"b": ', r"its last record \(line 2\) was cut short"),
        (b'{"a": 1}\n{"b": 2}', r"its last record \(line 2\) is complete but has no newline"),
    ]:
        log.write_bytes(content)
        with pytest.raises(ValueError, match=message):
            check_json_lines(str(log), "the log")
        assert log.read_bytes() == content


def test_error_summary_names_what_failed():
    """The line naming the error, not a backtrace frame; the last line otherwise."""
    traceback = (
        "Traceback (most recent call last):\n  1: foo\n  File x.cc\n"
        "TVMError: Check failed: a == b\n"
    )
    assert error_summary(RuntimeError(traceback)) == "TVMError: Check failed: a == b"
    assert error_summary(RuntimeError("first\nlast")) == "last"
    assert error_summary(RuntimeError("")) == "RuntimeError"
    # A backtrace frame naming an error class is not the message.
    frames = (
        "Traceback (most recent call last):\n"
        "  12: tvm::relay::ErrorReporter::RenderErrors(tvm::IRModule const&, bool)\n"
        "  11: tvm::codegen::Build(tvm::IRModule, tvm::Target)\n"
        "InternalError: the loop bound is not an integer\n"
    )
    assert error_summary(RuntimeError(frames)) == "InternalError: the loop bound is not an integer"


def test_shared_budget_grants_largest_shares_first():
    """Tasks are searched by descending share; each gets its own budget or what is left."""
    assert share_order([2.0, 5.0, 2.0, 9.0]) == [3, 1, 0, 2]
    shared = SharedBudget(10)
    grants = []
    for measured_of_grant in (lambda grant: grant, lambda grant: grant - 3, lambda grant: grant):
        grant = shared.grant(4)
        grants.append(grant)
        shared.spend(measured_of_grant(grant))
    # 4 spent, then a search that converged after 1 of its 4, then 4 of the 5 left.
    assert grants == [4, 4, 4] and shared.remaining == 1 and not shared.spent
    assert shared.grant(4) == 1
    shared.spend(1)
    assert shared.spent and shared.grant(4) == 0
    unbounded = SharedBudget(None)
    unbounded.spend(1000)
    assert unbounded.grant(4) == 4 and not unbounded.spent


def test_tasks_are_searched_by_share_in_budget():
    """The search callback gets each task's grant by descending share; the rest are not reached."""
    calls = []

    def search(position, budget):
        calls.append((position, budget))
        # The task of share 5 converges after 1 of its grant.
        return SimpleNamespace(task=position, measured=1 if position == 1 else budget)

    def not_reached(position):
        calls.append((position, "not reached"))
        return SimpleNamespace(task=position, measured=0)

    results = SharedBudget(10).search_in_share_order([2.0, 5.0, 2.0, 9.0], 4, search, not_reached)
    assert calls == [(3, 4), (1, 4), (0, 4), (2, 1)]
    assert [result.task for result in results] == [0, 1, 2, 3]
    calls.clear()
    results = SharedBudget(5).search_in_share_order([2.0, 5.0, 2.0, 9.0], 4, search, not_reached)
    assert calls == [(3, 4), (1, 1), (0, "not reached"), (2, "not reached")]
    assert [result.measured for result in results] == [0, 1, 0, 4]
    calls.clear()
    SharedBudget(None).search_in_share_order([1.0, 3.0], 4, search, not_reached)
    assert calls == [(1, 4), (0, 4)]
    # Every task's turn is announced, searched or not.
    announced = []
    SharedBudget(5).search_in_share_order(
        [2.0, 5.0, 2.0, 9.0], 4, search, not_reached, announced.append
    )
    assert announced == [3, 1, 0, 2]


def test_first_pass_then_the_shares_it_measured():
    """A first pass of 2 over every task, then the rest by the shares after it; a search
    that ended before its first budget is not continued."""
    calls = []
    after = {0: 1.0, 1: 5.0, 2: 2.0, 3: 4.0}  # task 1 turns out the heaviest

    def search(position, budget):
        calls.append((position, budget))
        measured = 1 if position == 2 else budget  # task 2 converges after 1
        return DropletResult(str(position), "cpu", 10.0, after[position], measured, reused=1)

    def not_reached(position):
        calls.append((position, "not reached"))
        return DropletResult(str(position), "cpu", 10.0, 10.0, 0)

    first_pass = FirstPass(
        2, lambda position, result: result.after, lambda first, later: first.followed_by(later)
    )
    results = SharedBudget(14).search_in_share_order(
        [3.0, 1.0, 2.0, 4.0], 5, search, not_reached, first_pass=first_pass
    )
    # Pass 1 by the first shares (2 x 3 + 1 = 7 spent), then 7 left: task 1 (5.0) gets
    # its 3 more, task 3 (4.0) 3, task 0 (1.0) the last 1.
    assert calls == [(3, 2), (0, 2), (2, 2), (1, 2), (1, 3), (3, 3), (0, 1)]
    assert [result.measured for result in results] == [3, 5, 1, 5]
    assert results[1].before == 10.0 and results[1].reused == 1
    # Without a shared budget left, no second pass; a first pass as large as a task's
    # budget is a single pass.
    calls.clear()
    SharedBudget(7).search_in_share_order(
        [3.0, 1.0, 2.0, 4.0], 5, search, not_reached, None, first_pass
    )
    assert calls == [(3, 2), (0, 2), (2, 2), (1, 2)]
    calls.clear()
    SharedBudget(20).search_in_share_order(
        [1.0, 2.0], 2, search, not_reached, first_pass=first_pass
    )
    assert calls == [(1, 2), (0, 2)]
    with pytest.raises(ValueError, match="positive number of measurements per task"):
        FirstPass(0, lambda *_: 0.0, lambda first, later: later)


def test_first_pass_bounded_leaves_the_rest_waiting():
    """A first pass bounded in all: the tasks after its bound wait for the second pass,
    where they compete by their shares before any search."""
    calls = []
    after = {0: 1.0, 1: 5.0, 2: 2.0, 3: 4.0}

    def search(position, budget):
        calls.append((position, budget))
        return DropletResult(str(position), "cpu", 10.0, after[position], budget)

    def not_reached(position):
        calls.append((position, "not reached"))
        return DropletResult(str(position), "cpu", 10.0, 10.0, 0)

    first_pass = FirstPass(
        2,
        lambda position, result: result.after,
        lambda first, later: first.followed_by(later),
        max_trials=3,
    )
    results = SharedBudget(10).search_in_share_order(
        [3.0, 1.0, 2.0, 4.0], 5, search, not_reached, first_pass=first_pass
    )
    # Pass 1 (at most 3): task 3 gets 2, task 0 the last 1; tasks 2 and 1 wait.  Pass 2 by
    # share: task 3 (4.0 after its search) 3 more, task 2 (2.0, its share before any
    # search) a first search of up to 5 from the 4 left, task 0 (1.0), task 1 (1.0)
    # nothing: the budget is spent.
    assert calls == [(3, 2), (0, 1), (3, 3), (2, 4), (1, "not reached")]
    assert [result.measured for result in results] == [1, 0, 4, 5]
    with pytest.raises(ValueError, match="positive number of measurements in all"):
        FirstPass(2, lambda *_: 0.0, lambda first, later: later, max_trials=0)


def test_first_pass_budget_and_its_checks():
    """Half an even split by default, 0 for one pass, nothing without a shared budget."""
    assert first_pass_budget(None, 256, 8) == 16
    assert first_pass_budget(None, 3, 8) == 1
    assert first_pass_budget(0, 256, 8) is None
    assert first_pass_budget(5, 256, 8) == 5
    assert first_pass_budget(None, None, 8) is None
    check_first_pass(None, None)
    check_first_pass(0, None)
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(ValueError, match="first_pass_trials must be a number"):
            check_first_pass(bad, 10)
    with pytest.raises(ValueError, match="needs max_trials_global"):
        check_first_pass(4, None)


def test_results_of_two_searches_join():
    """A search continued from the best of another: its start, the later best, the sums."""
    first = DropletResult("t", "cpu", 4.0, 2.0, 5, reused=2, wrong_outputs=1, record="a")
    improved = DropletResult("t", "cpu", 2.1, 1.0, 3, reused=4, converged_after=2, record="b")
    joined = first.followed_by(improved)
    assert (joined.before, joined.after, joined.record, joined.speedup) == (4.0, 1.0, "b", 4.0)
    assert (joined.measured, joined.reused, joined.wrong_outputs) == (8, 2, 1)
    assert joined.converged_after == 7
    unchanged = first.followed_by(DropletResult("t", "cpu", 2.1, 2.1, 3, stop_reason="spent"))
    assert (unchanged.after, unchanged.record, unchanged.stop_reason) == (2.0, "a", "spent")
    assert unchanged.converged_after is None


def test_take_over_every_workloads_fastest_first():
    """Every workload's fastest point, then every second distinct one; skipped points use
    their turn."""
    pulled = []

    def source(name, points):
        for point in points:
            pulled.append(name)
            yield point

    def sources():
        return [
            source("a", [(1,), (2,), (3,)]),
            source("b", [(2,), (4,)]),
            source("c", [(5,), (6,)]),
        ]

    # The firsts (1,), (2,), (5,); then a's second is b's first, so a's turn is used.
    assert take_over(sources()) == [(1,), (2,), (5,), (4,), (6,)]
    # No source is read more than twice: a's third point is never made.
    assert pulled.count("a") == 2 and pulled.count("b") == 2
    assert take_over(sources(), limit=2) == [(1,), (2,)]
    assert take_over(sources(), skip=lambda point: point == (5,)) == [(1,), (2,), (4,), (6,)]
    assert not take_over([]) and not take_over([iter(())])
    # A schedule measured twice is one point: a workload's repeat does not use its second turn.
    repeating = [iter([(1,), (1,), (3,)]), iter([(2,), (2,)])]
    assert take_over(repeating) == [(1,), (2,), (3,)]
    assert [transfer_limit(budget) for budget in (None, 1, 3, 8, 32, 100)] == [8, 1, 1, 2, 8, 8]


def test_add_taken_over_skips_centre_and_measured():
    """A search's budget bounds the points taken; its centre and measured points use their turn."""
    search = DropletSearch((8, 8), start=(1, 1), budget=8)  # a quarter of 8: two points
    search.observe((1, 1), [0.5])
    search.observe((2, 2), [1.0])

    def sources():
        return [iter([(1, 1), (3, 3)]), iter([(2, 2), (4, 4)]), iter([(5, 5)])]

    assert search.centre == (1, 1)
    assert add_taken_over(search, sources()) == [(5, 5), (3, 3)]
    # A repeated call takes over nothing twice.
    assert not add_taken_over(search, sources())


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1, 2, 3], "3 weights for 2 tasks"),
        ([1, 0], r"task_weights\[1\] must be a positive"),
        ([float("inf"), 1], r"task_weights\[0\] must be a positive"),
        ([True, 1], r"task_weights\[0\] must be a positive"),
    ],
)
def test_task_weights_are_checked(weights, message):
    """One positive finite weight per task, or a ValueError naming the problem."""
    tasks = ("first", "second")
    with pytest.raises(ValueError, match=message):
        check_task_weights(weights, tasks)
    assert check_task_weights(None, tasks) is None
    assert check_task_weights((1, 4), tasks) == [1.0, 4.0]
    with pytest.raises(ValueError, match="task_weights were given without tasks"):
        check_task_weights((1, 4), None)


@pytest.mark.parametrize("budget", [0, -1, 2.5, True, "8"])
def test_global_budget_must_be_a_count(budget):
    with pytest.raises(ValueError, match="max_trials_global must be a positive"):
        SharedBudget(budget)


if __name__ == "__main__":
    tvm.testing.main()
