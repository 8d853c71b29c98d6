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
"""Test MetaSchedule post-optimization under faults, interruption and bad input.

Faults are injected through MetaSchedule's own builder hook: a build function
(``LocalBuilder(f_build=...)``) that, for chosen candidates, fails, sleeps past
the build timeout, or builds a failing program in their place (one that
rejects its arguments at run time, runs past the run timeout, or computes a
wrong result fast).  Interrupted runs are real processes stopped by SIGINT and
SIGKILL, then started again on the same JSON database.
"""

import logging
import re
import signal
import sys
import time

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.contrib.droplet_search import DropletSearch
from tvm.meta_schedule.post_optimization import TraceSpace, post_optimize
from tvm.meta_schedule.post_optimization.trace_space import trace_key
from tvm.meta_schedule.post_optimization.measure import measure_schedules
from tvm.meta_schedule.post_optimization.verification import OutputCheck
from tvm.meta_schedule.utils import derived_object
from tvm.testing.tuning import kill_processes, line_count, run_python, run_python_together
from tvm.tir.schedule import Schedule
from tvm.ir import structural_equal, structural_hash

# The builder's worker processes cannot import this test module by name: send
# the build function defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SIZE = 64
# Generous for a correct 64x64 matmul on a loaded 2-core machine (it builds and
# runs in well under a second; the start of a builder's or runner's worker
# process, a fresh one per batch, counts against these too); the injected slow
# builds and runs take many times longer and never finish on their own.  Each
# timeout fault costs its timeout.
BUILD_TIMEOUT = 12
RUN_TIMEOUT = 12
FAULTS = ["compile_error", "build_timeout", "run_time_error", "run_timeout", "wrong_result"]
FAILED = 1e10


def matmul(size=SIZE, reduction=None, slow_extent=None):
    """C = A @ B for square float32 matrices.

    ``reduction`` shortens the reduction (a wrong, fast kernel); ``slow_extent``
    repeats it that many times (a kernel far slower than any run timeout).
    """
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, reduction or size), name="k")
    axes = [k]
    if slow_extent:
        axes.append(te.reduce_axis((0, slow_extent), name="r"))
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=axes), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


def plain_build(mod, target, _params=None):
    """TVM's build of ``mod`` for ``target``, in the builder's worker."""
    return tvm.driver.build(mod, target=target)


class FaultyBuild:
    """A build function that injects a fault into the candidates it was given.

    Parameters
    ----------
    faults : dict
        The fault of each candidate, by the structural hash of its module.
    default : str or None
        The fault of every other candidate (None: build it correctly).
    """

    def __init__(self, faults, default=None):
        self.faults = dict(faults)
        self.default = default

    def __call__(self, mod, target, params):
        fault = self.faults.get(int(structural_hash(mod)), self.default)
        if fault == "compile_error":
            raise RuntimeError("injected compile error")
        if fault == "build_timeout":
            time.sleep(10 * BUILD_TIMEOUT)
        if fault == "run_time_error":
            # Built for larger matrices: TVM rejects the runner's arguments.
            return plain_build(matmul(2 * SIZE), target)
        if fault == "run_timeout":
            return plain_build(matmul(slow_extent=1 << 22), target)
        if fault == "wrong_result":
            # Only the first term of each dot product: fast, and wrong.
            return plain_build(matmul(reduction=1), target)
        return plain_build(mod, target)


def builder(faults=(), default=None):
    return ms.builder.LocalBuilder(
        f_build=FaultyBuild(dict(faults), default), max_workers=2, timeout_sec=BUILD_TIMEOUT
    )


def runner():
    return ms.runner.LocalRunner(
        timeout_sec=RUN_TIMEOUT,
        evaluator_config=ms.runner.EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0),
    )


def seconds(run_secs):
    return [float(getattr(secs, "value", secs)) for secs in run_secs]


def mean_secs(record):
    values = seconds(record.run_secs)
    return sum(values) / len(values)


def check_matches_numpy(mod, size=SIZE):
    """Build ``mod`` (a scheduled ``size`` matmul), run it and compare with numpy."""
    lib = plain_build(mod, TARGET)
    dev = tvm.cpu()
    a_np = np.random.uniform(size=(size, size)).astype("float32")
    b_np = np.random.uniform(size=(size, size)).astype("float32")
    a, b = tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev)
    c = tvm.nd.array(np.zeros((size, size), "float32"), dev)
    lib[lib.entry_name](a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)


