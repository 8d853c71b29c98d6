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
"""Test the post-optimization of MetaSchedule tuning records with Droplet Search.

Faults, interruption and damaged databases are tested in
test_meta_schedule_post_optimization_faults.py, RPC measurement in
test_meta_schedule_post_optimization_rpc.py.

Real tuning and real measurements of a small matmul on this CPU: the budgets
are tiny, so that the file runs in a few minutes on a 2-core machine.
"""

import dataclasses
import glob
import json
import os
import re
import sys

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.meta_schedule.post_optimization import (
    PostOptimizationResult,
    TraceSpace,
    post_optimize,
)
from tvm.meta_schedule.post_optimization.measure import measure_schedules
from tvm.meta_schedule.post_optimization.workloads import mean_run_secs
from tvm.meta_schedule.utils import derived_object
from tvm.ir import structural_equal

# The builder's worker processes cannot import this test module by name: send
# the build function defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
OTHER_TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 1})
SIZE = 128
TUNING_TRIALS = 8
POST_TRIALS = 12


def matmul(size: int = SIZE) -> tvm.IRModule:
    """C = A @ B for square float32 matrices."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


def runner(repeat: int = 3) -> ms.runner.Runner:
    """A runner that repeats each measurement ``repeat`` times, briefly."""
    return ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=repeat, min_repeat_ms=20)
    )


def seconds(run_secs):
    """Run times as floats (the runner reports FloatImm)."""
    return [float(getattr(secs, "value", secs)) for secs in run_secs]


def mean_secs(record) -> float:
    """Mean run time of a tuning record."""
    values = seconds(record.run_secs)
    return sum(values) / len(values)


def tuning_record_lines(work_dir):
    """The tuning records of a JSON database, in the order they were committed."""
    with open(f"{work_dir}/database_tuning_record.json", encoding="utf-8") as records:
        return [json.loads(line) for line in records if line.strip()]


def line_mean_secs(line) -> float:
    """Mean run time of a JSON tuning record line: [workload, [trace, run_secs, ...]]."""
    run_secs = line[1][1]
    return sum(run_secs) / len(run_secs) if run_secs else float("inf")


def matmul_outputs(mod: tvm.IRModule):
    """Build ``mod`` (a scheduled matmul) and run it: what it computes, and numpy's result."""
    lib = tvm.build(mod, target=TARGET)
    dev = tvm.cpu()
    a_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    b_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    a, b = tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev)
    c = tvm.nd.array(np.zeros((SIZE, SIZE), "float32"), dev)
    lib(a, b, c)
    return c.numpy(), a_np @ b_np


def check_matches_numpy(mod: tvm.IRModule) -> None:
    """Build ``mod`` (a scheduled matmul), run it and compare with numpy."""
    tvm.testing.assert_allclose(*matmul_outputs(mod), rtol=1e-4, atol=1e-4)


def matches_numpy(mod: tvm.IRModule) -> bool:
    """Whether ``mod`` (a scheduled matmul) computes what numpy does."""
    return np.allclose(*matmul_outputs(mod), rtol=1e-4, atol=1e-4)


@derived_object
class RecordingBuilder(ms.builder.PyBuilder):
    """A builder that remembers every module it is asked to build."""

    def __init__(self, builder: ms.builder.Builder):
        super().__init__()
        self.builder = builder
        self.mods = []

    def build(self, build_inputs):
        self.mods.extend(build_input.mod for build_input in build_inputs)
        return self.builder.build(build_inputs)


def plain_build(mod, target, _params=None):
    """TVM's build of ``mod`` for ``target``, in the builder's worker."""
    return tvm.driver.build(mod, target=target)


@pytest.fixture(scope="module", name="builder")
def fixture_builder():
    """One builder for the whole file: creating one starts (and checks) a worker pool."""
    return ms.builder.LocalBuilder(f_build=plain_build, max_workers=2, timeout_sec=120)


def logged_lines(work_dir):
    """The lines MetaSchedule's loggers wrote to the log files of a work directory."""
    lines = []
    for path in sorted(glob.glob(os.path.join(work_dir, "logs", "*.log"))):
        with open(path, encoding="utf-8") as stream:
            lines.extend(stream.read().splitlines())
    return lines


