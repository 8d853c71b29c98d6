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
"""Droplet exploitation of auto-scheduler states, on real tuning of this host's CPU."""
import functools
import json
import logging
import os
import shutil

import numpy as np
import pytest

import tvm
import tvm.testing
import tvm.topi.testing
from tvm import auto_scheduler, te, topi
from tvm.auto_scheduler.droplet_log import steps_of
from tvm.auto_scheduler.droplet_space import StateSpace
from tvm.auto_scheduler.measure import PythonBasedMeasureCallback
from tvm.auto_scheduler.state_output_check import StateOutputChecker
from tvm.auto_scheduler.workload_registry import register_workload_tensors
from tvm.contrib.droplet_search import DropletSearch

EXPLORATION_TRIALS = 4
EXPLOITATION_TRIALS = 12
EXPLOITATION_BATCH = 6
# A small evolutionary search keeps the exploration quick on a 2-core machine.
SEARCH_POLICY_PARAMS = {
    "evolutionary_search_population": 64,
    "evolutionary_search_num_iters": 2,
    "sample_init_min_population": 16,
}


def host_target():
    """This host's CPU, named so the kernels use its vector units."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target(f"llvm -mcpu={cpu}")


def matmul_tensors(size=128):
    """A matmul whose second operand is a weight (the layout rewrite of Ansor applies)."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute(
        (size, size),
        lambda i, j: te.sum(a[i, k] * b[k, j], axis=k),
        name="C",
        attrs={"layout_free_placeholders": [b]},
    )
    return [a, b, c]