class Start:
    """A measured start record of a ``size`` matmul and what the post-optimizer makes of it."""

    def __init__(self, size=SIZE):
        self.size = size
        self.context = ms.TuneContext(
            mod=matmul(size), target=TARGET, space_generator="post-order-apply", rand_state=7
        )
        postprocs = self.context.space_generator.postprocs
        design = self.context.generate_design_space()[0]
        space = TraceSpace(design.trace, matmul(size), postprocs)
        self.schedule = space.schedule(space.start)
        assert self.schedule is not None
        (measurement,) = measure_schedules([self.schedule], TARGET, builder(), runner())
        assert measurement.error is None, measurement.error
        self.run_secs = measurement.run_secs
        self.space = TraceSpace(self.schedule.trace, matmul(size), postprocs)

    def database(self, work_dir=None):
        """A database holding the workload and the start record only."""
        if work_dir is None:
            database = ms.database.MemoryDatabase()
        else:
            database = ms.database.JSONDatabase(work_dir=str(work_dir))
        workload = database.commit_workload(matmul(self.size))
        database.commit_tuning_record(
            ms.database.TuningRecord(
                self.schedule.trace,
                workload,
                self.run_secs,
                TARGET,
                ms.arg_info.ArgInfo.from_entry_func(self.schedule.mod, remove_preproc=True),
            )
        )
        return database

    def first_batch(self, size):
        """The distinct programs of the first batch, as the post-optimizer asks for it.

        Returns, for each, the structural hash of its module and its trace's text.
        """
        walk = DropletSearch(
            self.space.dims,
            self.space.start,
            is_valid=lambda point: self.space.schedule(point) is not None,
        )
        programs = {}
        for point in walk.ask(size):
            schedule = self.space.schedule(point)
            programs.setdefault(int(structural_hash(schedule.mod)), trace_key(schedule.trace))
        return list(programs.items())


@pytest.fixture(scope="module", name="start")
def fixture_start():
    return Start()


# The loggers of the post-optimizer's modules are children of this one.
POST_OPTIMIZATION_LOGGER = "tvm.meta_schedule.post_optimization"


@pytest.fixture(name="messages")
def fixture_messages(caplog):
    """The messages of the post-optimizer's loggers at INFO and above."""
    log = logging.getLogger(POST_OPTIMIZATION_LOGGER)
    level, propagate = log.level, log.propagate
    log.setLevel(logging.INFO)
    log.propagate = False  # tune_tir's logging configuration may stop propagation above it
    log.addHandler(caplog.handler)
    yield caplog
    log.removeHandler(caplog.handler)
    log.setLevel(level)
    log.propagate = propagate


def records_by_program(database):
    """The database's records by the text of their program."""
    by_program = {}
    for record in database.get_all_tuning_records():
        by_program.setdefault(trace_key(record.trace), []).append(record)
    return by_program


# ----------------------------------------------------------------------------- faults


@tvm.testing.requires_llvm
def test_faults_are_recorded_and_never_best(start, messages):
    """Measurement faults are recorded and never best."""
    batch_size = 1 + len(FAULTS) + 4
    programs = start.first_batch(batch_size)
    assert len(programs) >= 1 + len(FAULTS) + 1, "the first batch has room for correct ones"
    # programs[0] is the start, taken from its record.
    faults = {program: fault for (program, _), fault in zip(programs[1:], FAULTS)}
    keys = {fault: key for (_, key), fault in zip(programs[1:], FAULTS)}
    recorded = []

    @derived_object
    class RecordingBuilder(ms.builder.PyBuilder):
        def __init__(self):
            super().__init__()
            self.inner = builder(faults)

        def build(self, build_inputs):
            recorded.extend(int(structural_hash(inp.mod)) for inp in build_inputs)
            return self.inner.build(build_inputs)

    database = start.database()
    (result,) = post_optimize(
        database,
        batch_size + 4,
        tasks=[start.context],
        builder=RecordingBuilder(),
        runner=runner(),
        batch_size=batch_size,
    )
    # Every fault was measured in the first batch, and the search went on after it.
    assert set(faults) <= set(recorded[:batch_size])
    # The start was measured again in the first batch; that build of it is the
    # reference of the output check.
    start_program = programs[0][0]
    assert recorded[0] == start_program and recorded.count(start_program) == 1
    measured = [program for program in recorded if program != start_program]
    assert len(measured) > batch_size - 1
    assert result.measured == len(measured) + 1 == len(set(measured)) + 1 and result.reused == 1
    assert result.wrong_results == 1

    # Each faulty program is in the database once, as MetaSchedule records failures.
    by_program = records_by_program(database)
    for fault, key in keys.items():
        assert [seconds(record.run_secs) for record in by_program[key]] == [[FAILED]], fault
    assert len(database.get_all_tuning_records()) == 1 + result.measured
    start_key = trace_key(start.schedule.trace)
    assert len(by_program[start_key]) == 2, "the start: its record and its re-measurement"
    assert all(len(records) == 1 for key, records in by_program.items() if key != start_key)
    # The wrong kernel was the fastest measured, and was caught by its outputs.
    wrong = [m.getMessage() for m in messages.records if "computes a wrong" in m.getMessage()]
    assert len(wrong) == 1 and "from the start schedule's" in wrong[0]

    # None of the faulty programs is the best: the top record computes the matmul.
    (best,) = database.get_top_k(database.commit_workload(matmul()), 1)
    assert mean_secs(best) < FAILED
    assert trace_key(best.trace) not in keys.values()
    best_schedule = database.query_schedule(matmul(), TARGET, "main")
    assert int(structural_hash(best_schedule.mod)) not in faults
    check_matches_numpy(best_schedule.mod)


