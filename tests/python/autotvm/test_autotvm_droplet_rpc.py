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
"""Test the Droplet Search tuner of AutoTVM measuring through an RPC tracker.

A tracker and two RPC servers run on the loopback interface, as a tracker and
its devices would on a network; the tuner measures through ``autotvm.RPCRunner``.
"""
import sys

import cloudpickle
import numpy as np
import pytest

import tvm
import tvm.testing
from tvm import autotvm, te
from tvm.autotvm.measure import MeasureErrorNo
from tvm.autotvm.tuner import DropletTuner
from tvm.testing.tuning import LOOPBACK, loopback_devices

TARGET = "llvm"
SIZE = 64

# The builder's worker processes cannot import this test module by name: send
# the template defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@autotvm.template("test_droplet_rpc/matmul")
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
    cfg.define_split("tile_k", k, num_outputs=2)
    y_outer, y_inner = cfg["tile_y"].apply(s, c, y)
    x_outer, x_inner = cfg["tile_x"].apply(s, c, x)
    k_outer, k_inner = cfg["tile_k"].apply(s, c, k)
    s[c].reorder(y_outer, x_outer, k_outer, k_inner, y_inner, x_inner)
    return s, [a, b, c]


@pytest.fixture(name="devices")
def fixture_devices():
    """A tracker with two servers on the loopback interface, always shut down."""
    with loopback_devices("droplet-test", 2) as devices:
        yield devices


def rpc_measure_option(devices):
    return autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=60),
        runner=autotvm.RPCRunner(
            devices.key, LOOPBACK, devices.port, number=2, repeat=2, timeout=60, n_parallel=2
        ),
    )


def matmul_task():
    return autotvm.task.create("test_droplet_rpc/matmul", args=(SIZE,), target=TARGET)


def assert_best_matches_numpy(log):
    """The best config of ``log`` applies, builds and computes the matmul."""
    target = tvm.target.Target(TARGET)
    records = [record for record in autotvm.record.load_from_file(log) if record[1].error_no == 0]
    fastest = min(records, key=lambda record: np.mean(record[1].costs))[0].config.index
    with autotvm.apply_history_best(log) as history:
        assert history.query(target, matmul_task().workload).index == fastest
        with target:
            schedule, args = matmul(SIZE)
            kernel = tvm.build(schedule, args, target=target)
    device = tvm.cpu()
    a_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    b_np = np.random.uniform(size=(SIZE, SIZE)).astype("float32")
    c = tvm.nd.empty((SIZE, SIZE), "float32", device)
    kernel(tvm.nd.array(a_np, device), tvm.nd.array(b_np, device), c)
    tvm.testing.assert_allclose(c.numpy(), a_np @ b_np, rtol=1e-5)


@tvm.testing.requires_llvm
def test_tune_through_rpc_tracker(tmp_path, devices):
    """Tune through rpc tracker."""
    log = str(tmp_path / "matmul.log")
    n_trial = 6
    tuner = DropletTuner(matmul_task())
    tuner.tune(
        n_trial=n_trial,
        measure_option=rpc_measure_option(devices),
        callbacks=[autotvm.callback.log_to_file(log)],
    )
    records = list(autotvm.record.load_from_file(log))
    indices = [inp.config.index for inp, _ in records]
    assert len(indices) == n_trial and len(set(indices)) == n_trial
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)
    assert all(len(res.costs) == 2 and min(res.costs) > 0 for _, res in records)
    assert tuner.best_choice[0] in indices
    assert_best_matches_numpy(log)
    # The runner hands its sessions back asynchronously: wait for them, with a deadline.
    devices.wait_until_free(2)

    # The records are those of local measurement: a local session resumes from
    # them and measures only new configs.
    resumed = DropletTuner(matmul_task())
    resumed.load_history(log)
    assert resumed.visited == set(indices)
    resumed.tune(
        n_trial=2,
        measure_option=autotvm.measure_option(
            builder=autotvm.LocalBuilder(timeout=60),
            runner=autotvm.LocalRunner(number=2, repeat=2, timeout=60),
        ),
        callbacks=[autotvm.callback.log_to_file(log)],
    )
    indices = [inp.config.index for inp, _ in autotvm.record.load_from_file(log)]
    assert len(indices) == n_trial + 2 and len(set(indices)) == n_trial + 2


@tvm.testing.requires_llvm
def test_tuning_goes_on_when_a_device_is_lost(tmp_path, devices):
    """Tuning goes on when a device is lost."""
    log = str(tmp_path / "matmul.log")
    n_trial = 6
    measured = []

    def lose_a_device(_, inputs, results):
        measured.extend(zip(inputs, results))
        if len(devices.servers) == 2:
            devices.lose_one()

    # Batches of two configs, whatever the number of CPUs: the device is lost mid-run.
    tuner = DropletTuner(matmul_task(), batch_size=2)
    tuner.tune(
        n_trial=n_trial,
        measure_option=rpc_measure_option(devices),
        callbacks=[lose_a_device, autotvm.callback.log_to_file(log)],
    )
    assert len(devices.servers) == 1, "a device was lost after the first batch"
    records = list(autotvm.record.load_from_file(log))
    assert [inp.config.index for inp, _ in records] == [inp.config.index for inp, _ in measured]
    assert len(records) == n_trial
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)
    assert_best_matches_numpy(log)


if __name__ == "__main__":
    tvm.testing.main()
