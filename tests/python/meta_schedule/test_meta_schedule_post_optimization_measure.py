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
"""Measuring, checking and recording the candidates of a post-optimization."""
import os
import sys

import cloudpickle
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.meta_schedule.post_optimization import TraceSpace
from tvm.meta_schedule.testing import te_workload
from tvm.meta_schedule.post_optimization.journal import Journal, check_appendable
from tvm.meta_schedule.post_optimization.measure import measure_schedules, runner_device_type
from tvm.meta_schedule.post_optimization.programs import ProgramKey, seconds
from tvm.meta_schedule.post_optimization.verification import OutputCheck
from tvm.meta_schedule.post_optimization.workloads import FAILED_RUN_SECS

# The builder's worker processes cannot import this test module by name: send
# the build function defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SIZE = 64


def matmul(size: int = SIZE) -> tvm.IRModule:
    """C = A @ B for square float32 matrices."""
    func = te.create_prim_func(te_workload.matmul(size, size, size))
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def plain_build(mod, target, _params=None):
    """TVM's build of ``mod`` for ``target``, in the builder's worker."""
    return tvm.driver.build(mod, target=target)


@pytest.fixture(scope="module", name="schedules")
def fixture_schedules():
    """The postprocessed start schedule of a design-space trace and two of its neighbours."""
    context = ms.TuneContext(
        mod=matmul(), target=TARGET, space_generator="post-order-apply", rand_state=7
    )
    trace = context.generate_design_space()[0].trace
    space = TraceSpace(trace, matmul(), context.space_generator.postprocs)
    found = [space.schedule(space.start)]
    for axis, size in enumerate(space.dims):
        for step in (1, -1):
            if len(found) < 3 and 0 <= space.start[axis] + step < size:
                point = list(space.start)
                point[axis] += step
                schedule = space.schedule(tuple(point))
                if schedule is not None:
                    found.append(schedule)
    assert len(found) == 3
    return found


def builder():
    return ms.builder.LocalBuilder(f_build=plain_build, max_workers=1, timeout_sec=120)


def runner():
    return ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=2, repeat=2, min_repeat_ms=10)
    )


@tvm.testing.requires_llvm
def test_measure_and_inspect_a_batch(schedules):
    """Measure a batch and inspect it while the artifacts exist."""
    seen = []

    def inspect(measurements):
        seen.extend(os.path.exists(m.artifact_path) for m in measurements)
        measurements[1].fail("rejected by the inspection")

    measured = measure_schedules(schedules, TARGET, builder(), runner(), inspect=inspect)
    assert seen == [True, True, True]
    assert all(not os.path.exists(m.artifact_path) for m in measured), "artifacts are removed"
    assert len(seconds(measured[0].run_secs)) == 2 and measured[0].error is None
    assert measured[1].run_secs is None and measured[1].error == "rejected by the inspection"
    assert runner_device_type(TARGET) == "cpu"


@tvm.testing.requires_llvm
def test_output_check_accepts_equal_computation(schedules):
    """Output check accepts another schedule of the same computation."""
    check = OutputCheck(schedules[0], TARGET, "matmul", builder())
    mismatches = []

    def inspect(measurements):
        mismatches.extend(check.mismatch(m.artifact_path) for m in measurements)

    measure_schedules(schedules[1:], TARGET, builder(), runner(), inspect=inspect)
    assert mismatches == [None, None]


def test_journal_commits_measurements_and_failures(schedules, tmp_path):
    """Journal commits measurements and failures."""
    database = ms.database.MemoryDatabase()
    workload = database.commit_workload(matmul())
    journal = Journal(database, workload, TARGET)
    assert journal.records == []
    journal.commit(schedules[0], [1e-3, 2e-3])
    journal.commit(schedules[1], None)
    records = database.get_all_tuning_records()
    assert seconds(records[0].run_secs) == pytest.approx((1e-3, 2e-3))
    assert seconds(records[1].run_secs) == pytest.approx((FAILED_RUN_SECS,))
    assert journal.committed == 2
    assert len(Journal(database, workload, TARGET).records) == 2
    other = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    assert Journal(database, workload, other).records == [], "records of other targets"
    # Structurally equal modules are one program.
    assert ProgramKey(schedules[0].mod) == ProgramKey(schedules[0].copy().mod)
    assert ProgramKey(schedules[0].mod) != ProgramKey(schedules[1].mod)
    # A database file cut by a killed process is named, and left alone.
    cut = tmp_path / "database_tuning_record.json"
    cut.write_bytes(b"[0, [1]]\n[0, [")
    with pytest.raises(ValueError, match="does not end with a newline"):
        check_appendable([str(cut)])
    assert cut.read_bytes() == b"[0, [1]]\n[0, ["


if __name__ == "__main__":
    tvm.testing.main()