@pytest.fixture(scope="module", name="tuned")
def fixture_tuned(tmp_path_factory):
    """Tune the matmul, with a post-optimization budget, in one call of tune_tir
    with the builder given by name, as by default.

    Returns the work directory, the database tune_tir returned, and the lines
    of the work directory's log files (the post-optimizer logs to them, as
    every MetaSchedule module does).
    """
    work_dir = str(tmp_path_factory.mktemp("post_optimization"))
    database = ms.tune_tir(
        matmul(),
        TARGET,
        work_dir,
        max_trials_global=TUNING_TRIALS,
        num_trials_per_iter=TUNING_TRIALS,
        builder="local",
        runner=runner(),
        cost_model="random",  # tuning quality does not matter here, only its records
        seed=0,
        post_optimization=POST_TRIALS,
    )
    return work_dir, database, logged_lines(work_dir)


@tvm.testing.requires_llvm
def test_tune_tir_with_post_optimization(tuned):
    """tune_tir returns the database with every post-optimization measurement in it."""
    work_dir, database, messages = tuned
    # The post-optimization ran once, within its budget; the start came from the database.
    (report,) = [message for message in messages if " measurements (" in message]
    measured = int(re.search(r" in (\d+) measurements", report).group(1))
    reused = int(re.search(r"(\d+) records reused", report).group(1))
    assert 1 <= measured <= POST_TRIALS
    assert reused >= 1
    # Post-optimization built with a builder of the same name that keeps its workers.
    assert any("LocalBuilder: workers kept across calls" in message for message in messages)
    records = database.get_all_tuning_records()
    reloaded = ms.database.JSONDatabase(work_dir=work_dir, allow_missing=False)
    reloaded_records = reloaded.get_all_tuning_records()
    assert len(records) == len(reloaded_records)
    for record, again in zip(records, reloaded_records):
        assert str(record.trace) == str(again.trace)
        assert seconds(record.run_secs) == seconds(again.run_secs)
    # Tuning committed TUNING_TRIALS records, post-optimization one per program it
    # measured: first its start again, then programs no record had before.
    lines = tuning_record_lines(work_dir)
    assert len(lines) == TUNING_TRIALS + measured
    traces = [json.dumps(line[1][0]) for line in lines]
    assert len(set(traces[TUNING_TRIALS:])) == measured
    assert traces[TUNING_TRIALS] in traces[:TUNING_TRIALS]
    assert not set(traces[TUNING_TRIALS + 1 :]) & set(traces[:TUNING_TRIALS])
    best = reloaded.query_schedule(matmul(), TARGET, "main")
    assert best is not None
    if not matches_numpy(best.mod):
        # Tuning does not check outputs, and a compiler defect (the legacy line's
        # build miscompiles a few of these schedules) can make its fastest record
        # wrong.  Post-optimization only appends: that record stays the best, but
        # it was caught as the start and named, and no wrong candidate was taken.
        assert mean_secs(best_record(reloaded, matmul())) == min(
            line_mean_secs(line) for line in lines[:TUNING_TRIALS]
        )
        assert any("the start record computes a wrong result" in line for line in messages)


def best_record(database, mod):
    workload = database.commit_workload(mod)
    return database.get_top_k(workload, 1)[0]


def poor_point(space):
    """The point with every inner tile factor 1 and the first categorical choices."""
    point = list(space.start)
    for axis, dimension in enumerate(space.dimensions):
        if dimension.kind in ("SamplePerfectTile", "SampleCategorical"):
            point[axis] = 0
    return tuple(point)


