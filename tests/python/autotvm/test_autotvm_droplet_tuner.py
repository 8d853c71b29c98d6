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
"""Test the Droplet Search tuner of AutoTVM.

The algorithm tests drive the real Tuner API (``has_next`` / ``next_batch`` /
``update``, as ``Tuner.tune`` does) over the config spaces of real tasks, with
a deterministic cost of each config's knob-index vector instead of a hardware
measurement.  The integration tests measure real kernels with ``LocalBuilder``
and ``LocalRunner``.
"""
import inspect
import logging
import random
import sys

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.testing
from tvm import autotvm, te, topi  # pylint: disable=unused-import  (TOPI's templates)
from tvm.autotvm.measure import MeasureErrorNo, MeasureInput, MeasureResult
from tvm.autotvm.tuner import DropletTuner
from tvm.testing.autotvm import DummyRunner, get_sample_task

TARGET = "llvm"

# The builder's worker processes cannot import this test module by name: send
# the templates defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def inner_tile_area(entity):
    """The product of the inner tile lengths of the row and column splits."""
    return entity["tile_y"].size[-1] * entity["tile_x"].size[-1]


@autotvm.template("test_droplet_tuner/matmul")
def matmul(size, space_kind):
    """A square matmul with one split per axis; ``space_kind`` "filtered" adds filters,
    "tails" also offers row tiles that leave a tail (the ``verbose`` policy)."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    y, x = s[c].op.axis
    (k,) = s[c].op.reduce_axis

    cfg = autotvm.get_config()
    policy = "verbose" if space_kind == "tails" else "factors"
    cfg.define_split("tile_y", y, num_outputs=2, policy=policy)
    if space_kind == "filtered":
        # A per-knob filter (shrinks the knob) and a cross-knob filter that
        # rejects the origin (inner y and inner x of 1).
        cfg.define_split("tile_x", x, num_outputs=2, filter=lambda entity: entity.size[-1] != 2)
        cfg.multi_filter(filter=lambda entity: 2 <= inner_tile_area(entity) <= size)
    else:
        cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_split("tile_k", k, num_outputs=2)

    y_outer, y_inner = cfg["tile_y"].apply(s, c, y)
    x_outer, x_inner = cfg["tile_x"].apply(s, c, x)
    k_outer, k_inner = cfg["tile_k"].apply(s, c, k)
    s[c].reorder(y_outer, x_outer, k_outer, k_inner, y_inner, x_inner)
    return s, [a, b, c]


@autotvm.template("test_droplet_tuner/add")
def vector_add(size):
    """A template without knobs."""
    a = te.placeholder((size,), name="A")
    b = te.placeholder((size,), name="B")
    c = te.compute((size,), lambda i: a[i] + b[i], name="C")
    autotvm.get_config()
    return te.create_schedule(c.op), [a, b, c]


def matmul_task(size=64, space_kind="plain"):
    return autotvm.task.create(
        "test_droplet_tuner/matmul", args=(size, space_kind), target=tvm.target.Target(TARGET)
    )


def bowl(task, optimum):
    """Deterministic convex costs of a config, minimal at knob-index vector ``optimum``.

    Three costs per config with a tiny fixed spread, so that the Welch test decides.
    """
    space = task.config_space

    def costs(config):
        knobs = space.point2knob(config.index)
        base = 1.0 + sum((knob - best) ** 2 for knob, best in zip(knobs, optimum))
        return tuple(base * (1.0 + 1e-3 * repeat) for repeat in range(3))

    return costs


def measure_result(costs):
    """A MeasureResult as the runner reports it: ``None`` costs is a failed run."""
    if costs is None:
        error = RuntimeError("injected run failure")
        return MeasureResult((str(error), error), MeasureErrorNo.RUNTIME_DEVICE, 0.0, 0.0)
    return MeasureResult(costs, MeasureErrorNo.NO_ERROR, 0.0, 0.0)


def drive(tuner, cost, batch_size, n_trial=None, callbacks=(), shuffle=None):
    """Run ``tuner`` like ``Tuner.tune`` does, with deterministic costs.

    Returns the config indices measured, in order.
    """
    n_trial = n_trial or tuner.task.config_space.range_length
    measured = []
    while len(measured) < n_trial and tuner.has_next():
        configs = tuner.next_batch(min(batch_size, n_trial - len(measured)))
        assert configs, "has_next() promised a config"
        pairs = [
            (MeasureInput(tuner.task.target, tuner.task, config), measure_result(cost(config)))
            for config in configs
        ]
        measured.extend(config.index for config in configs)
        if shuffle is not None:
            shuffle(pairs)
        inputs = [inp for inp, _ in pairs]
        results = [res for _, res in pairs]
        tuner.update(inputs, results)
        for callback in callbacks:
            callback(tuner, inputs, results)
    return measured


def test_tuner():
    """Upstream's test of the tuner's state (apache/tvm v0.19.0), on this tuner's attributes."""
    task, _ = get_sample_task()
    tuner = autotvm.tuner.DropletTuner(task)
    # Nothing measured yet: no best choice (the first tuner held a fake one, cost 99999).
    assert tuner.best_choice is None
    assert tuner.dims == [len(knob) for knob in task.config_space.space_map.values()]
    assert tuner.pvalue == 0.05
    # The batch is the tuning loop's (the first tuner fixed max(16, cpu_count())).
    assert tuner.batch_size is None
    assert len(tuner.next_batch(4)) == 4
    # The search has not moved, measured, nor decided anything yet.
    assert tuner.search.measurements == 0 and tuner.search.moves == 0
    assert tuner.search.stop_reason is None


