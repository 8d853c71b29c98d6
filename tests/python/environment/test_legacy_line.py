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
"""Smoke test: the legacy line is a real TVM that compiles and runs kernels on this CPU."""
import platform
from pathlib import Path

import numpy as np

import tvm
import tvm.testing
import tvm.contrib.droplet_search
from tvm import te

TARGET = "llvm"


def test_installed_tvm_has_the_legacy_packages():
    from tvm import auto_scheduler, autotvm, meta_schedule  # pylint: disable=unused-import
    from tvm.driver import tvmc  # pylint: disable=unused-import

    assert tvm.__version__.startswith("0.16")
    site = Path(tvm.__file__).parent
    assert Path(tvm.contrib.droplet_search.__file__).parent == site / "contrib" / "droplet_search", (
        "the project's code must be applied onto the installed TVM, not shadow it"
    )


def test_llvm_target_without_triple_is_the_host():
    """The environment fix for the build's riscv64 default triple (ci/tvm_env.py)."""
    host = f"{platform.machine()}-linux-gnu"
    assert tvm.target.Target("llvm").attrs["mtriple"] == host
    assert tvm.target.Target("llvm -mcpu=skylake").attrs["mtriple"] == host
    assert tvm.target.Target({"kind": "llvm", "num-cores": 2}).attrs["mtriple"] == host
    assert tvm.target.Target("llvm", host="llvm").host.attrs["mtriple"] == host
    # A triple named explicitly stays, and other kinds get none.
    explicit = tvm.target.Target("llvm -mtriple=aarch64-linux-gnu")
    assert explicit.attrs["mtriple"] == "aarch64-linux-gnu"
    assert "mtriple" not in tvm.target.Target("c").attrs


@tvm.testing.requires_llvm
def test_te_matmul_runs_and_matches_numpy():
    size = 64
    lhs = te.placeholder((size, size), name="A")
    rhs = te.placeholder((size, size), name="B")
    k = te.reduce_axis((0, size), name="k")
    out = te.compute((size, size), lambda i, j: te.sum(lhs[i, k] * rhs[k, j], axis=k), name="C")
    schedule = te.create_schedule(out.op)
    module = tvm.build(schedule, [lhs, rhs, out], target=TARGET)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((size, size)).astype("float32")
    b_np = rng.standard_normal((size, size)).astype("float32")
    c_tvm = tvm.nd.empty((size, size), "float32", dev)
    module(tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev), c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)


@tvm.testing.requires_llvm
def test_rpc_server_accepts_the_clients_load_module_call():
    """The environment fix for the build's RPC arity defect, through a real loopback server."""
    from tvm import rpc
    from tvm.contrib import utils

    size = 16
    data = te.placeholder((size,), name="x")
    doubled = te.compute((size,), lambda i: data[i] * 2.0, name="y")
    module = tvm.build(te.create_schedule(doubled.op), [data, doubled], target=TARGET)
    temp = utils.tempdir()
    path = temp.relpath("double.so")
    module.export_library(path)
    server = rpc.Server(host="127.0.0.1", port=9190, port_end=9290)
    try:
        remote = rpc.connect("127.0.0.1", server.port)
        remote.upload(path)
        loaded = remote.load_module("double.so")
        dev = remote.cpu()
        x_np = np.arange(size, dtype="float32")
        y = tvm.nd.empty((size,), "float32", dev)
        loaded(tvm.nd.array(x_np, dev), y)
        np.testing.assert_allclose(y.numpy(), 2 * x_np)
    finally:
        server.terminate()