def matmul_transposed_tensors(size=64):
    """A different computation with the arguments of ``matmul_tensors``."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name="C")
    return [a, b, c]


def conv2d_tensors():
    data = te.placeholder((1, 16, 14, 14), name="data")
    kernel = te.placeholder((32, 16, 3, 3), name="kernel")
    out = topi.nn.relu(topi.nn.conv2d_nchw(data, kernel, 1, 1, 1))
    return [data, kernel, out]


def make_task(tensors, target=None):
    """A task of a compute DAG, registered so that measuring processes can rebuild it."""
    dag = auto_scheduler.ComputeDAG(tensors)
    workload_key = dag.workload_key()
    register_workload_tensors(workload_key, tensors)
    return auto_scheduler.SearchTask(
        compute_dag=dag, workload_key=workload_key, target=target or host_target()
    )


def tiled_matmul_state(task, lengths=(8, 4, 16, 4), unroll=16):
    """A hand-written tiled state of ``matmul_tensors``: three splits and an unroll pragma.

    ``lengths`` are the inner lengths of the splits of i (two), j and k.
    """
    state = task.compute_dag.get_init_state()
    output = task.compute_dag.tensors[-1]
    i, j, k = state[output].iters
    i_outer, i_middle, i_inner = state.split(output, i, list(lengths[:2]))
    j_outer, j_inner = state.split(output, j, [lengths[2]])
    k_outer, k_inner = state.split(output, k, [lengths[3]])
    state.reorder(output, [i_outer, j_outer, i_middle, k_outer, k_inner, i_inner, j_inner])
    state.pragma(output, i_outer, f"auto_unroll_max_step${unroll}")
    return state


def conv2d_state_with_compute_at(task, location):
    """A hand-written state of ``conv2d_tensors``: a tiled conv with the padding computed at it."""
    state = task.compute_dag.get_init_state()
    relu = task.compute_dag.tensors[-1]
    conv = relu.op.input_tensors[0]
    pad = conv.op.input_tensors[0]
    _, f_axis, y_axis, _, _, _, _ = state[conv].iters
    state.split(conv, f_axis, [8])
    state.split(conv, y_axis, [7])
    state.compute_at(pad, conv, state[conv].iters[location])
    return state


def test_space_of_a_tiled_matmul():
    """Space of a tiled matmul."""
    task = make_task(matmul_tensors())
    state = tiled_matmul_state(task)
    space = StateSpace(task, state)
    tiles = [parameter for parameter in space.parameters if parameter.kind == "tile"]
    unrolls = [parameter for parameter in space.parameters if parameter.kind == "unroll"]
    assert [parameter.values[parameter.original] for parameter in tiles] == [8, 4, 16, 4]
    # Every divisor of the extent, ascending; the innermost length of a split stays within
    # Ansor's max_innermost_split_factor (64).
    divisors = (1, 2, 4, 8, 16, 32, 64, 128)
    innermost = [len(space.steps[p.step_index][4]) - 1 == p.position for p in tiles]
    assert innermost == [False, True, True, True]
    for parameter, is_innermost in zip(tiles, innermost):
        assert parameter.values == (divisors[:-1] if is_innermost else divisors)
    assert [parameter.values for parameter in unrolls] == [(0, 16, 64, 512)]
    # The state is the point of its own values, not the box's corner.
    assert space.origin == (3, 2, 4, 2, 1)
    assert space.describe(space.origin) == "origin"
    assert space.is_valid(space.origin)
    # A radius-1 move takes a value to the next smaller or larger one: a tile of 8 to 4 or 16.
    search = DropletSearch(space.dims, space.origin, is_valid=space.is_valid)
    first_round = {space.describe(point) for point in search.ask(2 * len(space.dims) + 1)}
    for parameter, neighbours in [(tiles[0], (4, 16)), (unrolls[0], (0, 64))]:
        for value in neighbours:
            assert f"{parameter.name}={value}" in first_round
    assert space.point_of(state) == space.origin
    # Exhaustive check of the first split's two lengths: valid exactly when they divide 128.
    first, second = 0, 1
    for index_a, length_a in enumerate(tiles[first].values):
        for index_b, length_b in enumerate(tiles[second].values):
            point = list(space.origin)
            point[space.parameters.index(tiles[first])] = index_a
            point[space.parameters.index(tiles[second])] = index_b
            assert space.is_valid(point) == (128 % (length_a * length_b) == 0)


def test_space_takes_over_another_tasks_values():
    """A state of another task with the same steps gives its values where they fit."""
    task = make_task(matmul_tensors(64))
    space = StateSpace(task, tiled_matmul_state(task, (2, 2, 4, 2), unroll=0))
    other = make_task(matmul_tensors(128))

    def values_like(lengths, unroll=16):
        steps = steps_of(
            auto_scheduler.MeasureInput(other, tiled_matmul_state(other, lengths, unroll))
        )
        return space.values_of(space.point_like(steps))

    assert list(values_like((8, 4, 16, 4)).values()) == [8, 4, 16, 4, 16]
    # 32 x 4 does not divide 64: the split of i keeps the start's lengths, the others are taken.
    assert list(values_like((32, 4, 16, 4), unroll=64).values()) == [2, 2, 16, 4, 64]
    # A length this loop does not have (128) is not taken either.
    assert list(values_like((1, 1, 128, 1)).values()) == [1, 1, 4, 1, 16]
    conv = make_task(conv2d_tensors())
    conv_steps = steps_of(auto_scheduler.MeasureInput(conv, conv2d_state_with_compute_at(conv, 3)))
    assert space.point_like(conv_steps) is None


def test_space_compute_location():
    """Space compute location."""
    task = make_task(conv2d_tensors())
    state = conv2d_state_with_compute_at(task, 3)
    space = StateSpace(task, state)
    (location,) = [parameter for parameter in space.parameters if parameter.kind == "compute_at"]
    (conv_id,) = [i for i, s in enumerate(space.origin_state.stages) if s.op.name == "conv2d_nchw"]
    assert location.values[location.original] == (conv_id, 3)
    axis = space.parameters.index(location)
    extents = [int(iterator.range.extent) for iterator in space.origin_state.stages[conv_id].iters]
    valid_locations = []
    for index, value in enumerate(location.values):
        point = list(space.origin)
        point[axis] = index
        if space.is_valid(point):
            valid_locations.append(value)
            schedule, args = task.compute_dag.apply_steps_from_state(space.state(point))
            tvm.lower(schedule, args)
    # The conv is computed at the root: its loops are the locations, from the outermost in.
    # A loop of extent one repeats the location around it; the others are all valid.
    assert list(location.values) == [(conv_id, loop) for loop in range(len(extents))]
    assert valid_locations == [
        (conv_id, loop) for loop in range(len(extents)) if loop == 3 or extents[loop] > 1
    ]


def test_space_around_a_split_that_does_not_divide():
    """A split of the state that does not divide its loop does not make its moves invalid."""
    task = make_task(matmul_tensors())
    state = tiled_matmul_state(task, lengths=(8, 4, 48, 4))  # 48 does not divide 128
    space = StateSpace(task, state)
    tiles = [parameter for parameter in space.parameters if parameter.kind == "tile"]
    assert tiles[2].values[tiles[2].original] == 48
    larger_i = list(space.origin)
    larger_i[space.parameters.index(tiles[0])] += 1
    assert space.is_valid(larger_i), space.invalid_reason(larger_i)
    other_j = list(space.origin)
    other_j[space.parameters.index(tiles[2])] += 1  # 64 divides 128
    assert space.is_valid(other_j)


def test_space_has_no_compute_location_on_gpus():
    """The sketch policy mutates compute locations on CPU targets only."""
    dag = auto_scheduler.ComputeDAG(conv2d_tensors())
    # Given hardware parameters, the task needs no CUDA device to be made.
    hardware = auto_scheduler.HardwareParams(-1, 16, 64, 49152, 2**31 - 1, 1024, 8, 32)
    task = auto_scheduler.SearchTask(
        compute_dag=dag,
        workload_key=dag.workload_key(),
        target=tvm.target.Target("cuda", host=host_target()),
        hardware_params=hardware,
    )
    space = StateSpace(task, conv2d_state_with_compute_at(task, 3))
    assert space.parameters and all(p.kind != "compute_at" for p in space.parameters)


@functools.lru_cache(maxsize=None)
def sketch_states():
    """A task of ``conv2d_tensors`` and states of it sampled by the sketch policy (seeded),
    by the tiling level the fused relu follows (1 or 2)."""
    task = make_task(conv2d_tensors())
    policy = auto_scheduler.SketchPolicy(
        task,
        auto_scheduler.RandomModel(),
        params={"sample_init_min_population": 20},
        seed=3,
        verbose=0,
    )
    by_level = {1: [], 2: []}
    for state in policy.sample_initial_population()[:60]:
        follow_splits = [
            step for step in steps_of(auto_scheduler.MeasureInput(task, state)) if step[0] == "FSP"
        ]
        if follow_splits:
            by_level[follow_splits[0][4]].append(state)
    return task, by_level


def sketch_space(level):
    """The space of the first sampled state of a follow level with a padding computed at a loop."""
    task, by_level = sketch_states()
    for state in by_level[level]:
        space = StateSpace(task, state)
        kinds = {parameter.kind for parameter in space.parameters}
        if {"follow_level", "compute_at", "parallel_fuse"} <= kinds:
            return task, space
    raise AssertionError(f"no sampled state of level {level} with a compute location")


@pytest.mark.parametrize("level", [1, 2])
def test_space_holds_the_other_follow_level(level):
    """The sketch policy's states of the other follow level are points of a state's space."""
    task, by_level = sketch_states()
    _, space = sketch_space(level)
    (follow,) = [parameter for parameter in space.parameters if parameter.kind == "follow_level"]
    assert follow.values == (1, 2) and follow.values[follow.original] == level
    # The padding may move out of the conv, to the loops of the relu outside the conv.
    (location,) = [parameter for parameter in space.parameters if parameter.kind == "compute_at"]
    assert len({stage for stage, _ in location.values}) == 2
    other = 3 - level
    inside = [state for state in by_level[other] if space.point_of(state) is not None]
    assert inside, f"none of {len(by_level[other])} states of level {other} is a point"
    valid = []
    for state in inside:
        point = space.point_of(state)
        assert space.values_of(point)[follow.name] == other
        steps = steps_of(auto_scheduler.MeasureInput(task, state))
        assert space.steps_of(point) == steps
        assert space.point_like(steps) == point
        if space.is_valid(point):
            valid.append(point)
        else:  # the policy may compute the padding at a loop of extent 1: a duplicate here
            assert "extent 1" in space.invalid_reason(point)
    assert valid
    schedule, args = task.compute_dag.apply_steps_from_state(space.state(valid[0]))
    tvm.lower(schedule, args)


def test_space_parallel_fuse_keeps_later_annotations():
    """Each number of fused loops gives a parallel outer loop and keeps the innermost vectorized."""
    task, space = sketch_space(1)
    (fuse,) = [parameter for parameter in space.parameters if parameter.kind == "parallel_fuse"]
    stage_id = space.steps[fuse.step_index][1]
    # The stage's loops before the fuse: those of the state and the ones it fused, but one.
    loops = len(space.origin_state.stages[stage_id].iters) + fuse.values[fuse.original] - 1
    axis = space.parameters.index(fuse)
    valid = []
    for index, count in enumerate(fuse.values):
        point = list(space.origin)
        point[axis] = index
        if not space.is_valid(point):
            continue
        valid.append(count)
        iterators = space.state(point).stages[stage_id].iters
        assert len(iterators) == loops - count + 1
        assert int(iterators[0].annotation) == 3  # parallel
        assert int(iterators[-1].annotation) == 2  # vectorize
        schedule, args = task.compute_dag.apply_steps_from_state(space.state(point))
        tvm.lower(schedule, args)
    assert fuse.values[fuse.original] in valid and len(valid) > 1
    # The vectorized innermost loop is never fused into the parallel loop.
    assert max(valid) < loops


@pytest.mark.parametrize("workload", ["matmul", "conv2d", "sketch"])
def test_space_walk_proposes_valid_distinct_states(workload):
    """Space walk proposes valid distinct states."""
    if workload == "matmul":
        task = make_task(matmul_tensors())
        space = StateSpace(task, tiled_matmul_state(task))
    elif workload == "conv2d":
        task = make_task(conv2d_tensors())
        space = StateSpace(task, conv2d_state_with_compute_at(task, 3))
    else:  # a follow level, compute locations on two stages, a parallel fuse
        task, space = sketch_space(1)
    # A synthetic cost with a minimum away from the origin makes the search move.
    goal = tuple(size // 2 for size in space.dims)

    def cost(point):
        return 1.0 + sum(abs(a - b) for a, b in zip(point, goal))

    search = DropletSearch(space.dims, space.origin, is_valid=space.is_valid, budget=48)
    proposed, programs = [], set()
    while not search.finished:
        points = search.ask(2 * len(space.dims))
        if not points:
            break
        for point in points:
            proposed.append(point)
            steps = space.steps_of(point)
            for step in steps:
                if step[0] == "SP":
                    assert step[3] % int(np.prod(step[4])) == 0
            programs.add(json.dumps(steps))
            chosen = space.state(point)
            assert space.point_of(chosen) == point
            schedule, args = task.compute_dag.apply_steps_from_state(chosen)
            tvm.lower(schedule, args)
            search.tell(point, [cost(point)] * 2)
    assert search.moves > 0
    assert len(set(proposed)) == len(proposed) == len(programs)


@tvm.testing.requires_llvm
def test_output_checker_rejects_another_computation():
    """Output checker rejects another computation."""
    task = make_task(matmul_tensors(64))
    other = make_task(matmul_transposed_tensors(64))
    checker = StateOutputChecker()
    try:
        assert checker.set_reference(task, task.compute_dag.get_init_state()) is None
        state = task.compute_dag.get_init_state()
        output = task.compute_dag.tensors[-1]
        state.split(output, state[output].iters[0], [16])
        assert checker.difference(task, state) is None
        difference = checker.difference(other, other.compute_dag.get_init_state())
        assert difference is not None and "differ" in difference
    finally:
        checker.close()


# ----------------------------------------------------------------------------- exploitation


def numpy_output(arrays):
    """The expected output, computed by numpy, of a matmul or conv2d task."""
    if len(arrays[0].shape) == 2:
        return arrays[0] @ arrays[1]
    return np.maximum(tvm.topi.testing.conv2d_nchw_python(arrays[0], arrays[1], 1, 1), 0)


def local_runner():
    """Three costs per state, each the mean of runs lasting at least 20 ms."""
    return auto_scheduler.LocalRunner(number=4, repeat=3, min_repeat_ms=20, timeout=60)


def tuning_options(log_file=None, runner=None, callbacks=(), per_round=EXPLORATION_TRIALS):
    recorders = [auto_scheduler.RecordToFile(log_file)] if log_file else []
    return auto_scheduler.TuningOptions(
        num_measures_per_round=per_round,
        builder=auto_scheduler.LocalBuilder(timeout=120),
        runner=runner or local_runner(),
        measure_callbacks=recorders + list(callbacks),
        verbose=0,
    )


def log_lines(log_file):
    with open(log_file, encoding="utf-8") as stream:
        return [line for line in stream if line.strip()]


class RecordCollector(PythonBasedMeasureCallback):
    """A Python measure callback keeping every record it receives."""

    def __init__(self):
        super().__init__()
        self.records = []

    def callback(self, _policy, inputs, results):
        self.records.extend(zip(inputs, results))


@pytest.fixture(scope="module", name="explored")
def fixture_explored(tmp_path_factory):
    """Explore a matmul and a conv2d with the auto-scheduler, then exploit them.

    Rounds of 3 do not divide the 4 trials of each task: the task scheduler,
    which bounds only the trials of all tasks, would give them 6 and 3.
    """
    log_file = str(tmp_path_factory.mktemp("droplet") / "tuning.json")
    tasks = [make_task(matmul_tensors()), make_task(conv2d_tensors())]
    collector = RecordCollector()
    results = auto_scheduler.explore_and_exploit(
        tasks,
        tuning_options(log_file, callbacks=[collector], per_round=3),
        log_file,
        exploration_trials=EXPLORATION_TRIALS,
        exploitation_trials=EXPLOITATION_TRIALS,
        search_policy_params=SEARCH_POLICY_PARAMS,
        batch_size=EXPLOITATION_BATCH,
    )
    return tasks, log_file, results, collector


def check_apply_best(task, log_file):
    """The best schedule of the log builds, runs and matches numpy."""
    schedule, args = task.apply_best(log_file)
    module = tvm.build(schedule, args, target=task.target)
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, [int(x) for x in arg.shape]).astype(arg.dtype) for arg in args]
    buffers = [tvm.nd.array(array) for array in arrays]
    module(*buffers)
    np.testing.assert_allclose(buffers[-1].numpy(), numpy_output(arrays[:-1]), rtol=1e-4, atol=1e-4)


def mean_cost(measure_result):
    """The mean of a measure result's costs (seconds)."""
    return float(np.mean([cost.value for cost in measure_result.costs]))


