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
"""Smoke test: the modern line is a real TVM that compiles and runs kernels on this CPU."""
from pathlib import Path

import numpy as np

import tvm
import tvm.contrib.droplet_search
from tvm.script import tirx as T


def test_installed_tvm_is_the_modern_layout():
    import tvm.s_tir.meta_schedule  # pylint: disable=unused-import

    assert tvm.__version__.startswith("0.27")
    site = Path(tvm.__file__).parent
    assert Path(tvm.contrib.droplet_search.__file__).parent == site / "contrib" / "droplet_search", (
        "the project's code must be applied onto the installed TVM, not shadow it"
    )


@T.prim_func(s_tir=True)
def matmul(a: T.Buffer((64, 64), "float32"), b: T.Buffer((64, 64), "float32"), c: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * b[vk, vj]


def test_tvmscript_matmul_runs_and_matches_numpy():
    module = tvm.compile(matmul, target=tvm.target.Target({"kind": "llvm", "num-cores": 2}))
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((64, 64)).astype("float32")
    b_np = rng.standard_normal((64, 64)).astype("float32")
    c_tvm = tvm.runtime.tensor(np.zeros((64, 64), "float32"), dev)
    module(tvm.runtime.tensor(a_np, dev), tvm.runtime.tensor(b_np, dev), c_tvm)
    np.testing.assert_allclose(c_tvm.numpy(), a_np @ b_np, rtol=1e-4, atol=1e-4)