@tvm.testing.requires_llvm
def test_wrong_start_is_checked_by_the_workload(start, messages):
    """A start record that computes a wrong result is caught by the unscheduled workload.

    Its builds come out wrong (as a compiler defect makes them): the start is then
    no reference for the candidates, which compute right.
    """
    start_program = start.first_batch(1)[0][0]
    database = start.database()
    (result,) = post_optimize(
        database,
        6,
        tasks=[start.context],
        builder=builder({start_program: "wrong_result"}),
        runner=runner(),
        batch_size=6,
    )
    warnings = [m.getMessage() for m in messages.records if m.levelno >= logging.WARNING]
    (caught,) = [message for message in warnings if "the start record computes a wrong" in message]
    assert "from the unscheduled workload's" in caught
    # Only the start is a wrong result: the candidates match the unscheduled workload.
    assert not [message for message in warnings if "a candidate" in message]
    assert result.wrong_results == 1
    # The start's measurement in this run is recorded as a failure, and a candidate,
    # checked and correct, is the best of what this run measured.
    by_program = records_by_program(database)
    start_records = by_program[trace_key(start.schedule.trace)]
    assert [seconds(record.run_secs) for record in start_records][1:] == [[FAILED]]
    measured = [
        record
        for key, records in by_program.items()
        if key != trace_key(start.schedule.trace)
        for record in records
        if mean_secs(record) < FAILED
    ]
    assert len(measured) == result.measured - 1
    fastest = min(measured, key=mean_secs)
    schedule = Schedule(matmul())
    fastest.trace.apply_to_schedule(schedule, remove_postproc=False)
    check_matches_numpy(schedule.mod)


@tvm.testing.requires_llvm
def test_failed_records_are_not_measured_again(start):
    """A program the database records as failed (1e10) is not built again."""
    database = start.database()
    workload = database.commit_workload(matmul())
    programs = start.first_batch(4)
    failed_program = programs[1][0]
    walk = DropletSearch(
        start.space.dims,
        start.space.start,
        is_valid=lambda point: start.space.schedule(point) is not None,
    )
    failed = next(
        start.space.schedule(point)
        for point in walk.ask(4)
        if int(structural_hash(start.space.schedule(point).mod)) == failed_program
    )
    database.commit_tuning_record(
        ms.database.TuningRecord(
            failed.trace,
            workload,
            [FAILED],
            TARGET,
            ms.arg_info.ArgInfo.from_entry_func(failed.mod, remove_preproc=True),
        )
    )
    built = []

    @derived_object
    class RecordingBuilder(ms.builder.PyBuilder):
        def __init__(self):
            super().__init__()
            self.inner = builder()

        def build(self, build_inputs):
            built.extend(int(structural_hash(inp.mod)) for inp in build_inputs)
            return self.inner.build(build_inputs)

    (result,) = post_optimize(
        database,
        6,
        tasks=[start.context],
        builder=RecordingBuilder(),
        runner=runner(),
        batch_size=4,
    )
    assert result.reused == 2, "the start and the failed program come from the database"
    assert failed_program not in built
    assert len(built) >= 4