def appended_records(log_file, before):
    """The records appended to a log after its first ``before`` bytes."""
    with open(log_file, "rb") as stream:
        after = stream.read()
    assert after[: len(before)] == before
    return [
        auto_scheduler.measure_record.load_record_from_string(line)
        for line in after[len(before) :].decode().splitlines()
        if line.strip()
    ]


@tvm.testing.requires_llvm
def test_explore_then_exploit_appends_every_state(explored):
    """Explore then exploit appends every measured state."""
    tasks, log_file, results, collector = explored
    assert [result.workload_key for result in results] == [task.workload_key for task in tasks]
    lines = log_lines(log_file)
    explored_count = sum(result.exploration_trials for result in results)
    # The exploration measured through the callbacks of the options.
    assert len(collector.records) == explored_count
    exploited = [
        auto_scheduler.measure_record.load_record_from_string(line)
        for line in lines[explored_count:]
    ]
    assert len(exploited) == sum(result.exploitation_trials for result in results)
    explored_keys = {json.dumps(steps_of(inp)) for inp, _ in collector.records}
    for task, result in zip(tasks, results):
        assert result.exploration_trials == EXPLORATION_TRIALS
        assert 1 <= result.exploitation_trials <= EXPLOITATION_TRIALS
        assert result.states_from_log >= 1  # the best state of the exploration
        own = [(inp, res) for inp, res in exploited if inp.task.workload_key == task.workload_key]
        assert len(own) == result.exploitation_trials
        start = min(
            (
                record
                for record in collector.records
                if record[0].task.workload_key == task.workload_key
            ),
            key=lambda record: mean_cost(record[1]) if record[1].error_no == 0 else float("inf"),
        )
        # The start is measured again first, alongside its challengers; nothing else twice.
        assert steps_of(own[0][0]) == steps_of(start[0])
        assert result.exploration_best == pytest.approx(mean_cost(start[1]), rel=1e-4)
        if own[0][1].error_no == 0:
            assert result.before == pytest.approx(mean_cost(own[0][1]), rel=1e-4)
        else:  # this build's LLVM miscompiles some states: the start itself may be wrong
            assert own[0][1].error_no == auto_scheduler.measure.MeasureErrorNo.WRONG_ANSWER
            assert result.before == result.exploration_best
        keys = [json.dumps(steps_of(inp)) for inp, _ in own[1:]]
        assert len(set(keys)) == len(keys) and not set(keys) & explored_keys
        if result.improved:
            assert json.dumps(steps_of(result.record[0])) in keys
            assert result.after == pytest.approx(mean_cost(result.record[1]), rel=1e-4)
            assert result.after < result.before
        else:
            assert result.after == result.before and result.speedup == 1.0
        # What the result reports is what the log's readers pick afterwards.
        best_input, best_result = auto_scheduler.load_best_record(log_file, task.workload_key)
        if result.improved:
            assert steps_of(best_input) == steps_of(result.record[0])
            assert mean_cost(best_result) == pytest.approx(result.after, rel=1e-4)
        else:
            assert steps_of(best_input) == steps_of(start[0])


