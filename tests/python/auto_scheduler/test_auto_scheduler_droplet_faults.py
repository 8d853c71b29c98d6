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
"""Droplet exploitation of auto-scheduler states under faults, interruption and bad input.

Faults are injected through TVM's own hooks: the ``build_func`` of
``auto_scheduler.LocalBuilder`` (which the builder's worker processes receive)
installs a lowering pass (``tir.add_lower_pass`` of the PassContext) that turns
chosen states into programs that fail to compile, compile forever, fail at run
time, run forever or compute a wrong result fast.  Interrupted runs are real
processes stopped by SIGINT or SIGKILL, then started again with the same command.
"""
import logging
import os
import signal
import sys
import time

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.testing
from tvm import auto_scheduler, te, tir
from tvm.auto_scheduler.measure import MeasureErrorNo
from tvm.auto_scheduler.droplet_log import state_key, steps_of
from tvm.auto_scheduler.workload_registry import register_workload_tensors
from tvm.contrib import tar
from tvm.testing.tuning import kill_processes, line_count, run_python, run_python_together

# The builder's worker processes cannot import this test module by name: send
# the build function defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SIZE = 64
# Generous for a correct 64x64 matmul on a loaded 2-core machine (it builds and
# runs in well under a second; the start of a builder's or runner's worker
# process counts against these too); the injected slow builds and runs take many
# times longer and never finish on their own.  Each timeout fault costs its timeout.
BUILD_TIMEOUT = 10
RUN_TIMEOUT = 10
UNROLL_PRAGMA = "pragma_auto_unroll_max_step"


def host_target():
    return tvm.target.Target("llvm")


def matmul_task(size=SIZE):
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    dag = auto_scheduler.ComputeDAG([a, b, c])
    register_workload_tensors(dag.workload_key(), [a, b, c])
    return auto_scheduler.SearchTask(
        compute_dag=dag, workload_key=dag.workload_key(), target=host_target()
    )


def tiled_state(task, unroll=16):
    """Splits i by [8, 4], j by [16], k by [4] and an auto-unroll pragma."""
    state = task.compute_dag.get_init_state()
    output = task.compute_dag.tensors[-1]
    i, j, k = state[output].iters
    i_outer, i_middle, i_inner = state.split(output, i, [8, 4])
    j_outer, j_inner = state.split(output, j, [16])
    k_outer, k_inner = state.split(output, k, [4])
    state.reorder(output, [i_outer, j_outer, i_middle, k_outer, k_inner, i_inner, j_inner])
    state.pragma(output, i_outer, f"auto_unroll_max_step${unroll}")
    return state


def fault_marks(func):
    """The auto-unroll value and the extents of loops ``j.inner`` and ``k.inner`` of a program."""
    marks = {}

    def visit(node):
        if isinstance(node, tir.AttrStmt) and node.attr_key == UNROLL_PRAGMA:
            marks["unroll"] = int(node.value)
        elif isinstance(node, tir.For) and node.loop_var.name in ("j.inner", "k.inner"):
            marks[node.loop_var.name.replace(".", "_")] = int(node.extent)

    tir.stmt_functor.post_order_visit(func.body, visit)
    return marks


def fault_in(plan, marks):
    """The fault ``plan`` names for a program with ``marks``: the first marked, in a fixed order."""
    for name in ("unroll", "j_inner", "k_inner"):
        if (name, marks.get(name)) in plan:
            return plan[(name, marks[name])]
    return None