@tvm.testing.requires_llvm
def test_all_invalid_neighbourhood_ends_the_search(start, messages):
    """All invalid neighbourhood ends the search with a log line."""
    database = start.database()
    failure_limit = 2 * len(start.space.dims)
    # Every candidate fails to build; batches of a few programs.
    batch_size = 4
    (result,) = post_optimize(
        database,
        4 * failure_limit,
        tasks=[start.context],
        builder=builder(default="compile_error"),
        runner=runner(),
        batch_size=batch_size,
    )
    assert result.reused == 1
    # Every build failed, the start's again too: the search stopped at the end of the
    # batch where the run of failures reached the limit.
    failed = result.measured
    assert failure_limit <= failed < failure_limit + batch_size
    assert not result.improved and result.after == result.before
    assert "all-invalid neighbourhood" in result.stop_reason
    stops = [
        record.getMessage()
        for record in messages.records
        if record.name.startswith(POST_OPTIMIZATION_LOGGER)
        and "all-invalid neighbourhood" in record.getMessage()
    ]
    assert stops[0] == (
        f"Post-optimization of main: Droplet search finished after {failure_limit} "
        f"measurements: the last {failure_limit} measurements all failed "
        "(all-invalid neighbourhood)"
    )
    records = database.get_all_tuning_records()
    assert len(records) == 1 + result.measured
    assert sum(seconds(record.run_secs) == [FAILED] for record in records) == failed
    assert (
        trace_key(records[0].trace)
        == trace_key(records[1].trace)
        == trace_key(start.schedule.trace)
    )


def test_output_check_off_for_foreign_code(messages):
    """Candidates for a cross target (measured on remote devices) cannot be checked here."""
    cross = tvm.target.Target({"kind": "llvm", "mtriple": "riscv64-unknown-linux-gnu"})
    a = te.placeholder((SIZE,), name="A")
    b = te.compute((SIZE,), lambda i: a[i] * 2.0, name="B")
    double = tvm.IRModule({"main": te.create_prim_func([a, b]).with_attr("global_symbol", "main")})
    check = OutputCheck(Schedule(double), cross, "main", builder())
    # The check never gets to the candidate's artifact: it needs the start's outputs first.
    assert check.mismatch("no-such-artifact.tar") is None
    assert check.mismatch("no-such-artifact.tar") is None
    warnings = [
        record.getMessage() for record in messages.records if record.levelno >= logging.WARNING
    ]
    assert len(warnings) == 1
    assert "the outputs of candidates are not checked, because code for target" in warnings[0]
    assert "cannot run on this machine" in warnings[0]


# ------------------------------------------------------------------------ interruption

POST_OPTIMIZATION_SCRIPT = """
import logging
import sys

import tvm
import tvm.meta_schedule as ms
from tvm import te
from tvm.meta_schedule.post_optimization import post_optimize


def matmul(size):
    A = te.placeholder((size, size), name="A")
    B = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    C = te.compute((size, size), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C]).with_attr("global_symbol", "main")})


def build(mod, target, _params):
    return tvm.driver.build(mod, target=target)


logging.basicConfig(level=logging.INFO)
target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
size = int(sys.argv[2]) if len(sys.argv) > 2 else SIZE
# The postprocessors of the default space generator, without its schedule rules.
task = ms.TuneContext(
    mod=matmul(size),
    target=target,
    space_generator=ms.space_generator.PostOrderApply(
        sch_rules=[], postprocs="from-target", mutator_probs={}
    ),
)
database = ms.database.JSONDatabase(work_dir=sys.argv[1], allow_missing=False)
(result,) = post_optimize(
    database,
    TRIALS,
    tasks=[task],
    builder=ms.builder.LocalBuilder(f_build=build, max_workers=1, timeout_sec=60),
    runner=ms.runner.LocalRunner(
        timeout_sec=60,
        evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=2, min_repeat_ms=0),
    ),
    batch_size=BATCH,
)
print("measured", result.measured, file=sys.stderr)
print("recovered", result.recovered, file=sys.stderr)
"""

TRIALS = 9
BATCH = 3


def record_lines(work_dir):
    with open(work_dir / "database_tuning_record.json", "rb") as records:
        return records.read()


def run_script(script, work_dir, stop_signal=None, stop_after_lines=None):
    """Run the script on ``work_dir``; with ``stop_signal``, send it once the
    tuning record file has ``stop_after_lines`` lines.  Returns the return code
    and the script's stderr; processes it left behind are killed."""
    records = work_dir / "database_tuning_record.json"
    stop_when = None if stop_signal is None else lambda: line_count(records) >= stop_after_lines
    run = run_python([script, work_dir], stop_signal, stop_when)
    kill_processes(run.leftovers() if stop_signal is None else run.descendants)
    return run.returncode, run.stderr