@tvm.testing.requires_llvm
def test_multi_filter():
    """Upstream's test of a multi-filtered space (apache/tvm v0.19.0)."""
    task, _ = get_sample_task()
    task.config_space.multi_filter(
        filter=lambda entity: 0 <= (entity["tile_x"].size[1] * entity["tile_y"].size[1]) < 1024
    )
    tuner = autotvm.tuner.DropletTuner(task)
    valid_indexes = list(filter(tuner.space.is_index_valid, range(tuner.space.range_length)))
    assert tuner.visited.issubset(valid_indexes)

    option = autotvm.measure_option(builder=autotvm.LocalBuilder(), runner=DummyRunner())
    tuner.tune(n_trial=8, measure_option=option)
    assert tuner.visited.issubset(valid_indexes)


def test_constructor_keeps_upstream_defaults():
    """Constructor keeps upstream defaults."""
    parameters = inspect.signature(DropletTuner).parameters
    assert list(parameters)[:3] == ["task", "start_position", "pvalue"]
    assert parameters["start_position"].default is None
    assert parameters["pvalue"].default == 0.05
    options = dict(list(parameters.items())[3:])
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in options.values()), options
    assert {name: p.default for name, p in options.items()} == {
        "batch_size": None,
        "failure_limit": None,
        "handover": "xgb",
        "start_sample": None,
        "polish": True,
    }

    task = matmul_task()
    tuner = DropletTuner(task)
    assert tuner.pvalue == 0.05
    assert tuner.dims == [len(knob) for knob in task.config_space.space_map.values()]
    # At most one diagonal pair per dimension and radius (the engine's default is two).
    assert tuner.search.pairs_per_radius == len(tuner.dims)
    assert tuner.batch_size is None
    assert tuner.best_choice is None
    assert tuner.has_next()
    # This template has no fallback config: the default start is the origin, config 0,
    # measured with a random sample of the space.
    assert tuner.start_sample == 8
    assert [config.index for config in tuner.next_batch(1)] == [0]

    # Positional arguments as upstream users pass them.
    start = [1, 2, 3]
    tuner = DropletTuner(task, start, 0.01)
    assert tuner.pvalue == 0.01
    first = tuner.next_batch(1)[0]
    assert task.config_space.point2knob(first.index) == start


def test_origin_is_measured_with_a_random_sample():
    """From the origin, the first round is the origin and a random sample of valid configs."""
    task = matmul_task(space_kind="filtered")
    space = task.config_space
    random.seed(0)
    tuner = DropletTuner(task, start_position=None, handover=None)
    first_round = [config.index for config in tuner.next_batch(64)]
    assert first_round[0] == space.get_next_index(0), "the lowest valid index"
    assert len(first_round) == 1 + 8 == len(set(first_round)), "no walk before the decision"
    assert all(space.is_index_valid(index) for index in first_round)

    # The best of the sample becomes the start of the walk.
    best = first_round[3]
    cost = bowl(task, space.point2knob(best))
    tuner.update(
        [MeasureInput(task.target, task, space.get(index)) for index in first_round],
        [measure_result(cost(space.get(index))) for index in first_round],
    )
    assert tuner.best_choice[0] == best

    # Without a sample, the start's neighbours follow it: one knob changed.
    start, neighbour = DropletTuner(task, start_sample=0).next_batch(2)
    knobs = zip(space.point2knob(start.index), space.point2knob(neighbour.index))
    assert sum(a != b for a, b in knobs) == 1


