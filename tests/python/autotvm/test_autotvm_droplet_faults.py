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
"""Test the Droplet Search tuner of AutoTVM under faults, interruption and bad input.

Faults are injected through TVM's own mechanisms: templates whose configs fail
to instantiate, build, run or finish in time, and a runner that checks results
against numpy.  Interrupted tuning runs are real processes stopped by SIGINT or
SIGKILL, then started again on the same log.
"""
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.testing
import tvm.topi  # pylint: disable=unused-import; tir.ir_builder indexes buffers through topi
from tvm import autotvm, te, tir
from tvm.autotvm.measure import MeasureErrorNo, MeasureInput, MeasureResult
from tvm.autotvm.measure.measure_methods import BuildResult, request_remote
from tvm.autotvm.tuner import DropletTuner
from tvm.testing.tuning import kill_processes, line_count, run_python, run_python_together

TARGET = "llvm"

# The builder's worker processes cannot import this test module by name: send
# the templates defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Generous for a correct 64x64 matmul on a loaded 2-core machine (it builds and
# runs in well under a second; the start of a builder's or runner's worker
# process counts against these too); the injected slow builds and runs take many
# times longer and never finish on their own.  Each timeout fault costs its timeout.
BUILD_TIMEOUT = 10
RUN_TIMEOUT = 10

# The values of the "fault" knob of the faulty matmul; "none" (index 0) is a correct kernel.
FAULTS = [
    "none",
    "instantiation_error",
    "invalid_schedule",
    "run_time_error",
    "wrong_result",
    "build_timeout",
    "run_timeout",
]


def failing_assertion(ins, _outs):
    """The body of a kernel whose run-time assertion fails for any non-NaN input."""
    builder = tir.ir_builder.create()
    first = builder.buffer_ptr(ins[0])[0, 0]
    message = tir.StringImm("injected run-time fault")
    builder.emit(tir.AssertStmt(tir.isnan(first), message, tir.Evaluate(0)))
    return builder.get()


@autotvm.template("test_droplet_faults/faulty_matmul")
def faulty_matmul(size, slow_extent):
    """A square matmul whose "fault" knob turns it into a failing program.

    ``slow_extent`` repeats the reduction of the "run_timeout" kernel that
    many times, far beyond any measurement timeout.
    """
    cfg = autotvm.get_config()
    cfg.define_knob("fault", FAULTS)
    cfg.define_knob("tile", [1, 4, 16])
    fault = cfg["fault"].val
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    if fault == "run_time_error":
        c = te.extern((size, size), [a, b], failing_assertion, name="C", dtype="float32")
        return te.create_schedule(c.op), [a, b, c]
    # The wrong kernel forgets the last term of each dot product.
    k = te.reduce_axis((0, size - 1 if fault == "wrong_result" else size), name="k")
    if fault == "run_timeout":
        r_axis = te.reduce_axis((0, slow_extent), name="r")
        c = te.compute(
            (size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=[r_axis, k]), name="C"
        )
    else:
        c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    y, x = s[c].op.axis
    s[c].split(x, factor=cfg["tile"].val)
    if fault == "instantiation_error":
        cfg.raise_error("injected instantiation error")
    elif fault == "invalid_schedule":
        # A GPU thread binding on a CPU target: tvm.build rejects it.
        s[c].bind(y, te.thread_axis("threadIdx.x"))
    elif fault == "build_timeout":
        time.sleep(30 * BUILD_TIMEOUT)
    return s, [a, b, c]


@autotvm.template("test_droplet_faults/fragile_matmul")
def fragile_matmul(size):
    """A square matmul where every config but the untiled origin is invalid."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    y, x = s[c].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg["tile_y"].apply(s, c, y)
    cfg["tile_x"].apply(s, c, x)
    if cfg["tile_y"].size[-1] * cfg["tile_x"].size[-1] != 1:
        cfg.raise_error("only the untiled matmul is valid")
    return s, [a, b, c]


@autotvm.template("test_droplet_faults/matmul")
def matmul(size):
    """A square matmul with one split per axis."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    s = te.create_schedule(c.op)
    y, x = s[c].op.axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_split("tile_k", s[c].op.reduce_axis[0], num_outputs=2)
    y_outer, y_inner = cfg["tile_y"].apply(s, c, y)
    x_outer, x_inner = cfg["tile_x"].apply(s, c, x)
    k_outer, k_inner = cfg["tile_k"].apply(s, c, s[c].op.reduce_axis[0])
    s[c].reorder(y_outer, x_outer, k_outer, k_inner, y_inner, x_inner)
    return s, [a, b, c]