@tvm.testing.requires_llvm
def test_apply_best_returns_a_correct_schedule(explored):
    tasks, log_file, results, _ = explored
    for task, result in zip(tasks, results):
        _, best_result = auto_scheduler.load_best_record(log_file, task.workload_key)
        # The log keeps six significant digits of each cost.
        best_cost = np.mean([c.value for c in best_result.costs])
        assert best_cost <= result.exploitation_best * (1 + 1e-4)
        check_apply_best(task, log_file)


@tvm.testing.requires_llvm
def test_exploit_an_existing_log(explored, tmp_path):
    """Exploit an existing log."""
    tasks, source, _, _ = explored
    log_file = str(tmp_path / "copy.json")
    shutil.copy(source, log_file)
    with open(log_file, "rb") as stream:
        before = stream.read()
    counts = {task.workload_key: 0 for task in tasks}
    for line in log_lines(log_file):
        counts[json.loads(line)["i"][0][0]] += 1

    results = auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 4)

    appended = appended_records(log_file, before)
    assert len(appended) == sum(result.exploitation_trials for result in results)
    assert sorted(result.workload_key for result in results) == sorted(counts)
    old_keys = {json.dumps(steps_of(inp)) for inp, _ in auto_scheduler.load_records(source)}
    starts = {
        task.workload_key: json.dumps(
            steps_of(auto_scheduler.load_best_record(source, task.workload_key)[0])
        )
        for task in tasks
    }
    for inp, _ in appended:
        key = json.dumps(steps_of(inp))
        if key == starts[inp.task.workload_key]:
            continue  # the start, measured again once alongside its challengers
        assert key not in old_keys, "a state of the log was measured again"
    assert sorted(
        json.dumps(steps_of(inp)) for inp, _ in appended if json.dumps(steps_of(inp)) in old_keys
    ) == sorted(starts.values())
    for result in results:
        assert result.exploration_trials == counts[result.workload_key]
        assert result.exploitation_trials <= 4
    appended_keys = [steps_of(inp) for inp, _ in appended]
    for task in tasks:
        result = next(r for r in results if r.workload_key == task.workload_key)
        # The best record before and after the run, as TVM reads them from the logs.
        _, best_before = auto_scheduler.load_best_record(source, task.workload_key)
        assert result.exploration_best == pytest.approx(mean_cost(best_before), rel=1e-4)
        best_input, best_after = auto_scheduler.load_best_record(log_file, task.workload_key)
        if result.improved:
            assert mean_cost(best_after) == pytest.approx(result.exploitation_best, rel=1e-4)
            assert steps_of(best_input) in appended_keys
        else:  # the log's best is still a record of the start (its own, or its new one)
            assert json.dumps(steps_of(best_input)) == starts[task.workload_key]
        check_apply_best(task, log_file)