def script_and_work_dir(tmp_path):
    """The post-optimization script, written into ``tmp_path``, and an empty work directory."""
    script = tmp_path / "post_optimize.py"
    script.write_text(
        POST_OPTIMIZATION_SCRIPT.replace("SIZE", str(SIZE))
        .replace("TRIALS", str(TRIALS))
        .replace("BATCH", str(BATCH))
    )
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    return script, work_dir


def post_optimization_records(work_dir, start_lines):
    """The post-optimization's records: every line after the start's, loaded by TVM."""
    database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    lines = record_lines(work_dir).splitlines()
    assert len(database) == len(lines)
    return lines[start_lines:]


@tvm.testing.requires_llvm
def test_interrupted_run_resumes_from_its_database(tmp_path, start):
    """Interrupted run resumes from its database."""
    script, work_dir = script_and_work_dir(tmp_path)
    start.database(work_dir)
    start_lines = record_lines(work_dir).count(b"\n")
    history = [record_lines(work_dir)]

    # Ctrl-C once the first batch (the start measured again, and new programs) is committed.
    code, stderr = run_script(script, work_dir, signal.SIGINT, start_lines + BATCH)
    # An interrupt that arrives inside a builder called through TVM's FFI may be
    # reported as an error of that call: either way the run stops with a traceback.
    assert code != 0 and "Traceback" in stderr, stderr[-3000:]
    history.append(record_lines(work_dir))
    # Killed once it committed a batch of its own (counted from what the first run
    # left: the interrupt may land after that run's second batch).
    code, stderr = run_script(script, work_dir, signal.SIGKILL, history[1].count(b"\n") + BATCH)
    assert code == -signal.SIGKILL
    history.append(record_lines(work_dir))
    # The same command again, to its end.
    code, stderr = run_script(script, work_dir)
    assert code == 0, stderr[-3000:]
    history.append(record_lines(work_dir))

    for before, after in zip(history, history[1:]):
        assert after.startswith(before), "the database was only appended to"
        assert after.endswith(b"\n")
    assert history[1] != history[0] and history[2] != history[1], "each run committed a batch"
    measured = int(re.search(r"^measured (\d+)$", stderr, re.MULTILINE).group(1))
    recovered = int(re.search(r"^recovered (\d+)$", stderr, re.MULTILINE).group(1))
    assert recovered >= 1 and 1 <= measured <= TRIALS
    records = post_optimization_records(work_dir, start_lines)
    assert len(records) >= 2 * BATCH + measured
    # No program was measured twice, but each run's start, measured again once by it.
    database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    keys = [trace_key(record.trace) for record in database.get_all_tuning_records()]
    assert len(keys) == start_lines + len(records)
    assert len(keys) - len(set(keys)) == 3, "three runs, each measured its start again"
    best = database.query_schedule(matmul(), TARGET, "main")
    check_matches_numpy(best.mod)