class FaultInjectingBuild:
    """A ``build_func`` of ``LocalBuilder`` that injects faults into chosen programs.

    ``plan`` maps ``(mark, value)`` (see :func:`fault_marks`), or ``"*"`` for
    every program, to a fault.  When a builder process unpickles it, it enters a
    PassContext whose lowering pass rewrites the programs the plan names.
    """

    output_format = "tar"

    def __init__(self, plan):
        self.plan = dict(plan)

    def __call__(self, output, objects, _options=None):
        tar.tar(output, objects)

    def __getstate__(self):
        return {"plan": self.plan}

    def __setstate__(self, state):
        self.plan = state["plan"]
        if "tir.add_lower_pass" in tvm.transform.PassContext.current().config:
            return
        inject = tir.transform.prim_func_pass(self.inject, opt_level=0)
        tvm.transform.PassContext(config={"tir.add_lower_pass": [(1, inject)]}).__enter__()

    def fault_of(self, func):
        if "*" in self.plan:
            return self.plan["*"]
        return fault_in(self.plan, fault_marks(func))

    def inject(self, func, _mod, _ctx):
        """Rewrite ``func`` as the fault the plan names for it asks (a lowering pass)."""
        fault = self.fault_of(func)
        if fault == "compile_error":
            raise RuntimeError("injected compile error")
        if fault == "build_timeout":
            time.sleep(60 * BUILD_TIMEOUT)
        if fault == "runtime_error":
            message = tir.StringImm("injected run-time fault")
            return func.with_body(tir.AssertStmt(tir.const(False), message, func.body))
        if fault == "run_timeout":
            repeat = tir.Var("repeat", "int32")
            return func.with_body(tir.For(repeat, 0, 1 << 24, tir.ForKind.SERIAL, func.body))
        if fault == "wrong_result":
            # Computes nothing: the fastest kernel there is.
            return func.with_body(tir.Evaluate(0))
        return func


def options(builder=None, runner=None):
    return auto_scheduler.TuningOptions(
        builder=builder or auto_scheduler.LocalBuilder(timeout=BUILD_TIMEOUT),
        runner=runner
        or auto_scheduler.LocalRunner(number=2, repeat=3, min_repeat_ms=10, timeout=RUN_TIMEOUT),
        verbose=0,
    )


def measured_log(path, task, state, tuning_options):
    """A log holding one real measurement of ``state``."""
    measure_input = auto_scheduler.MeasureInput(task, state)
    builds = tuning_options.builder.build([measure_input], 0)
    (result,) = tuning_options.runner.run([measure_input], builds, 0)
    assert result.error_no == MeasureErrorNo.NO_ERROR, result.error_msg
    auto_scheduler.save_records(str(path), [measure_input], [result])
    return str(path)


def read_bytes(path):
    with open(path, "rb") as stream:
        return stream.read()


def marks_of(measure_input):
    """The auto-unroll value and inner j and k lengths of a record's state."""
    steps = steps_of(measure_input)
    (unroll,) = [int(s[3].split("$")[1]) for s in steps if s[0] == "PR"]
    _, j_split, k_split = [s for s in steps if s[0] == "SP"]
    return {"unroll": unroll, "j_inner": j_split[4][0], "k_inner": k_split[4][0]}