def synthetic_log(tmp_path, task, state, cost=1.0):
    """A log holding one record of ``state``, without tuning."""
    log_file = str(tmp_path / "synthetic.json")
    result = auto_scheduler.MeasureResult([cost], 0, "", 0.0, 0.0)
    auto_scheduler.save_records(log_file, [auto_scheduler.MeasureInput(task, state)], [result])
    return log_file


def naive_matmul_state(task):
    """The loop nest i, j, k of ``matmul_tensors`` as a state: a split j of inner length 1."""
    state = task.compute_dag.get_init_state()
    output = task.compute_dag.tensors[-1]
    i, j, k = state[output].iters
    j_outer, j_inner = state.split(output, j, [1])
    state.reorder(output, [i, j_outer, k, j_inner])
    state.pragma(output, i, "auto_unroll_max_step$0")
    return state


@tvm.testing.requires_llvm
def test_exploitation_improves_a_naive_state(tmp_path):
    """Exploitation improves a naive state."""
    task = make_task(matmul_tensors())
    state = naive_matmul_state(task)
    options = tuning_options()
    measure_input = auto_scheduler.MeasureInput(task, state)
    (naive,) = options.runner.run([measure_input], options.builder.build([measure_input], 0), 0)
    assert naive.error_no == 0
    log_file = str(tmp_path / "naive.json")
    auto_scheduler.save_records(log_file, [measure_input], [naive])
    with open(log_file, "rb") as stream:
        before = stream.read()

    # Longer inner j tiles make B's accesses contiguous: the first batch holds one.
    (result,) = auto_scheduler.droplet_exploit(log_file, host_target(), options, 10, tasks=[task])

    assert result.improved
    appended = appended_records(log_file, before)
    assert len(appended) == result.exploitation_trials == 10
    assert result.states_from_log == 1
    assert result.exploration_best == pytest.approx(mean_cost(naive), rel=1e-4)
    # The log's best record is the reported one, measured by this run, at the
    # reported cost, faster than the naive state's.
    best_input, best_result = auto_scheduler.load_best_record(log_file, task.workload_key)
    assert steps_of(best_input) == steps_of(result.record[0])
    assert steps_of(best_input) in [steps_of(inp) for inp, _ in appended]
    assert mean_cost(best_result) == pytest.approx(result.exploitation_best, rel=1e-4)
    assert mean_cost(best_result) < mean_cost(naive)
    check_apply_best(task, log_file)


@tvm.testing.requires_llvm
def test_exploitation_appends_what_it_measured(tmp_path, monkeypatch):
    """Exploitation appends exactly what it measured and resumes."""
    task = make_task(matmul_tensors())
    log_file = synthetic_log(tmp_path, task, tiled_matmul_state(task), cost=1e-12)
    origin = json.dumps(steps_of(auto_scheduler.MeasureInput(task, tiled_matmul_state(task))))
    with open(log_file, "rb") as stream:
        before = stream.read()
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    (result,) = auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 3)
    assert result.exploitation_trials == 3 and result.states_from_log == 1
    assert result.stop_reason == "the budget of 3 measurements is spent"
    appended = [json.dumps(steps_of(inp)) for inp, _ in appended_records(log_file, before)]
    # The start first, measured again alongside its challengers (the log's 1e-12 s is
    # not a cost measured under today's conditions), then two new states.
    assert appended[0] == origin and len(set(appended)) == 3
    assert result.before != result.exploration_best == 1e-12
    assert result.improved == (result.record is not None)
    if not result.improved:
        assert result.speedup == 1.0 and result.after == result.before
    best_input, _ = auto_scheduler.load_best_record(log_file, task.workload_key)
    assert json.dumps(steps_of(best_input)) == origin, "the log's 1e-12 s record stays its best"
    assert not os.listdir(workdir)  # temporary files live elsewhere

    # The same call again reads the logged states and measures new ones (and its start).
    with open(log_file, "rb") as stream:
        before = stream.read()
    (again,) = auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 3)
    assert again.states_from_log == 3 and again.exploitation_trials == 3
    second = [json.dumps(steps_of(inp)) for inp, _ in appended_records(log_file, before)]
    assert not set(second[1:]) & set(appended)


@tvm.testing.requires_llvm
def test_task_whose_exploration_failed_is_passed_over(tmp_path):
    """A task whose every record failed is not exploited; the others are."""
    task, conv = make_task(matmul_tensors()), make_task(conv2d_tensors())
    log_file = synthetic_log(tmp_path, task, tiled_matmul_state(task))
    failed = auto_scheduler.MeasureResult(
        [1e10], auto_scheduler.measure.MeasureErrorNo.RUNTIME_DEVICE, "", 0.0, 0.0
    )
    conv_input = auto_scheduler.MeasureInput(conv, conv2d_state_with_compute_at(conv, 3))
    auto_scheduler.save_records(log_file, [conv_input], [failed])
    # One record each: both explored already.
    results = auto_scheduler.explore_and_exploit(
        [task, conv], tuning_options(log_file), log_file, 1, 2
    )
    assert [result.exploitation_trials for result in results] == [2, 0]
    assert results[1].stop_reason.startswith("no successful record")
    assert results[1].exploration_trials == 1 and results[1].speedup == 1.0


