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
"""Test MetaSchedule post-optimization measuring through an RPC tracker.

A tracker and two RPC servers run on the loopback interface, as a tracker and
its devices would on a network; the post-optimizer measures through
``meta_schedule.runner.RPCRunner``.
"""

import sys

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.meta_schedule.post_optimization import TraceSpace, post_optimize
from tvm.meta_schedule.post_optimization.trace_space import trace_key
from tvm.meta_schedule.post_optimization.measure import measure_schedules
from tvm.testing.tuning import LOOPBACK, loopback_devices

# The builder's worker processes cannot import this test module by name: send
# the build function defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SIZE = 64
FAILED = 1e10


def matmul(size=SIZE):
    """C = A @ B for square float32 matrices."""
    a = te.placeholder((size, size), name="A")
    b = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    c = te.compute((size, size), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


def plain_build(mod, target, _params=None):
    """TVM's build of ``mod`` for ``target``, in the builder's worker."""
    return tvm.driver.build(mod, target=target)


def builder():
    return ms.builder.LocalBuilder(f_build=plain_build, max_workers=2, timeout_sec=60)


EVALUATOR = ms.runner.EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0)


@pytest.fixture(name="devices")
def fixture_devices():
    """A tracker with two servers on the loopback interface, always shut down."""
    with loopback_devices("post-optimization-test", 2) as devices:
        yield devices


def rpc_runner(devices):
    return ms.runner.RPCRunner(
        rpc_config=ms.runner.RPCConfig(
            tracker_host=LOOPBACK,
            tracker_port=devices.port,
            tracker_key=devices.key,
            session_timeout_sec=60,
        ),
        evaluator_config=EVALUATOR,
        max_workers=2,
    )


def seconds(run_secs):
    return [float(getattr(secs, "value", secs)) for secs in run_secs]


def check_matches_numpy(mod):
    """Build ``mod`` (a scheduled matmul), run it and compare with numpy."""
    lib = plain_build(mod, TARGET)
    dev = tvm.cpu()
    a_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    b_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    a, b = tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev)
    c = tvm.nd.array(np.zeros((SIZE, SIZE), "float32"), dev)
    lib[lib.entry_name](a, b, c)
    tvm.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)


@tvm.testing.requires_llvm
def test_post_optimize_through_rpc_tracker(devices):
    """Post optimize through rpc tracker."""
    # The start: a schedule of the default design space, measured on the devices.
    context = ms.TuneContext(
        mod=matmul(), target=TARGET, space_generator="post-order-apply", rand_state=3
    )
    postprocs = context.space_generator.postprocs
    design = context.generate_design_space()[0]
    space = TraceSpace(design.trace, matmul(), postprocs)
    start = space.schedule(space.start)
    (measurement,) = measure_schedules([start], TARGET, builder(), rpc_runner(devices))
    assert measurement.error is None, measurement.error
    database = ms.database.MemoryDatabase()
    workload = database.commit_workload(matmul())
    database.commit_tuning_record(
        ms.database.TuningRecord(
            start.trace,
            workload,
            measurement.run_secs,
            TARGET,
            ms.arg_info.ArgInfo.from_entry_func(start.mod, remove_preproc=True),
        )
    )

    (result,) = post_optimize(
        database, 9, tasks=[context], builder=builder(), runner=rpc_runner(devices), batch_size=4
    )
    assert result.reused == 1 and result.measured == 9, "the start again and 8 new programs"
    assert result.wrong_results == 0
    records = database.get_all_tuning_records()
    assert len(records) == 1 + result.measured
    # Every candidate of this space is a valid program: each was measured on a device.
    for record in records:
        values = seconds(record.run_secs)
        assert len(values) == EVALUATOR.repeat and 0 < min(values) and max(values) < FAILED
    best = database.query_schedule(matmul(), TARGET, "main")
    check_matches_numpy(best.mod)
    # The runner hands its sessions back asynchronously: wait for them, with a deadline.
    devices.wait_until_free(2)

    # The records are those of local measurement: measuring locally, the same
    # call goes on from them and measures only new programs.
    local_runner = ms.runner.LocalRunner(evaluator_config=EVALUATOR)
    (again,) = post_optimize(
        database, 12, tasks=[context], builder=builder(), runner=local_runner, batch_size=4
    )
    assert again.reused >= 1
    keys = [trace_key(record.trace) for record in database.get_all_tuning_records()]
    assert len(keys) == len(records) + again.measured
    assert len(set(keys)) == len(keys) - 2, "nothing measured twice but each call's start"
    check_matches_numpy(database.query_schedule(matmul(), TARGET, "main").mod)


if __name__ == "__main__":
    tvm.testing.main()