def test_bad_arguments_are_named():
    """Bad arguments are named in the error."""
    task = matmul_task()
    with pytest.raises(ValueError, match="has 2 knob indices"):
        DropletTuner(task, start_position=[0, 0])
    with pytest.raises(ValueError, match="out of range on knob 1"):
        DropletTuner(task, start_position=[0, 99, 0])
    with pytest.raises(ValueError, match="batch_size"):
        DropletTuner(task, batch_size=0)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="start_sample must be a number of configs"):
            DropletTuner(task, start_sample=bad)
    with pytest.raises(ValueError, match="rejected by the config space's filter"):
        DropletTuner(matmul_task(space_kind="filtered"), start_position=[0, 0, 0])


@pytest.mark.parametrize("batch_size", [1, 4, 16])
def test_bowl_cost_converges_to_its_optimum(batch_size):
    """Bowl cost converges to its optimum."""
    task = matmul_task()
    optimum = [5, 2, 4]
    tuner = DropletTuner(task, handover=None)
    measured = drive(tuner, bowl(task, optimum), batch_size)

    assert not tuner.has_next()
    assert tuner.best_choice[1] == optimum
    assert tuner.best_choice[0] == task.config_space.knob2point(optimum)
    assert "exhausted" in tuner.search.stop_reason
    assert len(measured) < task.config_space.range_length / 4, "the space was enumerated"


@pytest.mark.parametrize("batch_size", [1, 5])
def test_never_proposes_a_filtered_out_config(batch_size):
    """Never proposes a filtered out config."""
    task = matmul_task(space_kind="filtered")
    space = task.config_space
    assert not space.is_index_valid(0), "the cross-knob filter rejects the origin"
    assert all(entity.size[-1] != 2 for entity in space.space_map["tile_x"].entities)
    optimum = space.point2knob(
        max(index for index in range(space.range_length) if space.is_index_valid(index))
    )
    tuner = DropletTuner(task)
    # The origin being rejected, the search starts at the lowest valid config.
    first_valid = space.get_next_index(0)
    assert tuner.next_batch(1)[0].index == first_valid
    tuner = DropletTuner(task, handover=None)
    measured = drive(tuner, bowl(task, optimum), batch_size)

    assert measured[0] == first_valid
    assert all(space.is_index_valid(index) for index in measured)
    assert tuner.visited.issubset(
        {index for index in range(space.range_length) if space.is_index_valid(index)}
    )
    assert len(measured) == len(set(measured))


@pytest.mark.parametrize("batch_size", [2, 7])
def test_each_config_is_measured_once(batch_size):
    """Each config is measured once."""
    task = matmul_task()

    def costs(config):
        """A plateau: most configs cost the same."""
        value = 2.0 if config.index % 5 == 0 else 1.0
        return (value, value)

    tuner = DropletTuner(task, handover=None)
    measured = drive(tuner, costs, batch_size)
    assert not tuner.has_next()
    assert len(measured) == len(set(measured))
    assert tuner.visited == set(measured)


def test_failed_results_in_a_batch_never_become_best():
    """Failed results in a batch never become best."""
    task = matmul_task()
    space = task.config_space
    optimum = [3, 3, 3]
    clean_costs = bowl(task, optimum)

    def failing(config):
        """Every config with an odd knob sum fails to run, the optimum included."""
        return sum(space.point2knob(config.index)) % 2 == 1

    def costs(config):
        return None if failing(config) else clean_costs(config)

    tuner = DropletTuner(task, batch_size=6, handover=None)
    measured = drive(tuner, costs, 3, shuffle=random.Random(0).shuffle)

    assert any(failing(space.get(index)) for index in measured)
    best_index, _, best_costs = tuner.best_choice
    assert not failing(space.get(best_index))
    successful = [index for index in measured if not failing(space.get(index))]
    assert best_index == min(successful, key=lambda index: clean_costs(space.get(index)))
    assert best_costs == clean_costs(space.get(best_index))
    assert len(measured) == len(set(measured))


