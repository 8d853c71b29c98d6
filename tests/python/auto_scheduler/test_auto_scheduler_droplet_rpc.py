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
"""Droplet exploitation of auto-scheduler states measured through an RPC tracker.

A tracker and two RPC servers run on the loopback interface, as a tracker and
its devices would on a network; the candidates are measured through
``auto_scheduler.RPCRunner``.
"""

import numpy as np
import pytest

import tvm
import tvm.testing
from tvm import auto_scheduler, te
from tvm.auto_scheduler.droplet_log import state_key
from tvm.auto_scheduler.measure import MeasureErrorNo
from tvm.auto_scheduler.workload_registry import register_workload_tensors
from tvm.testing.tuning import LOOPBACK, loopback_devices

SIZE = 64


def host_target():
    return tvm.target.Target("llvm")


@pytest.fixture(name="devices")
def fixture_devices():
    """A tracker with two servers under one key on the loopback interface, always shut down."""
    with loopback_devices("droplet-ansor-test", 2) as devices:
        yield devices


def matmul_task():
    a = te.placeholder((SIZE, SIZE), name="A")
    b = te.placeholder((SIZE, SIZE), name="B")
    k = te.reduce_axis((0, SIZE), name="k")
    c = te.compute((SIZE, SIZE), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    dag = auto_scheduler.ComputeDAG([a, b, c])
    register_workload_tensors(dag.workload_key(), [a, b, c])
    return auto_scheduler.SearchTask(
        compute_dag=dag, workload_key=dag.workload_key(), target=host_target()
    )


def naive_state(task):
    """The loop nest i, j, k with a split of j of inner length 1: much room to improve."""
    state = task.compute_dag.get_init_state()
    output = task.compute_dag.tensors[-1]
    i, j, k = state[output].iters
    j_outer, j_inner = state.split(output, j, [1])
    state.reorder(output, [i, j_outer, k, j_inner])
    state.pragma(output, i, "auto_unroll_max_step$0")
    return state


@tvm.testing.requires_llvm
def test_exploit_through_rpc_tracker(tmp_path, devices):
    """Exploit through rpc tracker."""
    task = matmul_task()
    tuning_options = auto_scheduler.TuningOptions(
        builder=auto_scheduler.LocalBuilder(timeout=60),
        runner=auto_scheduler.RPCRunner(
            devices.key,
            LOOPBACK,
            devices.port,
            number=2,
            repeat=3,
            min_repeat_ms=10,
            timeout=60,
            n_parallel=2,
        ),
        verbose=0,
    )
    log_file = str(tmp_path / "rpc.json")
    origin = auto_scheduler.MeasureInput(task, naive_state(task))
    builds = tuning_options.builder.build([origin], 0)
    (origin_result,) = tuning_options.runner.run([origin], builds, 0)
    assert origin_result.error_no == MeasureErrorNo.NO_ERROR
    auto_scheduler.save_records(log_file, [origin], [origin_result])

    (result,) = auto_scheduler.droplet_exploit(
        log_file, host_target(), tuning_options, 8, tasks=[task], batch_size=4
    )

    records = list(auto_scheduler.load_records(log_file))
    assert len(records) == 1 + result.exploitation_trials == 9
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)
    assert all(len(res.costs) == 3 and min(c.value for c in res.costs) > 0 for _, res in records)
    keys = [state_key(inp) for inp, _ in records]
    # The origin, measured again first through the tracker, then new states only.
    assert keys[1] == keys[0] and len(set(keys[1:])) == len(keys) - 1
    assert result.improved, "longer inner j tiles beat the naive loop nest"
    best_input, _ = auto_scheduler.load_best_record(log_file, task.workload_key)
    assert state_key(best_input) != state_key(origin)
    schedule, args = task.apply_best(log_file)
    module = tvm.build(schedule, args, target=task.target)
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (SIZE, SIZE)).astype("float32") for _ in range(2))
    c = tvm.nd.empty((SIZE, SIZE), "float32")
    module(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    tvm.testing.main()