def one_record_each(log_file, tasks, lengths=(8, 4, 16, 4)):
    """Log one record of 1 ms per task, of a tiled state; returns their states' keys."""
    keys = []
    for task in tasks:
        measure_input = auto_scheduler.MeasureInput(task, tiled_matmul_state(task, lengths))
        result = auto_scheduler.MeasureResult([1e-3], 0, "", 0.0, 0.0)
        auto_scheduler.save_records(log_file, [measure_input], [result])
        keys.append(json.dumps(steps_of(measure_input)))
    return keys


@tvm.testing.requires_llvm
def test_shared_budget_goes_to_the_largest_share(tmp_path):
    """With task weights and a global budget in one pass, the weighted slowest task is
    exploited first.

    Both tasks' records say 1 ms; the second runs four times per model run, so
    it is exploited first, with its own budget of 2; the first gets what is
    left of the global budget: 1 of 3, none of 2.
    """
    tasks = [make_task(matmul_tensors(size)) for size in (128, 64)]
    for max_trials_global, measured in ((3, [1, 2]), (2, [0, 2])):
        log_file = str(tmp_path / f"shared{max_trials_global}.json")
        one_record_each(log_file, tasks)
        with open(log_file, "rb") as stream:
            before = stream.read()
        results = auto_scheduler.droplet_exploit(
            log_file,
            host_target(),
            tuning_options(),
            2,
            tasks=tasks,
            task_weights=[1, 4],
            max_trials_global=max_trials_global,
            first_pass_trials=0,
        )
        assert [result.exploitation_trials for result in results] == measured
        appended = appended_records(log_file, before)
        order = [tasks[1].workload_key] * 2 + [tasks[0].workload_key] * measured[0]
        assert [inp.task.workload_key for inp, _ in appended] == order
    assert "max_trials_global" in results[0].stop_reason
    assert results[0].after == results[0].before == pytest.approx(1e-3)
    assert not results[0].improved


@tvm.testing.requires_llvm
def test_shared_budget_in_two_passes(tmp_path):
    """By default a global budget is spent in two passes: every task first, then by the
    shares the first pass measured.

    Both tasks' records say 1 ms, so the first pass takes them in order, one
    measurement each (the start, measured again); the 128^3 matmul then turns
    out 64 times the FLOPs of the 32^3 one, and the rest of the budget goes to
    it, its search continued from its best record.
    """
    tasks = [make_task(matmul_tensors(size)) for size in (128, 32)]
    log_file = str(tmp_path / "two_passes.json")
    starts = one_record_each(log_file, tasks, (4, 4, 4, 4))
    with open(log_file, "rb") as stream:
        before = stream.read()
    results = auto_scheduler.droplet_exploit(
        log_file,
        host_target(),
        tuning_options(),
        3,
        tasks=tasks,
        max_trials_global=4,
        first_pass_trials=1,
    )
    appended = appended_records(log_file, before)
    assert [result.exploitation_trials for result in results] == [3, 1]
    keys = [tasks[position].workload_key for position in (0, 1, 0, 0)]
    assert [inp.task.workload_key for inp, _ in appended] == keys
    # The second pass starts from the task's best record: its start, measured again.
    assert [json.dumps(steps_of(inp)) for inp, _ in appended[:3]] == starts + starts[:1]
    first, second = results
    assert first.stop_reason == "the budget of 2 measurements is spent"
    assert first.before == pytest.approx(mean_cost(appended[0][1]), rel=1e-4)
    assert first.exploration_best == pytest.approx(1e-3) and first.exploration_trials == 1
    if first.improved:  # by a state of the second pass, at its cost there
        assert steps_of(first.record[0]) in [steps_of(inp) for inp, _ in appended[3:]]
        assert first.after == pytest.approx(mean_cost(first.record[1]))
        assert first.after < first.before
    else:
        assert first.after == first.before and first.speedup == 1.0
    assert second.stop_reason == "the budget of 1 measurements is spent"
    assert not second.improved
    check_apply_best(tasks[0], log_file)


@tvm.testing.requires_llvm
def test_other_tasks_fastest_state_is_measured_first(tmp_path):
    """A task's first batch holds another task's fastest state, taken over by its values."""
    tasks = [make_task(matmul_tensors(size)) for size in (128, 64)]
    states = [tiled_matmul_state(tasks[0]), tiled_matmul_state(tasks[1], (2, 2, 4, 2), unroll=0)]
    space = StateSpace(tasks[1], states[1])
    taken_over = space.steps_of(
        space.point_like(steps_of(auto_scheduler.MeasureInput(tasks[0], states[0])))
    )
    for transfer in (True, False):
        log_file = str(tmp_path / f"transfer-{transfer}.json")
        for task, state, cost in zip(tasks, states, (1e-3, 2e-3)):
            result = auto_scheduler.MeasureResult([cost], 0, "", 0.0, 0.0)
            auto_scheduler.save_records(
                log_file, [auto_scheduler.MeasureInput(task, state)], [result]
            )
        with open(log_file, "rb") as stream:
            before = stream.read()
        (result,) = auto_scheduler.droplet_exploit(
            log_file, host_target(), tuning_options(), 4, tasks=[tasks[1]], transfer=transfer
        )
        appended = [steps_of(inp) for inp, _ in appended_records(log_file, before)]
        assert len(appended) == 4
        # The start first, measured again; then the state of the 128 matmul, with its
        # values, when transfer is on (one: a quarter of the budget).
        assert appended[0] == space.steps
        assert result.transferred == int(transfer)
        assert (appended[1] == taken_over) == transfer
        assert (taken_over in appended) == transfer