@tvm.testing.requires_llvm
def test_post_optimize_improves_a_poor_record(tuned, builder):
    """From a poor schedule, post-optimization commits a faster one to a memory database."""
    _, tuned_database, _ = tuned
    record = best_record(tuned_database, matmul())
    context = ms.TuneContext(mod=matmul(), target=TARGET, space_generator="post-order-apply")
    space = TraceSpace(record.trace, matmul(), context.space_generator.postprocs)
    poor = space.schedule(poor_point(space))
    # More samples per program and a lenient acceptance test: the test is about what
    # is measured and committed, and must hold on a loaded machine too.
    (measurement,) = measure_schedules([poor], TARGET, builder, runner(repeat=7))
    run_secs = measurement.run_secs
    assert run_secs and measurement.error is None
    database = ms.database.MemoryDatabase()
    workload = database.commit_workload(matmul())
    database.commit_tuning_record(
        ms.database.TuningRecord(
            poor.trace,
            workload,
            run_secs,
            TARGET,
            ms.arg_info.ArgInfo.from_entry_func(poor.mod, remove_preproc=True),
        )
    )
    recording = RecordingBuilder(builder)
    (result,) = post_optimize(
        database,
        16,
        tasks=[context],
        builder=recording,
        runner=runner(repeat=7),
        batch_size=16,
        pvalue=0.25,
    )
    # The start was measured again, and that build of it is the output check's
    # reference (not built a second time); each other distinct program was built once.
    assert result.reused == 1
    measured = [mod for mod in recording.mods if not structural_equal(mod, poor.mod)]
    assert len(recording.mods) == len(measured) + 1
    assert result.measured == len(measured) + 1
    for position, mod in enumerate(measured):
        for other in measured[:position]:
            assert not structural_equal(mod, other)
    assert result.improved
    # Every measured program was committed; the database's best is the reported
    # record, at the reported run time, a program this run built and measured.
    records = database.get_all_tuning_records()
    starts = [record for record in records if str(record.trace) == str(poor.trace)]
    assert len(starts) == 2, "the start's record, and its measurement alongside the candidates"
    assert result.before == pytest.approx(mean_secs(starts[1]))
    assert len(records) == 1 + result.measured
    valid = [mean_secs(record) for record in records if mean_secs(record) < 1e10]
    assert min(valid) == pytest.approx(result.after)
    best = database.query_schedule(matmul(), TARGET, "main")
    assert str(best.trace) == str(result.record.trace)
    assert mean_secs(best_record(database, matmul())) == pytest.approx(result.after)
    assert any(structural_equal(best.mod, mod) for mod in measured)
    assert not structural_equal(best.mod, poor.mod)
    check_matches_numpy(best.mod)

    # The same call again starts from that best record and measures nothing already
    # measured but its start, built once: timed, and the output check's reference.
    again = RecordingBuilder(builder)
    (second,) = post_optimize(
        database, 8, tasks=[context], builder=again, runner=runner(), batch_size=16
    )
    remeasured = [mod for mod in again.mods if not structural_equal(mod, best.mod)]
    assert len(again.mods) - len(remeasured) == 1
    for mod in remeasured:
        for other in measured + [poor.mod]:
            assert not structural_equal(mod, other)
    assert second.measured == len(remeasured) + 1
    assert second.reused == len(records)
    assert len(database.get_all_tuning_records()) == len(records) + second.measured


@tvm.testing.requires_llvm
def test_resume_measures_the_best_record_again(builder):
    """The best record's program is the first measured, though its pooled records are slow.

    The start was measured twice in earlier runs, once fast and once slow; a
    neighbour once, between the two.  The search starts from the best record and
    measures it again before comparing it with anything.  (A sampled schedule of
    a fixed seed: a tuned best record may compute a wrong result on some builds,
    and a wrong start is recorded as a failure.)
    """
    context, start, space = sampled_schedule(SIZE, rand_state=5)
    neighbours = (
        space.schedule(space.start[:axis] + (index,) + space.start[axis + 1 :])
        for axis, size in enumerate(space.dims)
        for index in range(size)
        if index != space.start[axis]
    )
    neighbour = next(schedule for schedule in neighbours if schedule is not None)
    database = ms.database.MemoryDatabase()
    for schedule, secs in [(start, 1e-3), (start, 4e-3), (neighbour, 2e-3)]:
        commit(database, SIZE, schedule, secs)
    (result,) = post_optimize(database, 1, tasks=[context], builder=builder, runner=runner())
    assert result.reused == 3 and result.measured == 1
    measured = database.get_all_tuning_records()[3]
    assert str(measured.trace) == str(start.trace), "the best record, measured again"
    assert result.before == pytest.approx(mean_secs(measured))


def sampled_schedule(size: int, rand_state: int):
    """The task of a ``size`` matmul, a postprocessed sample of its design space, and the
    space of that sample's decisions."""
    context = ms.TuneContext(
        mod=matmul(size), target=TARGET, space_generator="post-order-apply", rand_state=rand_state
    )
    trace = context.generate_design_space()[0].trace
    space = TraceSpace(trace, matmul(size), context.space_generator.postprocs)
    return context, space.schedule(space.start), space


def commit(database, size, schedule, secs):
    database.commit_tuning_record(
        ms.database.TuningRecord(
            schedule.trace,
            database.commit_workload(matmul(size)),
            [secs] * 3,
            TARGET,
            ms.arg_info.ArgInfo.from_entry_func(schedule.mod, remove_preproc=True),
        )
    )