class ReferenceCheckingRunner(autotvm.LocalRunner):
    """A LocalRunner that runs each successfully measured matmul once more, on
    fixed inputs on the measuring device, and reports a result that differs
    from numpy's as ``WRONG_ANSWER`` (the runners of this release do not check)."""

    def __init__(self, size, **kwargs):
        super().__init__(**kwargs)
        rng = np.random.default_rng(0)
        self.inputs = [rng.uniform(size=(size, size)).astype("float32") for _ in range(2)]
        self.expected = self.inputs[0] @ self.inputs[1]

    def run(self, measure_inputs, build_results):
        with tempfile.TemporaryDirectory() as kept:
            # Measuring deletes the built libraries: keep a copy to check.
            libraries = [
                shutil.copy(build.filename, kept) if isinstance(build, BuildResult) else None
                for build in build_results
            ]
            results = super().run(measure_inputs, build_results)
            return [
                self.check(library, result) if library else result
                for library, result in zip(libraries, results)
            ]

    def check(self, library, result):
        """The measured ``result``, or a WRONG_ANSWER result when ``library`` computes wrong."""
        if result.error_no != MeasureErrorNo.NO_ERROR:
            return result
        remote = request_remote(self.key, self.host, self.port, timeout=self.timeout)
        remote.upload(library)
        name = os.path.basename(library)
        try:
            module = remote.load_module(name)
            device = remote.cpu()
            args = [tvm.nd.array(array, device) for array in self.inputs]
            args.append(tvm.nd.empty(self.expected.shape, "float32", device))
            module.get_function(module.entry_name)(*args)
            output = args[-1].numpy()
        finally:
            remote.remove(name)
            remote.remove(os.path.splitext(name)[0] + ".so")
        if np.allclose(output, self.expected, rtol=1e-4):
            return result
        error = AssertionError("the kernel's result differs from numpy's")
        return MeasureResult(
            (str(error), error), MeasureErrorNo.WRONG_ANSWER, result.all_cost, result.timestamp
        )


def measure_option(runner=None):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=BUILD_TIMEOUT),
        runner=runner or autotvm.LocalRunner(number=1, repeat=2, timeout=RUN_TIMEOUT),
    )


def collect(into):
    """A tuning callback that keeps every measured (input, result) pair, errors included."""

    def callback(_, inputs, results):
        into.extend(zip(inputs, results))

    return callback


def read_log(path):
    with open(path, "rb") as log:
        return log.read()


# ----------------------------------------------------------------------------- faults