def test_all_failing_neighbourhood_stops_the_search():
    task = matmul_task()
    tuner = DropletTuner(task, failure_limit=3, handover=None, start_sample=0)
    measured = drive(tuner, lambda config: None, 1)
    assert not tuner.has_next()
    assert len(measured) == 3
    assert tuner.best_choice is None
    assert "failed" in tuner.search.stop_reason


def test_handover_goes_on_after_convergence():
    """Handover goes on after convergence with every measurement."""
    task = matmul_task()
    space = task.config_space
    cost = bowl(task, [5, 2, 4])
    alone = DropletTuner(task, handover=None, start_sample=0)
    converged = drive(alone, cost, 4)
    assert not alone.has_next() and alone.successor is None

    tuner = DropletTuner(task, start_sample=0)
    budget = len(converged) + 40
    measured = drive(tuner, cost, 4, n_trial=budget)
    assert measured[: len(converged)] == converged, "Droplet Search first, as without handover"
    assert tuner.search.converged_after == len(converged)
    assert len(measured) == budget, "the successor spends the rest of the budget"
    assert len(set(measured)) == len(measured), "no config measured twice across the handover"
    assert all(space.is_index_valid(index) for index in measured)
    assert tuner.successor is not None and set(measured) <= tuner.visited
    # AutoTVM's default loop features: on the recorded ResNet-18 landscapes the
    # successor reaches the optimum in about 60% of the measurements knob features need.
    assert tuner.successor.cost_model.fea_type == "itervar"
    best = min(measured, key=lambda index: cost(space.get(index))[0])
    assert tuner.best_choice[0] == best
    assert tuner.best_choice[2] == cost(space.get(best))


def far_bowl(task, optimum, ceiling=10.0):
    """A plateau at ``ceiling`` around the origin and a bowl around ``optimum``: a
    search that changes at most two knobs of the origin sees only the plateau."""
    space = task.config_space

    def costs(config):
        knobs = space.point2knob(config.index)
        base = min(ceiling, 1.0 + sum((knob - best) ** 2 for knob, best in zip(knobs, optimum)))
        return tuple(base * (1.0 + 1e-3 * repeat) for repeat in range(3))

    return costs


def polished_steps(tuner, cost, measured, start, count):
    """Of the ``count`` measurements after ``measured[start]``, how many are one index
    (on one knob or more) from the fastest config measured before them."""
    space = tuner.task.config_space
    point = tuner._point  # pylint: disable=protected-access
    steps = 0
    for position in range(start + 1, start + 1 + count):
        best = min(measured[:position], key=lambda index: cost(space.get(index))[0])
        here, there = point(measured[position]), point(best)
        steps += max(abs(a - b) for a, b in zip(here, there)) == 1
    return steps


@pytest.mark.parametrize("polish", [True, False])
def test_successor_finds_are_polished(polish):
    """Droplet Search converges on the plateau; the first config the successor finds
    faster than every earlier one starts a descent of one-index steps (with ``polish``)
    down the bowl to its optimum, whose closest neighbours are all measured.  Nothing
    is measured twice."""
    np.random.seed(7)
    random.seed(7)
    task = matmul_task()
    space = task.config_space
    optimum = [5, 4, 5]
    cost = far_bowl(task, optimum)
    tuner = DropletTuner(task, start_sample=0, polish=polish)
    measured = drive(tuner, cost, 1, n_trial=120)
    assert len(set(measured)) == len(measured) == 120, "no config measured twice"
    handover = tuner.search.converged_after
    means = [cost(space.get(index))[0] for index in measured]
    assert set(means[:handover]) == {10.0}, "Droplet Search saw the plateau only"
    first = next(n for n in range(handover, len(measured)) if means[n] < min(means[:n]))
    steps = polished_steps(tuner, cost, measured, first, 6)
    if not polish:
        assert tuner.polishes == 0 and tuner.polisher is None
        assert steps < 6, "the successor alone does not walk one index at a time"
        return
    assert tuner.polishes >= 1 and steps == 6
    assert list(space.point2knob(tuner.best_choice[0])) == optimum
    # pylint: disable=protected-access
    centre = tuner._point(tuner.best_choice[0])
    around = [
        centre[:axis] + (centre[axis] + step,) + centre[axis + 1 :]
        for axis in range(3)
        for step in (-1, 1)
    ]
    assert {tuner._index(point) for point in around} <= set(measured), "converged at the optimum"