def two_matmuls_searched(builder, trials, task_weights, max_trials_global, **options):
    """``post_optimize`` of a SIZE and a SIZE // 2 matmul whose records both say 100 us.

    Returns the results, the database's records, and for each record committed
    after those two the index of its workload (0: SIZE, 1: SIZE // 2).
    """
    sizes = (SIZE, SIZE // 2)
    starts = [sampled_schedule(size, rand_state=7) for size in sizes]
    database = ms.database.MemoryDatabase()
    for size, (_, schedule, _) in zip(sizes, starts):
        commit(database, size, schedule, 1e-4)
    results = post_optimize(
        database,
        trials,
        tasks=[context for context, _, _ in starts],
        task_weights=task_weights,
        max_trials_global=max_trials_global,
        builder=builder,
        runner=runner(),
        **options,
    )
    records = database.get_all_tuning_records()
    mods = [matmul(size) for size in sizes]
    order = [
        next(i for i, mod in enumerate(mods) if structural_equal(record.workload.mod, mod))
        for record in records[2:]
    ]
    return results, records, order


@tvm.testing.requires_llvm
def test_shared_budget_goes_to_the_largest_share(builder):
    """With task weights and a global budget, the weighted slowest workload is searched first.

    Both workloads' records say 100 us; the second task runs four times per
    model run, so it is searched first, with its own budget of 2; the first
    gets what is left of the global budget: 1 of 3, none of 2.
    """
    for max_trials_global, measured in ((3, [1, 2]), (2, [0, 2])):
        results, _, order = two_matmuls_searched(builder, 2, [1, 4], max_trials_global)
        assert [result.measured for result in results] == measured
        assert order == [1] * 2 + [0] * measured[0], "each start again first, then a new program"
    assert "max_trials_global" in results[0].stop_reason
    assert results[0].after == results[0].before == pytest.approx(1e-4)


@tvm.testing.requires_llvm
def test_two_passes_then_the_heaviest_again(builder):
    """With a first pass, every workload is searched briefly first (within a third of the
    global budget), then again from its fastest record by the shares after that pass.

    Trials 4, a first pass of 2 and a global budget of 9 (a first pass of at most 3):
    the workload weighted 64 gets 2, the other the first pass's last 1; then the first
    again (2 more, from its fastest record, measured again first), then the other (3
    more, its 4 in all).  In one pass, with a global budget of 6, the first workload
    takes its 4 before the other gets 2.
    """
    results, records, order = two_matmuls_searched(builder, 4, [1, 64], 9, first_pass_trials=2)
    assert order == [1, 1, 0, 1, 1, 0, 0, 0]
    assert [result.measured for result in results] == [4, 4]
    fastest = min([records[1]] + records[2:4], key=mean_run_secs)
    assert str(records[5].trace) == str(fastest.trace), "the second pass starts at the best"
    assert results[1].before == pytest.approx(mean_run_secs(records[2]))
    results, _, order = two_matmuls_searched(builder, 4, [1, 64], 6, first_pass_trials=0)
    assert order == [1, 1, 1, 1, 0, 0]
    assert [result.measured for result in results] == [2, 4]


def test_both_passes_report_as_one_search():
    """A workload searched in both passes has one result: it starts where the first search
    started, ends where the second ended, and the measurements, wrong outputs and
    schedules taken over of both add up."""

    def result(before, after, measured, **fields):
        return PostOptimizationResult("w", TARGET, before, after, measured, **fields)

    first = result(4e-4, 2e-4, 9, wrong_outputs=1, transferred=8, record="first fastest")
    later = result(2e-4, 1e-4, 5, transferred=2, record="second fastest", converged_after=3)
    both = first.followed_by(later)
    assert isinstance(both, PostOptimizationResult)
    assert (both.before, both.after, both.record) == (4e-4, 1e-4, "second fastest")
    assert (both.measured, both.wrong_outputs, both.transferred) == (14, 1, 10)
    assert both.converged_after == 12
    nothing_faster = dataclasses.replace(later, after=later.before, record=None)
    unchanged = first.followed_by(nothing_faster)
    assert (unchanged.after, unchanged.record) == (2e-4, "first fastest")


@tvm.testing.requires_llvm
def test_other_workloads_fastest_schedule_starts(builder):
    """The search measures, with its start, the other workload's fastest schedules taken over.

    The 128 matmul has two records, the 64 matmul its start; searching the 64
    matmul measures its start again and, in the same batch, the 128 matmul's
    faster record's decisions in the 64 matmul's space (with a budget of 3, a
    quarter of it is one schedule; with 8, both records, the faster first).
    Not without transfer; a second call measures nothing twice (it may take the
    128 matmul's record over again into a new point: the coordinates it does not
    take keep the new best record's values).
    """
    small = SIZE // 2
    context, start, space = sampled_schedule(small, rand_state=3)
    _, fast, _ = sampled_schedule(SIZE, rand_state=5)
    _, slow, _ = sampled_schedule(SIZE, rand_state=7)
    taken = space.point_like(fast.trace)
    assert sum(a != b for a, b in zip(taken, space.start)) > 2, "not a walk's first move"
    second = space.point_like(slow.trace)
    assert second not in (taken, space.start) and space.schedule(second) is not None

    def searched(transfer, budget=3):
        database = ms.database.MemoryDatabase()
        commit(database, SIZE, slow, 2e-4)
        commit(database, SIZE, fast, 1e-4)
        commit(database, small, start, 1e-4)
        (result,) = post_optimize(
            database, budget, tasks=[context], builder=builder, runner=runner(), transfer=transfer
        )
        committed = database.get_all_tuning_records()[3:]
        assert len(committed) == result.measured == budget
        return database, result, [space.point_of(record.trace) for record in committed]

    _, both, both_points = searched(transfer=True, budget=8)
    assert both.transferred == 2
    assert both_points[:3] == [space.start, taken, second], "its two fastest, the faster first"
    database, result, points = searched(transfer=True)
    assert result.transferred == 1
    assert points[:2] == [space.start, taken], "the start again, with the other's fastest"
    assert len(set(points)) == 3
    _, alone, alone_points = searched(transfer=False)
    assert alone.transferred == 0 and taken not in alone_points
    before = {str(record.trace) for record in database.get_all_tuning_records()}
    (again,) = post_optimize(database, 2, tasks=[context], builder=builder, runner=runner())
    assert again.transferred <= 1
    later = database.get_all_tuning_records()[6:]
    assert len(later) == again.measured == 2, "the best record again, and one new program"
    assert str(later[0].trace) in before and str(later[1].trace) not in before


def database_files(work_dir):
    paths = [f"{work_dir}/database_workload.json", f"{work_dir}/database_tuning_record.json"]
    return [open(path, "rb").read() for path in paths]


@tvm.testing.requires_llvm
@pytest.mark.parametrize(
    "case, message",
    [
        ("empty", "database is empty"),
        ("unknown", "unknown workload"),
        ("zero", "positive number of trials"),
        ("target", "target mismatch"),
        ("task_target", "target mismatch"),
        ("weights_count", "2 weights for 1 tasks"),
        ("weight_value", "must be a positive number of runs"),
        ("weights_alone", "without tasks"),
        ("global_zero", "max_trials_global must be a positive"),
    ],
)
def test_bad_input_leaves_the_database_untouched(tuned, case, message):
    """Bad input raises and leaves database untouched."""
    work_dir, _, _ = tuned
    before = database_files(work_dir)
    database = ms.database.JSONDatabase(work_dir=work_dir, allow_missing=False)
    count = len(database)
    with pytest.raises(ValueError, match=message):
        if case == "empty":
            post_optimize(ms.database.MemoryDatabase(), 4)
        elif case == "unknown":
            post_optimize(database, 4, tasks=[matmul(SIZE // 2)])
        elif case == "zero":
            post_optimize(database, 0)
        elif case == "target":
            post_optimize(database, 4, target=OTHER_TARGET)
        elif case == "weights_count":
            post_optimize(database, 4, tasks=[matmul()], task_weights=[1, 2])
        elif case == "weight_value":
            post_optimize(database, 4, tasks=[matmul()], task_weights=[0])
        elif case == "weights_alone":
            post_optimize(database, 4, task_weights=[1])
        elif case == "global_zero":
            post_optimize(database, 4, max_trials_global=0)
        else:
            context = ms.TuneContext(
                mod=matmul(), target=OTHER_TARGET, space_generator="post-order-apply"
            )
            post_optimize(database, 4, tasks=[context])
    assert len(database) == count
    assert database_files(work_dir) == before


if __name__ == "__main__":
    tvm.testing.main()