@tvm.testing.requires_llvm
def test_faults_are_recorded_and_never_best(tmp_path):
    """Measurement faults are recorded and never best."""
    size = 64
    log = str(tmp_path / "faults.log")
    task = autotvm.task.create(
        "test_droplet_faults/faulty_matmul", args=(size, 1 << 24), target=TARGET
    )
    space = task.config_space
    assert list(space.space_map) == ["fault", "tile"]
    # One round: the origin and every point of its neighbourhood (6 faults, 2 tiles).
    round_size = 1 + (len(FAULTS) - 1) + (len(space.space_map["tile"]) - 1)
    tuner = DropletTuner(task, batch_size=round_size, start_sample=0)
    measured = []
    tuner.tune(
        n_trial=round_size,
        measure_option=measure_option(
            ReferenceCheckingRunner(size, number=1, repeat=2, timeout=RUN_TIMEOUT)
        ),
        callbacks=[collect(measured), autotvm.callback.log_to_file(log)],
    )

    def fault(config):
        return config["fault"].val

    by_fault = {}
    for inp, res in measured:
        by_fault.setdefault(fault(inp.config), []).append(res)
    assert sorted(by_fault) == sorted(FAULTS), "every fault kind was measured"
    assert all(len(results) == 1 for name, results in by_fault.items() if name != "none")
    assert len(by_fault["none"]) == len(space.space_map["tile"])
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for res in by_fault["none"])

    def error(name):
        (res,) = by_fault[name]
        return res.error_no, " ".join(str(part) for part in res.costs)

    assert error("instantiation_error")[0] == MeasureErrorNo.INSTANTIATION_ERROR
    assert "injected instantiation error" in error("instantiation_error")[1]
    assert error("invalid_schedule")[0] == MeasureErrorNo.COMPILE_HOST
    assert error("run_time_error")[0] == MeasureErrorNo.RUNTIME_DEVICE
    assert "injected run-time fault" in error("run_time_error")[1]
    assert error("wrong_result")[0] == MeasureErrorNo.WRONG_ANSWER
    assert error("build_timeout")[0] == MeasureErrorNo.BUILD_TIMEOUT
    # The RPC server ends the session at the runner's timeout, before the
    # runner's own deadline: TVM reports a run-time error saying so.
    run_timeout = error("run_timeout")
    assert run_timeout[0] == MeasureErrorNo.RUN_TIMEOUT or (
        run_timeout[0] == MeasureErrorNo.RUNTIME_DEVICE and "expired" in run_timeout[1]
    ), run_timeout

    # The log holds every measurement, failures with their error numbers.
    logged = list(autotvm.record.load_from_file(log))
    assert [inp.config.index for inp, _ in logged] == [inp.config.index for inp, _ in measured]
    assert [res.error_no for _, res in logged] == [res.error_no for _, res in measured]
    # Correct kernels were measured after the faulty ones: the search went on.
    order = [fault(inp.config) for inp, _ in measured]
    assert order.index("instantiation_error") < len(order) - 1 - order[::-1].index("none")

    # None of the faulty configs is the best, by any account.
    correct = {inp.config.index for inp, res in measured if fault(inp.config) == "none"}
    assert tuner.best_choice[0] in correct
    assert tuner.best_config.index in correct
    with autotvm.apply_history_best(log) as history:
        assert history.query(tvm.target.Target(TARGET), task.workload).index in correct
    costs = {inp.config.index: res.costs for inp, res in measured}
    assert tuner.best_choice[2] == costs[tuner.best_choice[0]]


@tvm.testing.requires_llvm
def test_all_invalid_neighbourhood_ends_the_search(tmp_path, caplog):
    """All invalid neighbourhood ends the search with a log line."""
    caplog.set_level(logging.INFO, logger="autotvm")
    log = str(tmp_path / "fragile.log")
    task = autotvm.task.create("test_droplet_faults/fragile_matmul", args=(64,), target=TARGET)
    assert task.config_space.range_length == 49
    # Rounds of one config: the search checks for a run of failures after each.
    tuner = DropletTuner(task, batch_size=1, handover=None, start_sample=0)
    tuner.tune(
        n_trial=task.config_space.range_length,
        measure_option=measure_option(),
        callbacks=[autotvm.callback.log_to_file(log)],
    )

    records = list(autotvm.record.load_from_file(log))
    failure_limit = tuner.search.failure_limit
    assert failure_limit == 2 * len(task.config_space.space_map)
    assert len(records) == 1 + failure_limit, "the search stopped after the run of failures"
    assert records[0][0].config.index == 0 and records[0][1].error_no == MeasureErrorNo.NO_ERROR
    assert all(res.error_no == MeasureErrorNo.INSTANTIATION_ERROR for _, res in records[1:])
    assert not tuner.has_next()
    assert tuner.best_choice[0] == 0
    stops = [
        record.getMessage()
        for record in caplog.records
        if record.name == "autotvm" and "all-invalid neighbourhood" in record.getMessage()
    ]
    assert stops == [
        f"DropletTuner [{task.name}]: Droplet search finished after {1 + failure_limit} "
        f"measurements: the last {failure_limit} measurements all failed "
        "(all-invalid neighbourhood)"
    ]


# ------------------------------------------------------------------------ interruption