# ----------------------------------------------------------------- bad input


@pytest.fixture(name="valid_log")
def fixture_valid_log(tmp_path):
    task = make_task(matmul_tensors())
    return task, synthetic_log(tmp_path, task, tiled_matmul_state(task))


def _assert_refused(log_file, match, call):
    with open(log_file, "rb") as stream:
        before = stream.read()
    with pytest.raises(ValueError, match=match):
        call()
    with open(log_file, "rb") as stream:
        assert stream.read() == before


def test_empty_log_is_refused(tmp_path):
    log_file = tmp_path / "empty.json"
    log_file.write_text("")
    _assert_refused(
        log_file,
        "holds no record",
        lambda: auto_scheduler.droplet_exploit(str(log_file), host_target(), tuning_options(), 8),
    )


def test_log_of_another_target_is_refused(valid_log):
    _, log_file = valid_log
    other = tvm.target.Target("llvm -mtriple=aarch64-linux-gnu")
    _assert_refused(
        log_file,
        "no record for target",
        lambda: auto_scheduler.droplet_exploit(log_file, other, tuning_options(), 8),
    )


def test_corrupt_line_is_refused(valid_log):
    _, log_file = valid_log
    with open(log_file, "a", encoding="utf-8") as stream:
        stream.write('{"i": [["truncated\n')
    _assert_refused(
        log_file,
        "line 2 of the auto-scheduler log .* is not a JSON record",
        lambda: auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 8),
    )


@pytest.mark.parametrize("line", ['{"a": 1}\n', "{}\n", "\n"])
def test_line_that_is_not_a_record_is_refused(valid_log, line):
    _, log_file = valid_log
    with open(log_file, encoding="utf-8") as stream:
        record = stream.readline()
    with open(log_file, "a", encoding="utf-8") as stream:
        stream.write(line + record)  # not the last line: it is not cut short
    _assert_refused(
        log_file,
        "line 2 .* is not a(n auto-scheduler| JSON) record",
        lambda: auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 8),
    )


def test_zero_budgets_are_refused(valid_log):
    """Zero budgets are refused."""
    task, log_file = valid_log
    _assert_refused(
        log_file,
        "exploitation_trials must be a positive",
        lambda: auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 0),
    )
    _assert_refused(
        log_file,
        "exploration_trials must be a positive",
        lambda: auto_scheduler.explore_and_exploit(
            [task], tuning_options(log_file), log_file, 0, 8
        ),
    )
    _assert_refused(
        log_file,
        "exploitation_trials must be a positive",
        lambda: auto_scheduler.explore_and_exploit(
            [task], tuning_options(log_file), log_file, 8, 0
        ),
    )


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"pvalue": 0.0}, "pvalue must be in"),
        ({"pvalue": "0.05"}, "pvalue must be in"),
        ({"batch_size": 0}, "batch_size must be a positive number"),
        ({"batch_size": 2.5}, "batch_size must be a positive number"),
        ({"max_innermost_factor": 2.5}, "max_innermost_factor must be a positive"),
        ({"output_tolerance": -1e-3}, "output_tolerance must be a finite"),
        ({"output_tolerance": float("nan")}, "output_tolerance must be a finite"),
        ({"check_timeout": 0}, "check_timeout must be a positive"),
        (
            {"tuning_options": {"runner": "local"}},
            "tuning_options must be an auto_scheduler.TuningOptions",
        ),
        ({"tasks": []}, "empty list of tasks"),
    ],
)
def test_bad_settings_are_refused(valid_log, settings, message):
    """Bad settings are refused."""
    _, log_file = valid_log
    arguments = {"tuning_options": tuning_options(), **settings}
    _assert_refused(
        log_file,
        message,
        lambda: auto_scheduler.droplet_exploit(
            log_file, host_target(), exploitation_trials=8, **arguments
        ),
    )
    if "tasks" not in settings:
        _assert_refused(
            log_file,
            message,
            lambda: auto_scheduler.explore_and_exploit(
                [valid_log[0]],
                log_file=log_file,
                exploration_trials=8,
                exploitation_trials=8,
                **arguments,
            ),
        )
    else:
        _assert_refused(
            log_file,
            "needs at least one task",
            lambda: auto_scheduler.explore_and_exploit([], tuning_options(), log_file, 8, 8),
        )


def test_bad_weights_and_global_budget_are_refused(valid_log):
    """Task weights must match the tasks; the global budget must be a positive count."""
    task, log_file = valid_log
    for arguments, message in (
        ({"task_weights": [1]}, "task_weights were given without tasks"),
        ({"tasks": [task], "task_weights": [1, 2]}, "2 weights for 1 tasks"),
        ({"tasks": [task], "task_weights": [0]}, r"task_weights\[0\] must be a positive"),
        ({"max_trials_global": 0}, "max_trials_global must be a positive"),
        ({"max_trials_global": 8, "first_pass_trials": -1}, "first_pass_trials must be a number"),
        ({"first_pass_trials": 2}, "first_pass_trials needs max_trials_global"),
    ):
        _assert_refused(
            log_file,
            message,
            functools.partial(
                auto_scheduler.droplet_exploit,
                log_file,
                host_target(),
                tuning_options(),
                8,
                **arguments,
            ),
        )
    _assert_refused(
        log_file,
        "max_trials_global must be a positive",
        lambda: auto_scheduler.explore_and_exploit(
            [task], tuning_options(log_file), log_file, 8, 8, max_trials_global=0
        ),
    )


