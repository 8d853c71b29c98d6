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
"""The API of the first post-optimization (apache/tvm#17104) on top of post_optimize.

``PostOpt`` keeps its constructor and ``run()``; ``Droplet``, ``Space``,
``write_file`` and ``get_time`` (and the helpers of ``post_optimization.utils``)
stay importable where they were, warn with a DeprecationWarning that names
the replacement, and keep doing what user code relied on.
"""
import json
import math
import os

import pytest

import tvm
import tvm.testing
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import post_optimization
from tvm.s_tir.meta_schedule.post_optimization import (
    Droplet,
    PostOpt,
    Space,
    TraceSpace,
    get_time,
    write_file,
)
from tvm.s_tir.meta_schedule.post_optimization.utils import clean_file, read_cfg_file
from tvm.s_tir.meta_schedule.testing import te_workload

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SIZE = 64
SLOW = 1.0  # seconds: the recorded run time of the start, slower than any candidate
WORKLOADS = "database_workload.json"
RECORDS = "database_tuning_record.json"
# TVM 0.27 gates tests on its capability probes.
requires_llvm = pytest.mark.skipif(not tvm.testing.env.has_llvm(), reason="need llvm")


def matmul(size=SIZE):
    """C = A @ B for square float32 matrices."""
    func = te.create_prim_func(te_workload.matmul(size, size, size))
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def runner():
    """A runner that repeats each measurement three times, briefly."""
    return ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=2, repeat=3, min_repeat_ms=10)
    )


@pytest.fixture(name="work_dir")
def fixture_work_dir(tmp_path):
    """A tuning work directory whose JSON database holds one record of the matmul."""
    context = ms.TuneContext(
        mod=matmul(), target=TARGET, space_generator="post-order-apply", rand_state=7
    )
    space = TraceSpace(
        context.generate_design_space()[0].trace, matmul(), context.space_generator.postprocs
    )
    schedule = space.schedule(space.start)
    database = ms.database.JSONDatabase(work_dir=str(tmp_path))
    workload = database.commit_workload(matmul())
    database.commit_tuning_record(
        ms.database.TuningRecord(
            schedule.trace,
            workload,
            [SLOW, SLOW],
            TARGET,
            ms.arg_info.ArgInfo.from_prim_func(matmul()["main"]),
        )
    )
    return tmp_path


def lines(path):
    """The JSON lines of a file."""
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def test_names_stay_and_name_their_replacement(work_dir):
    """Names stay importable and say what replaces them."""
    assert post_optimization.droplet.Droplet is Droplet
    assert post_optimization.space.Space is Space
    assert post_optimization.utils.write_file is write_file
    assert post_optimization.utils.get_time is get_time
    path = str(work_dir / "lines.json")
    calls = [
        (lambda: write_file([[0, [None, [1.0]]]], path), "commit_tuning_record"),
        (lambda: get_time(path), "get_top_k"),
        (lambda: read_cfg_file(str(work_dir / RECORDS), str(work_dir / WORKLOADS)), "get_top_k"),
        (lambda: clean_file(path), "os.remove"),
    ]
    for call, replacement in calls:
        with pytest.warns(DeprecationWarning, match=replacement):
            call()


def test_file_helpers_keep_their_behaviour(work_dir):
    """File helpers keep their behaviour."""
    path = str(work_dir / "lines.json")
    with pytest.warns(DeprecationWarning):
        assert write_file([[0, [None, [3.0]]], [0, [None, [2.0, 4.0]]]], path) == path
        write_file([[0, [None, [1.0, 2.0]]]], path, mode="a")
        assert get_time(path) == [[1.0, 2.0], [0, [None, [1.0, 2.0]]]]
        (record,) = lines(work_dir / RECORDS)
        (workload,) = lines(work_dir / WORKLOADS)
        assert read_cfg_file(str(work_dir / RECORDS), str(work_dir / WORKLOADS)) == {
            0: [[SLOW, SLOW], record, workload]
        }
        clean_file(path)
        clean_file(path)  # a missing file is no error
    assert not os.path.exists(path)