def assert_best_is_correct(log_file, task, size=SIZE):
    """The log's best record is a successful one and its schedule matches numpy."""
    best_input, best_result = auto_scheduler.load_best_record(log_file, task.workload_key)
    assert best_result.error_no == MeasureErrorNo.NO_ERROR
    schedule, args = task.apply_best(log_file)
    module = tvm.build(schedule, args, target=task.target)
    rng = np.random.default_rng(1)
    a, b = (rng.uniform(-1, 1, (size, size)).astype("float32") for _ in range(2))
    c = tvm.nd.empty((size, size), "float32")
    module(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    return best_input


# ------------------------------------------------------------------------ faults
FAULT_PLAN = {
    ("unroll", 0): "compile_error",
    ("unroll", 64): "runtime_error",
    ("j_inner", 32): "wrong_result",
    ("k_inner", 2): "build_timeout",
    ("k_inner", 8): "run_timeout",
}
EXPECTED_ERROR = {
    "compile_error": MeasureErrorNo.COMPILE_HOST,
    "runtime_error": MeasureErrorNo.RUNTIME_DEVICE,
    "wrong_result": MeasureErrorNo.WRONG_ANSWER,
    "build_timeout": MeasureErrorNo.BUILD_TIMEOUT,
    # The LocalRunner of this TVM catches the TimeoutError of its worker as any
    # exception: a run timeout is recorded as a run-time error naming TimeoutError.
    "run_timeout": MeasureErrorNo.RUNTIME_DEVICE,
}


def planned_fault(measure_input):
    return fault_in(FAULT_PLAN, marks_of(measure_input))


@tvm.testing.requires_llvm
def test_faults_are_recorded_and_never_best(tmp_path, caplog):
    """Measurement faults are recorded and never best."""
    caplog.set_level(logging.DEBUG, logger="auto_scheduler")
    task = matmul_task()
    tuning_options = options(
        builder=auto_scheduler.LocalBuilder(
            timeout=BUILD_TIMEOUT, build_func=FaultInjectingBuild(FAULT_PLAN)
        )
    )
    log_file = measured_log(tmp_path / "faults.json", task, tiled_state(task), tuning_options)
    before = read_bytes(log_file)

    # The first batch holds the origin, measured again, and its radius-1 neighbours (a
    # value one step smaller or larger): every fault; the second goes on.
    (result,) = auto_scheduler.droplet_exploit(
        log_file, host_target(), tuning_options, 20, tasks=[task], batch_size=16
    )

    after = read_bytes(log_file)
    assert after.startswith(before)
    records = list(auto_scheduler.load_records(log_file))[1:]
    assert len(records) == result.exploitation_trials == 20
    assert result.states_from_log == 1  # the origin, measured before
    by_fault = {}
    for measure_input, measure_result in records:
        by_fault.setdefault(planned_fault(measure_input), []).append(measure_result.error_no)
    assert sorted(by_fault, key=str) == sorted([None, *EXPECTED_ERROR], key=str)
    for fault, error_no in EXPECTED_ERROR.items():
        assert set(by_fault[fault]) == {error_no}, fault
    assert set(by_fault[None]) == {MeasureErrorNo.NO_ERROR}
    assert result.wrong_outputs == len(by_fault["wrong_result"])
    assert "injected compile error" in caplog.text and "TimeoutError" in caplog.text
    assert "computes wrong outputs" in caplog.text and "recorded as WRONG_ANSWER" in caplog.text
    # Every fault was in the first batch; the search went on with a second one.
    assert state_key(records[0][0]) == state_key(list(auto_scheduler.load_records(log_file))[0][0])
    assert {planned_fault(inp) for inp, _ in records[:16]} == {None, *EXPECTED_ERROR}
    assert any(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records[16:])
    keys = [state_key(inp) for inp, _ in records]
    assert len(set(keys)) == len(keys)

    best_input = assert_best_is_correct(log_file, task)
    assert planned_fault(best_input) is None
    if result.improved:
        assert planned_fault(result.record[0]) is None
        assert result.record[1].error_no == MeasureErrorNo.NO_ERROR


@tvm.testing.requires_llvm
def test_all_invalid_neighbourhood_ends_the_search(tmp_path, caplog):
    """All invalid neighbourhood ends the search with a log line."""
    caplog.set_level(logging.INFO, logger="auto_scheduler")
    task = matmul_task()
    log_file = measured_log(tmp_path / "invalid.json", task, tiled_state(task), options())
    failing = options(
        builder=auto_scheduler.LocalBuilder(
            timeout=BUILD_TIMEOUT, build_func=FaultInjectingBuild({"*": "compile_error"})
        )
    )
    (result,) = auto_scheduler.droplet_exploit(log_file, host_target(), failing, 40, tasks=[task])

    records = list(auto_scheduler.load_records(log_file))
    failure_limit = 2 * 5  # a radius-1 neighbourhood: four tile lengths, the unroll pragma
    failures = len(records) - 1
    # Every build fails, the origin's again too.
    assert all(res.error_no == MeasureErrorNo.COMPILE_HOST for _, res in records[1:])
    # The run of failures reaching the limit ends the search (its batch is completed),
    # long before the budget of 40.
    assert failure_limit <= failures == result.exploitation_trials < 2 * failure_limit
    assert not result.improved and "all-invalid neighbourhood" in result.stop_reason
    stops = [
        record.getMessage()
        for record in caplog.records
        if record.name == "auto_scheduler" and "all-invalid neighbourhood" in record.getMessage()
    ]
    assert stops[0].endswith(
        f"Droplet search finished after {failure_limit} measurements: the last {failure_limit} "
        "measurements all failed (all-invalid neighbourhood)"
    )
    assert steps_of(assert_best_is_correct(log_file, task)) == steps_of(records[0][0])


# ------------------------------------------------------------------ interruption
EXPLOIT_SCRIPT = """
import logging
import sys

import tvm
from tvm import auto_scheduler, te
from tvm.auto_scheduler.workload_registry import register_workload_tensors

logging.basicConfig(level=logging.INFO)
# With a size argument, only the task of that size is exploited; otherwise every task of the log.
size = int(sys.argv[2]) if len(sys.argv) > 2 else {size}
a = te.placeholder((size, size), name="A")
b = te.placeholder((size, size), name="B")
k = te.reduce_axis((0, size), name="k")
c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
dag = auto_scheduler.ComputeDAG([a, b, c])
register_workload_tensors(dag.workload_key(), [a, b, c])
options = auto_scheduler.TuningOptions(
    builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=1),
    runner=auto_scheduler.LocalRunner(number=2, repeat=2, timeout=60),
    verbose=0,
)
target = tvm.target.Target("llvm")
task = auto_scheduler.SearchTask(compute_dag=dag, workload_key=dag.workload_key(), target=target)
results = auto_scheduler.droplet_exploit(
    sys.argv[1],
    target,
    options,
    {trials},
    batch_size=3,
    tasks=[task] if len(sys.argv) > 2 else None,
)
print("exploited", sum(result.exploitation_trials for result in results), file=sys.stderr)
"""
EXPLOIT_TRIALS = 6


@pytest.fixture(scope="module", name="origin_log")
def fixture_origin_log(tmp_path_factory):
    """A log with one measured tiled matmul state."""
    task = matmul_task()
    return measured_log(
        tmp_path_factory.mktemp("origin") / "origin.json", task, tiled_state(task), options()
    )


@tvm.testing.requires_llvm
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_run_resumes_from_its_log(tmp_path, origin_log, stop_signal):
    """Interrupted run resumes from its log."""
    script = tmp_path / "exploit.py"
    script.write_text(EXPLOIT_SCRIPT.format(size=SIZE, trials=EXPLOIT_TRIALS))
    log_file = tmp_path / "tuning.json"
    log_file.write_bytes(read_bytes(origin_log))

    # Stop it once the first batch (three states) is appended.
    run = run_python([script, log_file], stop_signal, stop_when=lambda: line_count(log_file) >= 4)
    kill_processes(run.descendants)
    if stop_signal == signal.SIGINT:
        assert "KeyboardInterrupt" in run.stderr, run.stderr[-3000:]
    else:
        assert run.returncode == -signal.SIGKILL
    before = read_bytes(log_file)
    first = list(auto_scheduler.load_records(str(log_file)))
    assert 4 <= len(first) < 1 + EXPLOIT_TRIALS, "the run was stopped after a batch, before its end"

    run = run_python([script, log_file])
    kill_processes(run.leftovers())
    assert run.returncode == 0, run.stderr[-3000:]
    after = read_bytes(log_file)
    assert after.startswith(before), "the log was only appended to"
    records = list(auto_scheduler.load_records(str(log_file)))
    keys = [state_key(inp) for inp, _ in records]
    # Nothing was measured twice but each run's start, measured again by the run.
    assert len(keys) - len(set(keys)) == 2, "a state was measured twice"
    assert len(records) > len(first), "the second run measured new states"
    assert len(records) - len(first) <= EXPLOIT_TRIALS
    assert "read from the log" in run.stderr
    assert_best_is_correct(str(log_file), matmul_task())


@tvm.testing.requires_llvm
def test_two_processes_exploiting_into_one_log(tmp_path, origin_log):
    """Two exploitations of different tasks append to the same log at the same time."""
    script = tmp_path / "exploit.py"
    script.write_text(EXPLOIT_SCRIPT.format(size=SIZE, trials=EXPLOIT_TRIALS))
    log_file = tmp_path / "shared.json"
    log_file.write_bytes(read_bytes(origin_log))
    sizes = (SIZE, SIZE // 2)
    other = matmul_task(sizes[1])
    measured_log(log_file, other, tiled_state(other), options())
    before = read_bytes(log_file)

    runs = run_python_together([[script, log_file, size] for size in sizes])
    for run in runs:
        kill_processes(run.leftovers())
        assert run.returncode == 0, run.stderr[-3000:]
    exploited = [run.reported("exploited") for run in runs]

    # Every line is a record TVM reads; each run's records are all there, once.
    after = read_bytes(log_file)
    assert after.startswith(before), "the log was only appended to"
    records = list(auto_scheduler.load_records(str(log_file)))
    assert len(records) == after.count(b"\n") == 2 + sum(exploited)
    for size, count in zip(sizes, exploited):
        task = matmul_task(size)
        keys = [state_key(inp) for inp, _ in records if inp.task.workload_key == task.workload_key]
        # Its origin record, then the origin again (measured alongside its challengers)
        # and new states.
        assert 1 <= len(keys) - 1 == count <= EXPLOIT_TRIALS
        assert keys[1] == keys[0] and len(set(keys)) == len(keys) - 1
        assert_best_is_correct(str(log_file), task, size)


# ------------------------------------------------------------------------ bad input
def assert_refused(log_file, match, call):
    before = read_bytes(log_file) if os.path.exists(log_file) else None
    with pytest.raises(ValueError, match=match):
        call()
    assert (read_bytes(log_file) if os.path.exists(log_file) else None) == before


@tvm.testing.requires_llvm
def test_cut_last_record_is_refused(origin_log, tmp_path):
    """Cut last record is refused like tvm readers do."""
    log_file = tmp_path / "cut.json"
    line = read_bytes(origin_log)
    log_file.write_bytes(line + line[: len(line) // 2])
    # TVM's own readers reject such a log.
    with pytest.raises(tvm.TVMError):
        list(auto_scheduler.load_records(str(log_file)))
    assert_refused(
        str(log_file),
        r"the auto-scheduler log .*cut.json does not end with a newline: its last record "
        r"\(line 2\) was cut short",
        lambda: auto_scheduler.droplet_exploit(str(log_file), host_target(), options(), 4),
    )


@tvm.testing.requires_llvm
def test_log_without_final_newline_is_refused(origin_log, tmp_path):
    log_file = tmp_path / "unterminated.json"
    log_file.write_bytes(read_bytes(origin_log).rstrip(b"\n"))
    assert_refused(
        str(log_file),
        r"the auto-scheduler log .* does not end with a newline: its last record \(line 1\)",
        lambda: auto_scheduler.droplet_exploit(str(log_file), host_target(), options(), 4),
    )


def test_missing_log_is_refused(tmp_path):
    missing = str(tmp_path / "missing.json")
    assert_refused(
        missing,
        "missing.json does not exist",
        lambda: auto_scheduler.droplet_exploit(missing, host_target(), options(), 4),
    )
    assert not os.path.exists(missing)


@tvm.testing.requires_llvm
@pytest.mark.parametrize("budget", [0, -3, 2.5, True])
def test_bad_budgets_are_refused(origin_log, budget):
    task = matmul_task()
    assert_refused(
        origin_log,
        f"exploitation_trials must be a positive number of trials per task, got {budget!r}",
        lambda: auto_scheduler.droplet_exploit(origin_log, host_target(), options(), budget),
    )
    assert_refused(
        origin_log,
        f"exploration_trials must be a positive number of trials per task, got {budget!r}",
        lambda: auto_scheduler.explore_and_exploit([task], options(), origin_log, budget, 4),
    )


@tvm.testing.requires_llvm
def test_records_of_another_workload_are_refused(origin_log):
    """Records of another workload are refused."""
    a = te.placeholder((32, 32), name="A")
    b = te.placeholder((32, 32), name="B")
    c = te.compute((32, 32), lambda i, j: a[i, j] + b[i, j], name="C")
    dag = auto_scheduler.ComputeDAG([a, b, c])
    register_workload_tensors(dag.workload_key(), [a, b, c])
    task = auto_scheduler.SearchTask(
        compute_dag=dag, workload_key=dag.workload_key(), target=host_target()
    )
    assert_refused(
        origin_log,
        "holds no successful record of task .* for target",
        lambda: auto_scheduler.droplet_exploit(
            origin_log, host_target(), options(), 4, tasks=[task]
        ),
    )


if __name__ == "__main__":
    tvm.testing.main()