@tvm.testing.requires_llvm
def test_two_processes_into_one_database(tmp_path, start):
    """Two post-optimizations of different workloads append to one JSON database at once."""
    script, work_dir = script_and_work_dir(tmp_path)
    starts = [start, Start(SIZE // 2)]
    for each in starts:
        each.database(work_dir)
    before = {name: (work_dir / name).read_bytes() for name in (WORKLOADS, RECORDS)}

    runs = run_python_together([[script, work_dir, each.size] for each in starts])
    for run in runs:
        kill_processes(run.leftovers())
        assert run.returncode == 0, run.stderr[-3000:]
    measured = [run.reported("measured") for run in runs]

    # Both files were only appended to; every line loads with TVM's reader, and
    # each run's records are all there, once, under its own workload.
    assert (work_dir / WORKLOADS).read_bytes() == before[WORKLOADS]
    assert (work_dir / RECORDS).read_bytes().startswith(before[RECORDS])
    database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    assert len(database) == record_lines(work_dir).count(b"\n") == 2 + sum(measured)
    for each, count in zip(starts, measured):
        records = database.get_all_tuning_records()
        workload = database.commit_workload(matmul(each.size))
        mine = [r for r in records if structural_equal(r.workload.mod, workload.mod)]
        keys = {trace_key(record.trace) for record in mine}
        # Its start's record, the start again (measured alongside its challengers), new ones.
        assert 1 <= count == len(mine) - 1 == len(keys) <= TRIALS
        best = database.query_schedule(matmul(each.size), TARGET, "main")
        check_matches_numpy(best.mod, each.size)


# ------------------------------------------------------------------------- bad input
# Bad input is rejected before a builder or runner is created: the calls below
# leave both at their defaults.

WORKLOADS = "database_workload.json"
RECORDS = "database_tuning_record.json"


def cut_last_line(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])


def drop_final_newline(path):
    path.write_bytes(path.read_bytes()[:-1])


@tvm.testing.requires_llvm
def test_cut_record_is_named_before_appending(tmp_path, start):
    """A database loaded before its last record was cut is not appended to."""
    database = start.database(tmp_path)
    drop_final_newline(tmp_path / RECORDS)
    before = (tmp_path / RECORDS).read_bytes()
    # TVM still reads the record; appending would glue the next one to it.
    assert len(ms.database.JSONDatabase(work_dir=str(tmp_path), allow_missing=False)) == 1
    with pytest.raises(ValueError, match=f"{re.escape(str(tmp_path / RECORDS))}.* newline"):
        post_optimize(database, 4)
    assert (tmp_path / RECORDS).read_bytes() == before
    # A record cut in the middle is rejected by TVM's reader itself.
    cut_last_line(tmp_path / RECORDS)
    with pytest.raises(Exception):
        ms.database.JSONDatabase(work_dir=str(tmp_path), allow_missing=False)


@tvm.testing.requires_llvm
@pytest.mark.parametrize("trials", [0, -3, True, 2.5, "8"])
def test_bad_budget_is_named(tmp_path, start, trials):
    start.database(tmp_path)
    before = (tmp_path / RECORDS).read_bytes()
    database = ms.database.JSONDatabase(work_dir=str(tmp_path), allow_missing=False)
    with pytest.raises(ValueError, match="positive number of trials per workload, got"):
        post_optimize(database, trials)
    assert (tmp_path / RECORDS).read_bytes() == before


@pytest.mark.parametrize(
    "options, message",
    [
        ({"batch_size": 0}, "batch_size must be a positive number"),
        ({"batch_size": 1.5}, "batch_size must be a positive number"),
        ({"pvalue": 0}, "pvalue must be in"),
        ({"pvalue": 2.0}, "pvalue must be in"),
        ({"tasks": []}, "empty list of tasks"),
    ],
)
@tvm.testing.requires_llvm
def test_bad_options_are_named(tmp_path, start, options, message):
    """Bad options are named."""
    start.database(tmp_path)
    before = (tmp_path / RECORDS).read_bytes()
    database = ms.database.JSONDatabase(work_dir=str(tmp_path), allow_missing=False)
    with pytest.raises(ValueError, match=message):
        post_optimize(database, 4, **options)
    assert (tmp_path / RECORDS).read_bytes() == before


@derived_object
class RejectingPostproc(ms.postproc.PyPostproc):
    """A postprocessor that rejects every schedule."""

    def _initialize_with_tune_context(self, context):
        pass

    def apply(self, _sch):
        return False

    def clone(self):
        return RejectingPostproc()


@tvm.testing.requires_llvm
def test_best_record_that_does_not_replay_is_named(tmp_path, start):
    """A best record whose trace the task's postprocessors reject is named, nothing written."""
    database = start.database(tmp_path)
    before = (tmp_path / RECORDS).read_bytes()
    rejecting = ms.TuneContext(
        mod=matmul(),
        target=TARGET,
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=[], postprocs=[RejectingPostproc()], mutator_probs={}
        ),
    )
    with pytest.raises(ValueError, match="does not replay into a valid schedule"):
        post_optimize(database, 4, tasks=[rejecting])
    assert (tmp_path / RECORDS).read_bytes() == before


@tvm.testing.requires_llvm
def test_other_workloads_and_targets_not_used(tmp_path, start):
    """A database whose only records are for another target, next to another workload."""
    other_target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    database = start.database(tmp_path)
    before = (tmp_path / RECORDS).read_bytes()
    with pytest.raises(ValueError, match="target mismatch: the database has no successful"):
        post_optimize(database, 4, target=other_target)
    with pytest.raises(ValueError, match="unknown workload"):
        post_optimize(database, 4, tasks=[matmul(2 * SIZE)])
    assert (tmp_path / RECORDS).read_bytes() == before


if __name__ == "__main__":
    tvm.testing.main()
