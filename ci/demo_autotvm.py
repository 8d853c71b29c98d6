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
"""Short real tuning demo: AutoTVM's DropletTuner on a matmul (legacy line).

Run it through the environment tool, which applies the project onto the
installed TVM first::

    python3 ci/tvm_env.py run legacy python ci/demo_autotvm.py --size 256 --trials 48

It prints the untuned kernel's GFLOPS, then the best GFLOPS DropletTuner found,
after checking the tuned kernel against numpy.
"""
import argparse
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvm
from tvm import autotvm, te


def host_target() -> tvm.target.Target:
    """The host CPU, named: the legacy build's LLVM defaults to another triple and to SSE."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target(f"llvm -mtriple={platform.machine()}-linux-gnu -mcpu={cpu}")


@autotvm.template("droplet_demo/matmul")
def matmul(size: int, dtype: str):
    """A tiled matmul template: three splits and a loop order."""
    lhs = te.placeholder((size, size), name="A", dtype=dtype)
    rhs = te.placeholder((size, size), name="B", dtype=dtype)
    k = te.reduce_axis((0, size), name="k")
    out = te.compute((size, size), lambda i, j: te.sum(lhs[i, k] * rhs[k, j], axis=k), name="C")
    schedule = te.create_schedule(out.op)
    row, col = schedule[out].op.axis
    (red,) = schedule[out].op.reduce_axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_i", row, num_outputs=2)
    cfg.define_split("tile_j", col, num_outputs=2)
    cfg.define_split("tile_k", red, num_outputs=2)
    cfg.define_knob("vectorize", [0, 1])
    row_outer, row_inner = cfg["tile_i"].apply(schedule, out, row)
    col_outer, col_inner = cfg["tile_j"].apply(schedule, out, col)
    red_outer, red_inner = cfg["tile_k"].apply(schedule, out, red)
    schedule[out].reorder(row_outer, col_outer, red_outer, row_inner, red_inner, col_inner)
    if cfg["vectorize"].val:
        schedule[out].vectorize(col_inner)
    return schedule, [lhs, rhs, out]


def gflops(module, size: int, dtype: str, dev) -> float:
    """Run ``module``, check it against numpy and return its GFLOPS (median of repeats)."""
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((size, size)).astype(dtype)
    b_np = rng.standard_normal((size, size)).astype(dtype)
    args = [tvm.nd.array(a_np, dev), tvm.nd.array(b_np, dev), tvm.nd.empty((size, size), dtype, dev)]
    module(*args)
    np.testing.assert_allclose(args[2].numpy(), a_np @ b_np, rtol=1e-3, atol=1e-3)
    timer = module.time_evaluator(module.entry_name, dev, number=3, repeat=5)
    return 2.0 * size**3 / float(np.median(timer(*args).results)) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="matmul size N (N x N x N)")
    parser.add_argument("--trials", type=int, default=48, help="largest number of measurements")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("autotvm").setLevel(logging.INFO)
    dtype = "float32"
    target = host_target()
    dev = tvm.cpu()
    task = autotvm.task.create("droplet_demo/matmul", args=(args.size, dtype), target=target)
    print(f"TVM {tvm.__version__}, target {target}")
    print(f"task {task.name}{task.args}: {len(task.config_space)} configurations")

    with tvm.target.Target(target):
        schedule, tensors = task.func(*task.args)  # fallback config: the untuned program
    untuned = gflops(tvm.build(schedule, tensors, target=target), args.size, dtype, dev)

    measure = autotvm.measure_option(
        builder=autotvm.LocalBuilder(timeout=60),
        runner=autotvm.LocalRunner(number=3, repeat=3, min_repeat_ms=50, timeout=60),
    )
    with tempfile.TemporaryDirectory(prefix="droplet-demo-") as workdir:
        log = str(Path(workdir) / "matmul.log")
        tuner = autotvm.tuner.DropletTuner(task)
        start = time.time()
        tuner.tune(
            n_trial=args.trials,
            measure_option=measure,
            callbacks=[autotvm.callback.log_to_file(log)],
        )
        elapsed = time.time() - start
        with autotvm.apply_history_best(log):
            with tvm.target.Target(target):
                schedule, tensors = matmul(args.size, dtype)
                tuned = gflops(tvm.build(schedule, tensors, target=target), args.size, dtype, dev)
        measured = sum(1 for _ in open(log))
    print(f"DropletTuner: {measured} measurements in {elapsed:.1f} s")
    print(f"untuned GFLOPS:    {untuned:8.2f}")
    print(f"best tuned GFLOPS: {tuned:8.2f}  ({tuned / untuned:.1f}x, checked against numpy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