@requires_llvm
def test_post_opt_keeps_its_constructor_and_run(work_dir):
    """PostOpt(work_dir, target, trials).run() post-optimizes the work directory's database."""
    before = lines(work_dir / RECORDS)
    (result,) = PostOpt(str(work_dir), TARGET, trials=3, runner=runner()).run()
    assert 1 <= result.measured <= 3
    after = lines(work_dir / RECORDS)
    assert after[: len(before)] == before
    assert len(after) == len(before) + result.measured
    # The start was measured again (its recorded run time is no measurement of this machine).
    assert result.after <= result.before < SLOW


@requires_llvm
def test_droplet_tunes_one_record_into_its_log(work_dir):
    """Droplet tunes one record into its log."""
    (record,) = lines(work_dir / RECORDS)
    (workload,) = lines(work_dir / WORKLOADS)
    log = str(work_dir / "opt_0.log")
    with pytest.warns(DeprecationWarning, match="post_optimize"):
        droplet = Droplet(record, workload, TARGET, log)
    assert lines(log) == [record], "the record comes first, as it did"
    assert droplet.dims == droplet.space.dims and droplet.pvalue == 0.05
    droplet.tune(3)
    written = lines(log)
    assert written[0] == record and 2 <= len(written) <= 4
    with pytest.warns(DeprecationWarning):
        best_secs, best_line = get_time(log)
    assert best_line in written[1:] and max(best_secs) < SLOW
    assert droplet.best_choice[2] == best_secs
    assert droplet.space.point2knob(droplet.best_choice[0]) == droplet.best_choice[1]
    # Every line is a record of the workload: the database of the work directory takes it.
    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    for line in written[1:]:
        ms.database.TuningRecord.from_json(line[1], database.get_all_tuning_records()[0].workload)


@requires_llvm
def test_space_is_a_view_of_the_trace_space(work_dir):
    """Space is a view of the trace space."""
    (record,) = lines(work_dir / RECORDS)
    (workload,) = lines(work_dir / WORKLOADS)
    with pytest.warns(DeprecationWarning, match="TraceSpace"):
        space = Space(record, workload, TARGET)
    assert space.dims == list(space.trace_space.dims)
    assert space.total_dims == math.prod(space.dims)
    assert space.get_device_type(TARGET) == "cpu"
    for index in (0, 1, space.total_dims - 1):
        assert space.knob2point(space.point2knob(index)) == index
    assert space.template(create=True) is None
    start = space.template(space.start, create=False)
    trace = ms.database.TuningRecord.from_json(start, space.workload).trace
    assert space.trace_space.point_of(trace) == tuple(space.start)
    log = str(work_dir / "run.log")
    (run_secs,) = space.run([start], log, timeout=120)
    assert max(run_secs) < SLOW
    ((_, logged),) = lines(log)
    assert logged[1] == run_secs
    logged_trace = ms.database.TuningRecord.from_json(logged, space.workload).trace
    assert space.trace_space.point_of(logged_trace) == tuple(space.start)


def cut_last_line(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])


@requires_llvm
@pytest.mark.parametrize(
    "damage, file_name, message",
    [
        (cut_last_line, RECORDS, "does not end with a newline: its last record \\(line 1\\)"),
        (cut_last_line, WORKLOADS, "does not end with a newline: its last record \\(line 1\\)"),
        (lambda path: path.write_bytes(b"garbage\n" + path.read_bytes()), RECORDS, "line 1 of"),
        (lambda path: path.write_bytes(b""), RECORDS, "the database is empty"),
        (os.remove, RECORDS, "no tuning database in .*: missing"),
        (os.remove, WORKLOADS, "no tuning database in .*: missing"),
    ],
    ids=["cut-record", "cut-workload", "garbage", "empty", "no-records", "no-workloads"],
)
def test_post_opt_names_damaged_database_files(work_dir, damage, file_name, message):
    """Post opt names damaged database files and leaves them."""
    damage(work_dir / file_name)
    before = {path.name: path.read_bytes() for path in work_dir.iterdir()}
    with pytest.raises(ValueError, match=message) as error:
        PostOpt(str(work_dir), TARGET, trials=4).run()
    if "missing" not in message and "empty" not in message:
        assert str(work_dir / file_name) in str(error.value), "the error names the file"
    assert {path.name: path.read_bytes() for path in work_dir.iterdir()} == before


if __name__ == "__main__":
    tvm.testing.main()