def test_topi_fallback_config_is_the_default_start():
    """Fallback config of a topi template is the default start."""
    data = ("TENSOR", (1, 16, 14, 14), "float32")
    kernel = ("TENSOR", (16, 16, 3, 3), "float32")
    task = autotvm.task.create(
        "conv2d_NCHWc.x86",
        args=(data, kernel, (1, 1), (1, 1, 1, 1), (1, 1), "NCHW", "NCHW", "float32"),
        target=TARGET,
    )
    fallback = autotvm.task.space.FallbackConfigEntity()
    with tvm.target.Target(TARGET), autotvm.task.ApplyConfig(fallback):
        task.func(*task.args)
    tuner = DropletTuner(task)
    assert tuner.start_sample == 0, "the fallback config is a good start: no sample"
    (first,) = tuner.next_batch(1)
    assert first.index != 0
    for name in task.config_space.space_map:
        if hasattr(fallback[name], "size"):
            assert list(first[name].size[1:]) == list(fallback[name].size[1:]), name
        else:
            assert first[name].val == fallback[name].val, name
    # An explicit start still wins, as upstream's start_position.
    (origin,) = DropletTuner(
        task, start_position=[0] * len(task.config_space.space_map)
    ).next_batch(1)
    assert origin.index == 0


def test_splits_step_from_divisor_to_divisor():
    """A split's dimension lists the tile sizes that divide the loop, then those with a tail."""
    task = matmul_task(28, "tails")
    space = task.config_space
    geometry = DropletTuner(task).geometry
    assert [knob.values for knob in geometry.knobs] == [
        [(1, 2, 4, 7, 14, 28, 8, 16)],
        [(1, 2, 4, 7, 14, 28)],
        [(1, 2, 4, 7, 14, 28)],
    ]
    for index in range(len(space)):
        assert geometry.index(geometry.point(index)) == index
    config = space.get(geometry.index((3, 1, 2)))
    assert [config[name].size[-1] for name in ("tile_y", "tile_x", "tile_k")] == [7, 2, 4]


@pytest.mark.parametrize("batch_size", [1, 2, 4])
def test_slow_tails_do_not_slow_the_descent(batch_size):
    """From a row tile of 28, the search soon measures the best, 7, though 14 is slower than 28
    and the sizes with a tail (8, 16) are slower still: 7 is two divisors away, four sizes away."""
    task = matmul_task(28, "tails")
    space = task.config_space
    row_costs = {1: 4.0, 2: 3.0, 4: 1.5, 7: 1.0, 14: 2.5, 28: 2.0}

    def cost(config):
        rows, cols, depth = (config[name].size[-1] for name in ("tile_y", "tile_x", "tile_k"))
        base = row_costs.get(rows, 10.0) * (1.0 + abs(np.log2(cols / 4)) + abs(np.log2(depth / 4)))
        return tuple(base * (1.0 + 1e-3 * repeat) for repeat in range(3))

    start = [
        [entity.size[-1] for entity in space.space_map[name].entities].index(size)
        for name, size in (("tile_y", 28), ("tile_x", 4), ("tile_k", 4))
    ]
    measured = drive(DropletTuner(task, start_position=start, handover=None), cost, batch_size)
    best = min(range(len(space)), key=lambda index: cost(space.get(index))[0])
    # 15 measurements here; 28-30 with the tile sizes in ascending order, tails among them.
    assert best in measured[:16], measured.index(best) + 1 if best in measured else None