TUNING_SCRIPT = """
import logging
import os
import sys

import tvm
from tvm import autotvm, te
from tvm.autotvm.tuner import DropletTuner


@autotvm.template("test_droplet_faults/script_matmul")
def matmul(size):
    A = te.placeholder((size, size), name="A")
    B = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    C = te.compute((size, size), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = autotvm.get_config()
    for name, axis in zip(["tile_y", "tile_x", "tile_k"], [*s[C].op.axis, k]):
        cfg.define_split(name, axis, num_outputs=2)
        cfg[name].apply(s, C, axis)
    return s, [A, B, C]


logging.basicConfig(level=logging.INFO)
log = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else 64
task = autotvm.task.create("test_droplet_faults/script_matmul", args=(size,), target="llvm")
tuner = DropletTuner(task, batch_size=4)
if os.path.exists(log):
    tuner.load_history(autotvm.record.load_from_file(log))
measured = []
tuner.tune(
    n_trial=10,
    measure_option=autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=60, n_parallel=1),
        runner=autotvm.LocalRunner(number=1, repeat=2, timeout=60),
    ),
    callbacks=[
        autotvm.callback.log_to_file(log),
        lambda _, inputs, results: measured.extend(inputs),
    ],
)
print("measured", len(measured), file=sys.stderr)
"""


@tvm.testing.requires_llvm
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_run_resumes_from_its_log(tmp_path, stop_signal):
    """Interrupted run resumes from its log."""
    script = tmp_path / "tune.py"
    script.write_text(TUNING_SCRIPT)
    log = tmp_path / "tune.log"

    run = run_python([script, log], stop_signal, stop_when=lambda: line_count(log) >= 2)
    if stop_signal == signal.SIGINT:
        assert "KeyboardInterrupt" in run.stderr
        left = run.leftovers()
        kill_processes(left)
        assert not left, f"processes left behind by the interrupted run: {left}"
    else:
        # A killed run leaves the RPC tracker and server of its LocalRunner
        # running (TVM's worker processes, kept alive by their service threads).
        kill_processes(run.descendants)
        assert run.returncode == -signal.SIGKILL
    before = read_log(log)
    assert before.endswith(b"\n"), "a record was cut"
    first = [inp.config.index for inp, _ in autotvm.record.load_from_file(str(log))]
    assert 2 <= len(first) < 10, "the run was stopped before its end"
    assert len(first) == len(set(first))

    run = run_python([script, log])
    left = run.leftovers()
    kill_processes(left)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not left, f"processes left behind by the finished run: {left}"
    assert f"from {len(first)} measured configs" in run.stderr
    after = read_log(log)
    assert after.startswith(before), "the log was only appended to"
    records = list(autotvm.record.load_from_file(str(log)))
    indices = [inp.config.index for inp, _ in records]
    assert indices[: len(first)] == first
    assert len(indices) == len(set(indices)), "a config was measured twice"
    assert 1 <= len(indices) - len(first) <= 10
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)


@tvm.testing.requires_llvm
def test_two_processes_tuning_into_one_log(tmp_path):
    """Two tuning runs of different tasks append to the same log at the same time."""
    script = tmp_path / "tune.py"
    script.write_text(TUNING_SCRIPT)
    log = tmp_path / "shared.log"
    sizes = (64, 32)
    # AutoTVM's LocalRunner starts an RPC tracker and server on the first free port
    # from 9000: two started at the same instant can take the same port (TVM's
    # server binds with SO_REUSEADDR, then fails to listen).  The second run starts
    # once the first has logged a record; then both tune, and append, together.
    runs = run_python_together(
        [[script, log, size] for size in sizes], others_after=lambda: line_count(log) >= 1
    )
    for run in runs:
        kill_processes(run.leftovers())
        assert run.returncode == 0, run.stderr[-3000:]
    measured = [run.reported("measured") for run in runs]

    # Every line is a record TVM reads; each run's records are all there, once.
    lines = read_log(log).splitlines(keepends=True)
    records = list(autotvm.record.load_from_file(str(log)))
    assert len(records) == len(lines) == sum(measured)
    for size, count in zip(sizes, measured):
        workload = ("test_droplet_faults/script_matmul", size)
        mine = [(inp, res) for inp, res in records if inp.task.workload == workload]
        indices = [inp.config.index for inp, _ in mine]
        assert 1 <= len(indices) == count <= 10 and len(set(indices)) == count
        assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in mine)
        fastest = min(mine, key=lambda record: np.mean(record[1].costs))[0].config.index
        with autotvm.apply_history_best(str(log)) as history:
            assert history.query(tvm.target.Target(TARGET), workload).index == fastest


