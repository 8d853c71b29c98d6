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
"""Workloads of the benchmarks and demos: AutoTVM templates, shapes and numpy references.

The shapes are those of the Droplet Search papers (see ``../shared/UPSTREAM.md``):
matmul N, L, M = 1000, 800, 700 and a ResNet-18 conv2d layer.
"""
import platform
from typing import List, Sequence, Tuple

import numpy as np

import tvm
from tvm import autotvm, te, topi  # pylint: disable=unused-import  (registers TOPI's x86 templates)

from benchmarks.baselines import (  # pylint: disable=unused-import
    RESNET18_CONV,
    conv2d_im2col,
    median_seconds,
    numpy_conv2d_seconds,
    numpy_matmul_seconds,
)

# Loop orders of the matmul template's inner loops (row, reduction, column).
MATMUL_ORDERS = ("ik j", "ki j", "i jk", "k ij")


def host_target_string() -> str:
    """The host CPU as an ``llvm`` target string with the triple and CPU spelled out.

    The legacy build's LLVM defaults to a riscv64 triple, and a target without
    ``-mcpu`` gets SSE-only code: both are named explicitly.  When this LLVM
    does not know the host CPU (it says ``generic``, e.g. LLVM 17 on a Zen 5),
    the host's vector features are named with ``-mattr`` instead.
    """
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    triple = f"{platform.machine()}-linux-gnu"
    if cpu != "generic":
        return f"llvm -mtriple={triple} -mcpu={cpu}"
    features = host_cpu_features(triple)
    return f"llvm -mtriple={triple}" + (f" -mattr={','.join('+' + name for name in features)}" if features else "")


def host_cpu_features(triple: str) -> List[str]:
    """Features this LLVM knows for some CPU of ``triple`` that /proc/cpuinfo lists for the host."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            flags = next(line for line in cpuinfo if line.startswith("flags")).split(":", 1)[1].split()
    except (OSError, StopIteration):
        return []

    def canonical(name: str) -> str:  # LLVM says sse4.2 and avx512vnni, Linux sse4_2 and avx512_vnni
        return name.lower().replace("_", "").replace(".", "").replace("-", "")

    host = {canonical(flag) for flag in flags}
    known = set()
    for cpu in tvm.target.codegen.llvm_get_cpu_archlist(tvm.target.Target(f"llvm -mtriple={triple}")):
        target = tvm.target.Target(f"llvm -mtriple={triple} -mcpu={cpu}")
        known.update(str(name) for name in tvm.target.codegen.llvm_get_cpu_features(target))
    return sorted(name for name in known if canonical(name) in host)


@autotvm.template("droplet_bench/matmul")
def matmul_template(rows: int, reduction: int, cols: int, dtype: str):
    """Tiled matmul ``C[rows, cols] = A[rows, reduction] @ B[reduction, cols]``.

    Knobs: a two-level split of each loop, the order of the inner loops and
    whether the innermost column loop is vectorized.
    """
    lhs = te.placeholder((rows, reduction), name="A", dtype=dtype)
    rhs = te.placeholder((reduction, cols), name="B", dtype=dtype)
    k = te.reduce_axis((0, reduction), name="k")
    out = te.compute((rows, cols), lambda i, j: te.sum(lhs[i, k] * rhs[k, j], axis=k), name="C")
    schedule = te.create_schedule(out.op)
    row, col = schedule[out].op.axis
    (red,) = schedule[out].op.reduce_axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_i", row, num_outputs=2)
    cfg.define_split("tile_j", col, num_outputs=2)
    cfg.define_split("tile_k", red, num_outputs=2)
    cfg.define_knob("order", list(range(len(MATMUL_ORDERS))))
    cfg.define_knob("vectorize", [0, 1])
    row_outer, row_inner = cfg["tile_i"].apply(schedule, out, row)
    col_outer, col_inner = cfg["tile_j"].apply(schedule, out, col)
    red_outer, red_inner = cfg["tile_k"].apply(schedule, out, red)
    inner = {"i": row_inner, "k": red_inner, "j": col_inner}
    order = MATMUL_ORDERS[cfg["order"].val].replace(" ", "")
    schedule[out].reorder(row_outer, col_outer, red_outer, *(inner[name] for name in order))
    if cfg["vectorize"].val:
        schedule[out].vectorize(inner[order[-1]])
    return schedule, [lhs, rhs, out]


def matmul_task(rows: int, reduction: int, cols: int, target: str) -> autotvm.task.Task:
    """The AutoTVM task of :func:`matmul_template` in float32."""
    return autotvm.task.create(
        "droplet_bench/matmul", args=(rows, reduction, cols, "float32"), target=target
    )


def conv2d_task(target: str, spec: dict = None) -> autotvm.task.Task:
    """TVM's own x86 ``conv2d_NCHWc`` template on a ResNet-18 layer (float32, NCHW)."""
    spec = spec or RESNET18_CONV
    data = ("TENSOR", (spec["batch"], spec["channels"], spec["size"], spec["size"]), "float32")
    kernel = ("TENSOR", (spec["filters"], spec["channels"], spec["kernel"], spec["kernel"]), "float32")
    pad = spec["pad"]
    return autotvm.task.create(
        "conv2d_NCHWc.x86",
        args=(data, kernel, (1, 1), (pad, pad, pad, pad), (1, 1), "NCHW", "NCHW", "float32"),
        target=target,
    )


def matmul_flops(shape: Sequence[int]) -> float:
    rows, reduction, cols = shape
    return 2.0 * rows * reduction * cols


def conv2d_flops(spec: dict = None) -> float:
    spec = spec or RESNET18_CONV
    out = spec["size"] + 2 * spec["pad"] - spec["kernel"] + 1
    return 2.0 * spec["batch"] * spec["filters"] * out * out * spec["channels"] * spec["kernel"] ** 2


def run_matmul_module(module, shape: Tuple[int, int, int], dev) -> Tuple[np.ndarray, np.ndarray]:
    """Run a built matmul; returns (TVM result, numpy reference)."""
    rows, reduction, cols = shape
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((rows, reduction)).astype("float32")
    rhs = rng.standard_normal((reduction, cols)).astype("float32")
    out = tvm.nd.empty((rows, cols), "float32", dev)
    module(tvm.nd.array(lhs, dev), tvm.nd.array(rhs, dev), out)
    return out.numpy(), lhs @ rhs