def test_batch_size_is_respected():
    """Batch size is respected."""
    task = matmul_task()
    cost = bowl(task, [6, 6, 6])

    # A round of 5 configs, handed out 2 at a time: the search moves only
    # once the whole round is measured.
    tuner = DropletTuner(task, batch_size=5, start_sample=0)
    handed = []
    while len(handed) < 5:
        configs = tuner.next_batch(2)
        assert len(configs) == min(2, 5 - len(handed))
        handed.extend(configs)
        tuner.update(
            [MeasureInput(task.target, task, config) for config in configs],
            [measure_result(cost(config)) for config in configs],
        )
        if len(handed) < 5:
            assert tuner.best_choice[0] == 0, "moved before the round was complete"
    assert tuner.batch_size == 5
    best = min(handed, key=cost)
    assert best.index != 0 and tuner.best_choice[0] == best.index

    # A smaller round caps the batch.
    tuner = DropletTuner(task, batch_size=3)
    assert len(tuner.next_batch(8)) == 3
    assert tuner.batch_size == 3

    # By default each batch is as large as the tuning loop asks.
    tuner = DropletTuner(task)
    assert len(drive_one(tuner, cost, 4)) == 4
    assert len(drive_one(tuner, cost, 2)) == 2
    assert tuner.batch_size is None


def drive_one(tuner, cost, batch_size):
    """Hand out and measure one batch."""
    configs = tuner.next_batch(batch_size)
    tuner.update(
        [MeasureInput(tuner.task.target, tuner.task, config) for config in configs],
        [measure_result(cost(config)) for config in configs],
    )
    return configs


def measure_option(repeat=2):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=120),
        runner=autotvm.LocalRunner(number=2, repeat=repeat, timeout=120),
    )


def check_apply_best(log, size):
    """The log's fastest config is what apply_history_best picks, and its kernel is correct."""
    records = list(autotvm.record.load_from_file(log))
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)
    fastest = min(records, key=lambda record: np.mean(record[1].costs))[0].config.index
    target = tvm.target.Target(TARGET)
    with autotvm.apply_history_best(log) as history:
        assert history.query(target, matmul_task(size).workload).index == fastest
        with target:
            schedule, args = matmul(size, "plain")
            kernel = tvm.build(schedule, args, target=target)
    device = tvm.cpu()
    a_np = np.random.uniform(size=(size, size)).astype("float32")
    b_np = np.random.uniform(size=(size, size)).astype("float32")
    c = tvm.nd.empty((size, size), "float32", device)
    kernel(tvm.nd.array(a_np, device), tvm.nd.array(b_np, device), c)
    tvm.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-5)


@tvm.testing.requires_llvm
def test_tune_matmul_applies_best_and_matches_numpy(tmp_path):
    """Tune matmul applies best and matches numpy."""
    log = str(tmp_path / "matmul.log")
    size = 64
    n_trial = 6
    tuner = DropletTuner(matmul_task(size))
    tuner.tune(
        n_trial=n_trial,
        measure_option=measure_option(),
        callbacks=[autotvm.callback.progress_bar(n_trial), autotvm.callback.log_to_file(log)],
    )
    assert tuner.best_config is not None
    indices = [inp.config.index for inp, _ in autotvm.record.load_from_file(log)]
    assert len(indices) == n_trial and len(set(indices)) == n_trial
    check_apply_best(log, size)


