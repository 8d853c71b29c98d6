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
"""The neighbourhood walk and the acceptance test of the Droplet Search engine."""
import random

import numpy as np
import pytest
import scipy.stats

import tvm.testing
from tvm.contrib.droplet_search import has_lower_mean, is_faster
from tvm.contrib.droplet_search.statistics import welch_less_pvalue
from tvm.contrib.droplet_search.neighbourhood import DirectionScores, Walk, combined, step_of


def walk_points(walk):
    """Every point of a walk, in order."""
    points = []
    while True:
        point = walk.next_point()
        if point is None:
            return points
        points.append(point)


def test_axis_moves_grow_and_stay_in_the_box():
    """Axis moves grow by radius and never leave the box."""
    walk = Walk((1, 0), (3, 2), DirectionScores((3, 2)).order())
    # Radius 1: up and down along each axis, up first; radius 2: what still fits.
    assert walk_points(walk) == [(2, 0), (0, 0), (1, 1)]
    walk = Walk((0, 0), (4, 1), DirectionScores((4, 1)).order())
    assert walk_points(walk) == [(1, 0), (2, 0), (3, 0)], "a dimension of size 1 has no moves"


def test_rewarded_directions_come_first_and_decay():
    """Rewarded directions are walked first and decay."""
    scores = DirectionScores((5, 5))
    assert scores.order() == [(0, 1), (0, -1), (1, 1), (1, -1)]
    scores.reward((1, -1), 0.2)
    assert scores.order()[0] == (1, -1)
    scores.reward((0, -1), 0.15)  # the older score halves: 0.1 < 0.15
    assert scores.order()[:2] == [(0, -1), (1, -1)]


def test_promoted_points_come_first():
    """Promoted points come first when inside the box."""
    walk = Walk((1, 1), (3, 3), DirectionScores((3, 3)).order())
    walk.promote([(2, 2), (3, 3), (1, 1), (0, 2)])
    assert walk_points(walk)[:2] == [(2, 2), (0, 2)]


def test_repaired_moves_end_each_radius():
    """An invalid axis move comes back combined with each step that makes it valid."""
    # Two exponents of one split: their sum may not exceed 2.
    valid = lambda point: point[0] + point[1] <= 2
    axis_moves = [(2, 1), (0, 1), (1, 2), (1, 0)]  # (2, 1) and (1, 2) are invalid
    walk = Walk((1, 1), (3, 3), DirectionScores((3, 3)).order(), is_valid=valid)
    # (2, 1) made valid by the step down the other axis, then (1, 2) likewise.
    assert walk_points(walk) == axis_moves + [(2, 0), (0, 2)]
    without = Walk((1, 1), (3, 3), DirectionScores((3, 3)).order())
    assert walk_points(without) == axis_moves


def test_repaired_moves_pair_unequal_steps():
    """A broken move is also repaired by a step one shorter on another axis."""
    # A unit of the second coordinate is worth two of the first (a factor and its
    # square on two levels of a split, say).
    valid = lambda point: point[0] + 2 * point[1] <= 3
    walk = Walk((1, 1), (4, 4), DirectionScores((4, 4)).order(), is_valid=valid)
    radius_1 = [(2, 1), (0, 1), (1, 2), (1, 0), (2, 0)]
    # At radius 2, two up the first axis is valid with one down the second.
    assert walk_points(walk) == radius_1 + [(3, 1), (1, 3), (3, 0)]


def test_pairs_combine_the_best_axis_moves():
    """Pairs combine the best measured axis moves of a radius."""
    centre = (2, 2, 2)
    walk = Walk(centre, (5, 5, 5), DirectionScores((5, 5, 5)).order())
    gains = {(3, 2, 2): 0.3, (1, 2, 2): -0.1, (2, 3, 2): 0.2, (2, 2, 1): 0.1}
    pairs = walk.pairs(gains.get)
    assert pairs[0] == (3, 3, 2), "the two best gains first"
    assert all(sum(1 for a, b in zip(centre, point) if a != b) == 2 for point in pairs)
    assert len(pairs) <= 2 * 3 and not walk.pairs(gains.get), "each pair is proposed once"


def test_steps():
    assert step_of((1, 1), (1, 3)) == (1, 2)
    assert step_of((1, 1), (2, 2)) is None and step_of((1, 1), (1, 1)) is None
    assert combined((1, 1), [(0, 2), (1, -1)]) == (3, 0)


def test_noisy_candidates_need_significance():
    incumbent = [1.00, 1.20, 0.90, 1.10]
    slightly_lower = [0.98, 1.18, 0.88, 1.08]
    clearly_lower = [0.50, 0.51, 0.49, 0.50]
    assert not is_faster(slightly_lower, incumbent, 0.05)
    assert is_faster(clearly_lower, incumbent, 0.05)
    assert is_faster([0.9], [1.0], 0.05), "single costs fall back to comparing means"
    assert not is_faster([1.0], [1.0], 0.05)
    assert is_faster([0.5, 0.5], [1.0, 1.0], 0.05), "equal repeats that differ"
    assert not is_faster([], [1.0], 0.05) and is_faster([5.0], [], 0.05)


def test_records_keep_the_lowest_mean_success():
    """Of two records of one point, without a test: the successful one with the lower mean."""
    assert has_lower_mean([0.7, 1.3], [1.0, 1.1]), "means only: 1.0 against 1.05"
    assert not has_lower_mean([0.9, 1.3], [1.0, 1.1])
    assert not has_lower_mean([1.05], [1.0, 1.1]), "a tie keeps the earlier record"
    assert has_lower_mean([2.0], None) and has_lower_mean([2.0], ())
    assert not has_lower_mean(None, [1.0]) and not has_lower_mean((), None)


def test_acceptance_is_scipy_welch():
    """The p-value is scipy.stats' one-sided Welch test's, and so is the decision."""
    rng = random.Random(7)
    for _ in range(200):
        sample_a = [rng.gauss(1.0, rng.choice([0.01, 0.1])) for _ in range(rng.randint(2, 7))]
        sample_b = [rng.gauss(1.05, rng.choice([0.01, 0.1])) for _ in range(rng.randint(2, 7))]
        pvalue = scipy.stats.ttest_ind(
            sample_a, sample_b, equal_var=False, alternative="less"
        ).pvalue
        assert welch_less_pvalue(sample_a, sample_b) == pytest.approx(pvalue, rel=1e-9)
        if np.mean(sample_a) < np.mean(sample_b):
            assert is_faster(sample_a, sample_b, 0.05) == (pvalue <= 0.05)


if __name__ == "__main__":
    tvm.testing.main()