class InterruptingBuilder(autotvm.LocalBuilder):
    """A LocalBuilder interrupted (as by Ctrl-C) when its ``interrupt_at``-th build starts."""

    def __init__(self, interrupt_at, **kwargs):
        super().__init__(**kwargs)
        self.interrupt_at = interrupt_at
        self.builds = 0

    def build(self, measure_inputs):
        self.builds += 1
        if self.builds == self.interrupt_at:
            raise KeyboardInterrupt
        return super().build(measure_inputs)


@tvm.testing.requires_llvm
def test_tune_again_after_keyboard_interrupt(tmp_path):
    """Tune again after keyboard interrupt in the same process."""
    log = str(tmp_path / "matmul.log")
    task = autotvm.task.create("test_droplet_faults/matmul", args=(64,), target=TARGET)
    tuner = DropletTuner(task, batch_size=4)
    measured = []
    callbacks = [collect(measured), autotvm.callback.log_to_file(log)]
    option = autotvm.measure_option(
        builder=InterruptingBuilder(interrupt_at=2, timeout=BUILD_TIMEOUT),
        runner=autotvm.LocalRunner(number=1, repeat=2, timeout=RUN_TIMEOUT),
    )
    with pytest.raises(KeyboardInterrupt):
        tuner.tune(n_trial=8, measure_option=option, callbacks=callbacks)
    assert not autotvm.GLOBAL_SCOPE.in_tuning, "the tuning flag is reset"
    logged_before = read_log(log)
    first = [inp.config.index for inp, _ in measured]
    assert first, "one batch was measured before the interruption"
    in_flight = set(tuner._handed)  # pylint: disable=protected-access
    assert in_flight, "the interrupted batch was out for measurement"

    tuner.tune(n_trial=8, measure_option=measure_option(), callbacks=callbacks)
    indices = [inp.config.index for inp, _ in measured]
    second = indices[len(first) :]
    assert in_flight <= set(second), "the interrupted configs were measured when tuning went on"
    assert len(indices) == len(set(indices)), "a config was measured twice"
    assert read_log(log).startswith(logged_before)
    assert [inp.config.index for inp, _ in autotvm.record.load_from_file(log)] == indices


# ------------------------------------------------------------------------- bad input


def write_records(path, task, count, error_no=MeasureErrorNo.NO_ERROR):
    """Log ``count`` records of ``task`` (configs 0, 1, ...) through autotvm's log_to_file."""
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(count)]
    results = [
        MeasureResult((1e-3 * (count - i), 1e-3 * (count - i)), error_no, 0.1, time.time())
        for i in range(count)
    ]
    autotvm.callback.log_to_file(str(path))(None, inputs, results)


def matmul_task(size=64, target=TARGET):
    return autotvm.task.create("test_droplet_faults/matmul", args=(size,), target=target)


def assert_fresh(tuner):
    """The tuner has read nothing: it starts from the origin."""
    assert tuner.visited == set() and tuner.best_choice is None
    assert [config.index for config in tuner.next_batch(1)] == [0]


@pytest.mark.parametrize(
    "start_position, error, message",
    [
        ([0, 0], ValueError, r"has 2 knob indices, the config space has 3 knobs \[tile_y \(7 "),
        ([0, 0, 0, 0], ValueError, "has 4 knob indices"),
        ([0, 7, 0], ValueError, r"out of range on knob 1 \(tile_x: index 7, the knob has 7 "),
        ([0, 0, -1], ValueError, r"out of range on knob 2 \(tile_k: index -1"),
        ([0, 1.5, 0], TypeError, "integer knob indices"),
        ("000", TypeError, "sequence of integer knob indices"),
        ({"tile_q": 1}, TypeError, r"in the order of the config space \[tile_y \(7 values\), "),
        (7, TypeError, "sequence of integer knob indices"),
    ],
)
def test_bad_start_position_is_named(start_position, error, message):
    """Bad start position is named."""
    with pytest.raises(error, match=message):
        DropletTuner(matmul_task(), start_position=start_position)