@tvm.testing.requires_llvm
def test_default_runner_repeat_leaves_a_single_cost(caplog):
    """AutoTVM's runner keeps all but the largest and smallest of more than two costs,
    so its default repeat=3 reports one: the search compares means, and the warning
    names the repeats that leave two (not "repeat >= 2", which 3 satisfies)."""
    caplog.set_level(logging.WARNING, logger="autotvm")
    task = matmul_task(32)
    tuner = DropletTuner(task, batch_size=4, start_sample=0)
    records = []
    tuner.tune(
        n_trial=8,
        measure_option=measure_option(repeat=3),
        callbacks=[lambda _tuner, inputs, results: records.extend(results)],
    )
    assert len(records) == 8
    assert all(len(result.costs) == 1 for result in records if result.error_no == 0)
    warnings = [r.getMessage() for r in caplog.records if "single value" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert task.name in warnings[0] and "repeat=2 or repeat >= 4" in warnings[0]


@tvm.testing.requires_llvm
def test_tune_resets_the_tuning_flag():
    """Tuner.tune (of every tuner) resets GLOBAL_SCOPE.in_tuning however tuning ends."""

    def interrupt(_tuner, _inputs, _results):
        assert autotvm.GLOBAL_SCOPE.in_tuning
        raise KeyboardInterrupt

    for tuner in (autotvm.tuner.RandomTuner(matmul_task()), DropletTuner(matmul_task())):
        with pytest.raises(KeyboardInterrupt):
            tuner.tune(n_trial=4, measure_option=measure_option(), callbacks=[interrupt])
        assert not autotvm.GLOBAL_SCOPE.in_tuning


@tvm.testing.requires_llvm
def test_tune_task_without_knobs():
    task = autotvm.task.create("test_droplet_tuner/add", args=(64,), target=TARGET)
    assert task.config_space.range_length == 1
    tuner = DropletTuner(task)
    assert isinstance(tuner.dims, list) and not tuner.dims
    tuner.tune(n_trial=4, measure_option=measure_option())
    assert not tuner.has_next()
    assert tuner.best_config.index == 0
    assert tuner.best_choice[0] == 0 and tuner.best_choice[1] == []


# ------------------------------------------------------------- resuming from tuning records


def test_resume_from_log_measures_nothing_twice(tmp_path):
    """Resume from log measures nothing twice."""
    log = str(tmp_path / "matmul.log")
    task = matmul_task()
    space = task.config_space
    optimum = [5, 1, 4]
    clean_costs = bowl(task, optimum)

    def failing(config):
        return space.point2knob(config.index)[2] == 1

    def costs(config):
        return None if failing(config) else clean_costs(config)

    first = drive(
        DropletTuner(task), costs, 4, n_trial=12, callbacks=[autotvm.callback.log_to_file(log)]
    )
    # Records of another task in the same log are not this task's history.
    other_task = matmul_task(size=32)
    other = drive(
        DropletTuner(other_task),
        bowl(other_task, [2, 2, 2]),
        4,
        n_trial=8,
        callbacks=[autotvm.callback.log_to_file(log)],
    )
    with open(log) as stream:
        logged_lines = stream.readlines()
    assert len(logged_lines) == len(first) + len(other)

    resumed = DropletTuner(matmul_task())
    resumed.load_history(autotvm.record.load_from_file(log), min_seed_records=1)
    assert resumed.visited == set(first)
    best_logged = min(
        (index for index in first if not failing(space.get(index))),
        key=lambda index: clean_costs(space.get(index)),
    )
    # The bowl has ties: the best logged cost, whichever config of that cost.
    assert clean_costs(space.get(resumed.best_choice[0])) == clean_costs(space.get(best_logged))

    second = drive(resumed, costs, 4, n_trial=60, callbacks=[autotvm.callback.log_to_file(log)])
    assert second, "the search should go on from the best logged config"
    assert not set(second) & set(first)
    assert len(second) == len(set(second))
    assert resumed.best_choice[1] == optimum
    # The log was appended to, never rewritten.
    with open(log) as stream:
        assert stream.readlines()[: len(logged_lines)] == logged_lines


@tvm.testing.requires_llvm
def test_tune_resumes_from_its_log(tmp_path):
    """Tune resumes from its log."""
    log = str(tmp_path / "matmul.log")
    size = 64
    n_trial = 4
    for _ in range(2):
        # A second session resumes from the log and measures new configs only.
        tuner = DropletTuner(matmul_task(size))
        if (tmp_path / "matmul.log").exists():
            tuner.load_history(autotvm.record.load_from_file(log))
        tuner.tune(
            n_trial=n_trial,
            measure_option=measure_option(),
            callbacks=[autotvm.callback.log_to_file(log)],
        )
    indices = [inp.config.index for inp, _ in autotvm.record.load_from_file(log)]
    assert len(indices) == 2 * n_trial
    assert len(indices) == len(set(indices))
    check_apply_best(log, size)


def knob_values(config):
    """What each knob of ``config`` is set to: a split's inner sizes, another knob's value."""
    return {
        name: tuple(entity.size[1:]) if hasattr(entity, "size") else repr(entity.val)
        for name, entity in config._entity_map.items()  # pylint: disable=protected-access
    }


def test_other_workloads_fastest_configs_start(tmp_path):
    """Records of other workloads of the template (a network's tasks tuned before) give
    the first round their fastest configs; the search starts from the fastest measured."""
    log = str(tmp_path / "network.log")
    other_task = matmul_task(size=32)
    drive(
        DropletTuner(other_task),
        bowl(other_task, [2, 3, 1]),
        4,
        n_trial=30,
        callbacks=[autotvm.callback.log_to_file(log)],
    )
    records = list(autotvm.record.load_from_file(log))
    fastest = sorted(records, key=lambda record: np.mean(record[1].costs))[:2]
    wanted = [knob_values(inp.config) for inp, _ in fastest]

    task = matmul_task(size=64)
    random.seed(0)
    tuner = DropletTuner(task, handover=None)
    tuner.load_history(autotvm.record.load_from_file(log))
    assert tuner.transferred == 2
    first_round = tuner.next_batch(64)
    assert first_round[0].index == 0, "the start (the origin: this template has no fallback)"
    assert [knob_values(config) for config in first_round[1:3]] == wanted
    assert len(first_round) == 1 + 2 + 8, "the start, the transferred configs, the random sample"

    # The search starts from the fastest of them.
    target = first_round[2]
    cost = bowl(task, task.config_space.point2knob(target.index))
    tuner.update(
        [MeasureInput(task.target, task, config) for config in first_round],
        [measure_result(cost(config)) for config in first_round],
    )
    assert tuner.search.centre == tuner._point(target.index)

    # Records of the task itself are a resume: nothing is transferred.
    own = drive(tuner, cost, 4, n_trial=4, callbacks=[autotvm.callback.log_to_file(log)])
    resumed = DropletTuner(task)
    resumed.load_history(autotvm.record.load_from_file(log))
    assert resumed.transferred == 0
    assert resumed.visited == set(own)


def test_transfer_needs_the_target_and_the_values():
    """Records of another target are not transferred; nor is a config with a knob value
    that the space does not have."""
    other_target = autotvm.task.create(
        "test_droplet_tuner/matmul",
        args=(32, "plain"),
        target=tvm.target.Target("llvm -mcpu=skylake"),
    )
    pairs = [
        (
            MeasureInput(other_target.target, other_target, other_target.config_space.get(index)),
            measure_result((1e-3 * (index + 1),)),
        )
        for index in range(4)
    ]
    tuner = DropletTuner(matmul_task(size=64))
    tuner.load_history(pairs)
    assert tuner.transferred == 0

    small, task = matmul_task(size=32), matmul_task(size=48)
    space = small.config_space
    # Inner tiles (1, 1, 32): 48 has no tile of 32.  Config 1: inner tiles (2, 1, 1).
    tile_32 = next(index for index in range(len(space)) if space.point2knob(index) == [0, 0, 5])
    assert space.get(tile_32)["tile_k"].size[-1] == 32
    pairs = [
        (MeasureInput(small.target, small, space.get(index)), measure_result((1e-3 * rank,)))
        for rank, index in enumerate([tile_32, 1], 1)
    ]
    tuner = DropletTuner(task)
    tuner.load_history(pairs)
    assert tuner.transferred == 1
    first_round = tuner.next_batch(2)
    assert knob_values(first_round[1]) == knob_values(space.get(1))


@tvm.testing.requires_llvm
def test_tune_measures_other_workloads_fastest_first(tmp_path):
    """Tuned one after another into one log (TVM's tutorials' transfer learning), a task
    measures the fastest config of the one before it right after its start."""
    log = str(tmp_path / "network.log")
    DropletTuner(matmul_task(32)).tune(
        n_trial=4, measure_option=measure_option(), callbacks=[autotvm.callback.log_to_file(log)]
    )
    tuner = DropletTuner(matmul_task(64))
    start = knob_values(tuner.space.get(0))
    fastest = next(
        knob_values(inp.config)
        for inp, _ in sorted(
            autotvm.record.load_from_file(log), key=lambda record: np.mean(record[1].costs)
        )
        if knob_values(inp.config) != start
    )
    tuner.load_history(autotvm.record.load_from_file(log))
    tuner.tune(
        n_trial=2, measure_option=measure_option(), callbacks=[autotvm.callback.log_to_file(log)]
    )
    records = list(autotvm.record.load_from_file(log))[4:]
    assert [inp.task.args[0] for inp, _ in records] == [64, 64]
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)
    assert knob_values(records[1][0].config) == fastest


if __name__ == "__main__":
    tvm.testing.main()
