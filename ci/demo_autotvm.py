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
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvm
from tvm import autotvm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.workloads import (  # pylint: disable=wrong-import-position
    host_target_string,
    matmul_flops,
    matmul_task,
    matmul_template,
    run_matmul_module,
)


def gflops(module, shape, dev) -> float:
    """Run ``module``, check it against numpy and return its GFLOPS (median of repeats)."""
    result, reference = run_matmul_module(module, shape, dev)
    np.testing.assert_allclose(result, reference, rtol=1e-3, atol=1e-3)
    rows, reduction, cols = shape
    args = [
        tvm.nd.empty((rows, reduction), "float32", dev),
        tvm.nd.empty((reduction, cols), "float32", dev),
        tvm.nd.empty((rows, cols), "float32", dev),
    ]
    timer = module.time_evaluator(module.entry_name, dev, number=3, repeat=5)
    return matmul_flops(shape) / float(np.median(timer(*args).results)) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="matmul size N (N x N x N)")
    parser.add_argument("--trials", type=int, default=48, help="largest number of measurements")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("autotvm").setLevel(logging.INFO)
    shape = (args.size, args.size, args.size)
    target = tvm.target.Target(host_target_string())
    dev = tvm.cpu()
    task = matmul_task(*shape, target)
    print(f"TVM {tvm.__version__}, target {target}")
    print(f"task {task.name}{task.args}: {len(task.config_space)} configurations")

    with tvm.target.Target(target):
        schedule, tensors = task.func(*task.args)  # fallback config: the untuned program
    untuned = gflops(tvm.build(schedule, tensors, target=target), shape, dev)

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
                schedule, tensors = matmul_template(*shape, "float32")
                tuned = gflops(tvm.build(schedule, tensors, target=target), shape, dev)
        measured = sum(1 for _ in open(log))
    print(f"DropletTuner: {measured} measurements in {elapsed:.1f} s")
    print(f"untuned GFLOPS (fallback configuration): {untuned:8.2f}")
    print(f"best tuned GFLOPS:                       {tuned:8.2f}  ({tuned / untuned:.1f}x, checked against numpy)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