def test_numpy_start_position_is_accepted():
    task = matmul_task()
    tuner = DropletTuner(task, start_position=np.array([1, 2, 3]))
    assert task.config_space.point2knob(tuner.next_batch(1)[0].index) == [1, 2, 3]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"pvalue": 0.0}, r"pvalue must be in \(0, 1\]"),
        ({"pvalue": 1.5}, r"pvalue must be in \(0, 1\]"),
        ({"batch_size": 0}, "batch_size must be a positive"),
        ({"batch_size": -4}, "batch_size must be a positive"),
        ({"failure_limit": 0}, "failure_limit must be positive"),
    ],
)
def test_bad_options_are_named(options, message):
    """Bad options are named."""
    with pytest.raises(ValueError, match=message):
        DropletTuner(matmul_task(), **options)


@pytest.mark.parametrize("n_trial", [0, -3, True, 2.5, "10"])
def test_no_budget_is_an_error_and_writes_nothing(tmp_path, monkeypatch, n_trial):
    """No budget is an error and writes nothing."""
    # Tuner.tune measures nothing for such a budget, then reports that no valid
    # schedule exists and writes an error file to the temporary directory.
    option = measure_option()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    log = tmp_path / "matmul.log"
    tuner = DropletTuner(matmul_task())
    with pytest.raises(ValueError, match=f"n_trial must be a positive integer .*got {n_trial!r}"):
        tuner.tune(
            n_trial=n_trial,
            measure_option=option,
            callbacks=[autotvm.callback.log_to_file(str(log))],
        )
    assert not list(tmp_path.iterdir())
    assert not autotvm.GLOBAL_SCOPE.in_tuning
    assert_fresh(tuner)


def test_missing_log_is_named(tmp_path):
    missing = tmp_path / "missing.log"
    tuner = DropletTuner(matmul_task())
    with pytest.raises(FileNotFoundError, match="missing.log"):
        tuner.load_history(autotvm.record.load_from_file(str(missing)))
    with pytest.raises(FileNotFoundError, match="missing.log"):
        tuner.load_history(missing)
    assert not missing.exists()
    assert_fresh(tuner)


def test_empty_log_starts_afresh(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="autotvm")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    tuner = DropletTuner(matmul_task())
    tuner.load_history(autotvm.record.load_from_file(str(empty)))
    tuner.load_history(str(empty))
    assert f"found no records to resume {tuner.task.name} from" in caplog.text
    assert read_log(empty) == b""
    assert_fresh(tuner)