def test_task_of_another_target_is_refused(valid_log):
    """A task of another target, a target the output check cannot run, a policy per task."""
    task, log_file = valid_log
    other = tvm.target.Target("llvm -mtriple=aarch64-linux-gnu")
    foreign = make_task(matmul_tensors(), target=other)
    _assert_refused(
        log_file,
        "is for target .*aarch64",
        lambda: auto_scheduler.droplet_exploit(
            log_file, host_target(), tuning_options(), 8, tasks=[foreign]
        ),
    )
    _assert_refused(
        log_file,
        "search_policy has 2 policies for 1 tasks",
        lambda: auto_scheduler.explore_and_exploit(
            [task], tuning_options(log_file), log_file, 8, 8, search_policy=[None, None]
        ),
    )
    # Refused before anything is measured: the check would fail at the first candidate.
    foreign_log = str(os.path.join(os.path.dirname(log_file), "aarch64.json"))
    save = auto_scheduler.MeasureInput(foreign, tiled_matmul_state(foreign))
    result = auto_scheduler.MeasureResult([1.0], 0, "", 0.0, 0.0)
    auto_scheduler.save_records(foreign_log, [save], [result])
    _assert_refused(
        foreign_log,
        "cannot be built and run on this host.*pass check_outputs=False",
        lambda: auto_scheduler.droplet_exploit(foreign_log, other, tuning_options(), 4),
    )


@tvm.testing.requires_llvm
def test_interrupted_check_keeps_the_checked_records(tmp_path, monkeypatch):
    """A check that raises loses none of its batch's records that needed no check or passed one."""
    task = make_task(matmul_tensors())
    # At 1 s the logged start is slower than any candidate: each would be the best, checked.
    log_file = synthetic_log(tmp_path, task, naive_matmul_state(task), cost=1.0)
    with open(log_file, "rb") as stream:
        before = stream.read()
    checked = []
    difference = StateOutputChecker.difference

    def interrupted(self, task, state, library=None):
        checked.append(json.dumps(steps_of(auto_scheduler.MeasureInput(task, state))))
        if len(checked) == 2:
            raise RuntimeError("interrupted during the second check")
        return difference(self, task, state, library)

    monkeypatch.setattr(StateOutputChecker, "difference", interrupted)
    with pytest.raises(RuntimeError, match="interrupted during the second check"):
        auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 4, batch_size=4)
    appended = appended_records(log_file, before)
    successes = [json.dumps(steps_of(inp)) for inp, res in appended if res.error_no == 0]
    assert successes == checked[:1], "the checked record is kept, the unchecked ones are not"


def report_start_wrong(monkeypatch, wrong_steps=None):
    """Make the output checker report the start as computing wrong outputs, and the state with
    ``wrong_steps`` (``steps_of``, as JSON) too; returns the steps of every state it checks."""
    set_reference = StateOutputChecker.set_reference
    difference = StateOutputChecker.difference
    checked = []

    def start_differs(self, task, state):
        set_reference(self, task, state)  # the real reference: the correct candidates pass
        return "injected: 4096 of 4096 values of output 0 differ"

    def checked_difference(self, task, state, library=None):
        steps = json.dumps(steps_of(auto_scheduler.MeasureInput(task, state)))
        checked.append(steps)
        if steps == wrong_steps:
            return "injected: the start computes other values"
        return difference(self, task, state, library)

    monkeypatch.setattr(StateOutputChecker, "set_reference", start_differs)
    monkeypatch.setattr(StateOutputChecker, "difference", checked_difference)
    return checked


@tvm.testing.requires_llvm
def test_wrong_start_checks_every_measured_state(tmp_path, monkeypatch, caplog):
    """A start computing wrong outputs makes every measured state checked, not only the fastest."""
    caplog.set_level(logging.WARNING, logger="auto_scheduler")
    task = make_task(matmul_tensors())
    # The record of a miscompiled kernel: faster than every state the search measures, so
    # no candidate could become the best, and the start measured again is not a challenger.
    log_file = synthetic_log(tmp_path, task, naive_matmul_state(task), cost=1e-9)
    with open(log_file, "rb") as stream:
        before = stream.read()
    checked = report_start_wrong(monkeypatch)
    auto_scheduler.droplet_exploit(log_file, host_target(), tuning_options(), 4, batch_size=4)

    appended = appended_records(log_file, before)
    successes = [json.dumps(steps_of(inp)) for inp, res in appended if res.error_no == 0]
    assert len(successes) == 4 and sorted(checked) == sorted(successes)
    assert "computes wrong outputs (injected" in caplog.text
    assert "every measured state is checked against the unscheduled program" in caplog.text


@tvm.testing.requires_llvm
def test_wrong_start_is_left_for_a_right_neighbour(tmp_path, monkeypatch, caplog):
    """A start whose measurement fails the check is a failed centre: the search moves off it."""
    caplog.set_level(logging.DEBUG, logger="auto_scheduler")
    task = make_task(matmul_tensors())
    state = naive_matmul_state(task)
    log_file = synthetic_log(tmp_path, task, state, cost=1e-9)
    with open(log_file, "rb") as stream:
        before = stream.read()
    start = json.dumps(steps_of(auto_scheduler.MeasureInput(task, state)))
    report_start_wrong(monkeypatch, wrong_steps=start)
    (result,) = auto_scheduler.droplet_exploit(
        log_file, host_target(), tuning_options(), 8, batch_size=4
    )

    appended = appended_records(log_file, before)
    errors = {json.dumps(steps_of(inp)): res.error_no for inp, res in appended}
    assert errors[start] == auto_scheduler.measure.MeasureErrorNo.WRONG_ANSWER
    assert result.wrong_outputs == 1 and len(appended) == 8
    assert "moves to" in caplog.text and "was failed)" in caplog.text
    # The log keeps the start's record: it is what ApplyHistoryBest applies.
    best_input, _ = auto_scheduler.load_best_record(log_file, task.workload_key)
    assert json.dumps(steps_of(best_input)) == start


def test_task_without_records_is_refused(valid_log):
    _, log_file = valid_log
    conv = make_task(conv2d_tensors())
    _assert_refused(
        log_file,
        "holds no successful record of task",
        lambda: auto_scheduler.droplet_exploit(
            log_file, host_target(), tuning_options(), 8, tasks=[conv]
        ),
    )


if __name__ == "__main__":
    tvm.testing.main()