def cut_last_record(path):
    """Append the first half of a record without its newline, as a crash mid-write leaves it."""
    lines = read_log(path).splitlines(keepends=True)
    with open(path, "ab") as log:
        log.write(lines[-1][: len(lines[-1]) // 2])


def insert_line(path, line_number, text):
    lines = read_log(path).splitlines(keepends=True)
    lines.insert(line_number - 1, text)
    with open(path, "wb") as log:
        log.write(b"".join(lines))


def insert_record_of_unknown_target(path, line_number):
    row = json.loads(read_log(path).splitlines()[0])
    row["input"][0] = "no_such_target -mcpu=none"
    insert_line(path, line_number, json.dumps(row).encode() + b"\n")


@pytest.mark.parametrize(
    "damage, line_number",
    [
        (cut_last_record, 4),
        (lambda path: insert_line(path, 2, b"\n"), 2),
        (lambda path: insert_line(path, 3, b"this is not a record\n"), 3),
        (lambda path: insert_line(path, 2, b'{"input": 3, "result": []}\n'), 2),
        (lambda path: insert_line(path, 2, b'["llvm", "matmul", [64], {}]\n'), 2),
        (lambda path: insert_record_of_unknown_target(path, 3), 3),
    ],
    ids=[
        "cut-last-record",
        "blank-line",
        "garbage-line",
        "not-a-record",
        "json-list",
        "bad-target",
    ],
)
def test_unreadable_log_is_named_and_left_alone(tmp_path, damage, line_number):
    """Unreadable log is named and left alone."""
    task = matmul_task()
    log = tmp_path / "matmul.log"
    write_records(log, task, 3)
    damage(log)
    damaged = read_log(log)
    # TVM's own reader rejects such a log.
    with pytest.raises((ValueError, TypeError)):
        list(autotvm.record.load_from_file(str(log)))

    tuner = DropletTuner(task)
    path = re.escape(str(log))
    named = (
        f"(^line {line_number} of the AutoTVM log {path} is not|^the AutoTVM log {path} "
        f"does not end with a newline: its last record \\(line {line_number}\\))"
    )
    with pytest.raises(ValueError, match=named):
        tuner.load_history(str(log))
    with pytest.raises(ValueError, match=f"cannot be read after {line_number - 1} records: the"):
        tuner.load_history(autotvm.record.load_from_file(str(log)))
    assert read_log(log) == damaged, "the log was not touched"
    assert_fresh(tuner)


def test_other_workloads_and_targets_are_ignored(tmp_path, caplog):
    """Records of other workloads and targets are ignored and said."""
    caplog.set_level(logging.INFO, logger="autotvm")
    log = tmp_path / "others.log"
    write_records(log, matmul_task(size=32), 3)

    # A log shared by the tasks of a model: the others' records are no cause for alarm.
    tuner = DropletTuner(matmul_task())
    tuner.load_history(str(log))
    assert "ignored 3 records of other workloads and 0 records" in caplog.text
    assert f"found no records to resume {tuner.task.name} from" in caplog.text
    assert not [record for record in caplog.records if record.levelno > logging.INFO]
    assert_fresh(tuner)

    # Records of this workload for another target only: a likely mistake, said louder.
    caplog.clear()
    write_records(log, matmul_task(target=TARGET + " -mcpu=skylake"), 2)
    tuner = DropletTuner(matmul_task())
    tuner.load_history(autotvm.record.load_from_file(str(log)))
    assert (
        "ignored 3 records of other workloads and 2 records of the same workload for other targets"
        in caplog.text
    )
    warnings = [record.getMessage() for record in caplog.records if record.levelno > logging.INFO]
    assert warnings == [
        f"DropletTuner found records of {tuner.task.name} for other targets only, "
        f"none for {tuner.task.target}: the search starts afresh"
    ]
    assert_fresh(tuner)

    # With records of its own, the tuner resumes from them and still says what it ignored.
    caplog.clear()
    write_records(log, matmul_task(), 2)
    tuner = DropletTuner(matmul_task())
    tuner.load_history(str(log))
    assert tuner.visited == {0, 1}
    assert "ignored 3 records of other workloads and 2 records" in caplog.text
    assert "from 2 measured configs (0 failed); best so far: config 1" in caplog.text


def test_records_not_in_the_space_are_skipped(tmp_path, caplog):
    """Records not in the space are skipped and said."""
    caplog.set_level(logging.INFO, logger="autotvm")
    task = matmul_task()
    log = tmp_path / "matmul.log"
    write_records(log, task, 2)
    # A config logged by another version of the template: its tile sizes differ.
    row = json.loads(read_log(log).splitlines()[0])
    row["config"]["entity"][0][2] = [-1, 3]
    with open(log, "a") as stream:
        stream.write(json.dumps(row) + "\n")

    tuner = DropletTuner(task)
    tuner.load_history(str(log))
    assert tuner.visited == {0, 1}
    assert "skipped 1 records of" in caplog.text and "not in the current space" in caplog.text


def test_history_of_other_objects_is_a_type_error():
    tuner = DropletTuner(matmul_task())
    with pytest.raises(TypeError, match=r"takes \(MeasureInput, MeasureResult\) pairs.*item 0"):
        tuner.load_history([("llvm", 0)])
    assert_fresh(tuner)


if __name__ == "__main__":
    tvm.testing.main()
