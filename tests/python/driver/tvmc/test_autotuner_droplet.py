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
"""Test `tvmc tune --tuner droplet` end to end on a small model."""
import numpy as np

import tvm
import tvm.testing
from tvm import autotvm, relay
from tvm.driver.tvmc import frontends
from tvm.driver.tvmc.autotuner import autotvm_get_tuning_tasks
from tvm.driver.tvmc.main import _main as tvmc_main
from tvm.driver.tvmc.shape_parser import parse_shape_string

TARGET = "llvm"


def write_dense_model(path, batch=1, units=16, features=32):
    """A one-layer Relay model in the text format that tvmc loads (``.relay``)."""
    data = relay.var("data", shape=(batch, features), dtype="float32")
    weight = relay.var("weight", shape=(units, features), dtype="float32")
    module = tvm.IRModule.from_expr(relay.Function([data, weight], relay.nn.dense(data, weight)))
    path.write_text(module.astext(show_meta_data=True))
    # Both are inputs: tvmc would fill parameters with random values.
    return f"data:[{batch},{features}] weight:[{units},{features}]"


def run_tvmc(argv):
    """Run a tvmc command in this process; a failing command returns an error code."""
    # tvmc tune and tvmc run return None on success, tvmc compile returns 0.
    assert tvmc_main(argv) in (None, 0), "tvmc " + " ".join(argv)


@tvm.testing.requires_llvm
def test_tvmc_tune_droplet_then_compile_and_run(tmp_path):
    model = tmp_path / "dense.relay"
    input_shapes = write_dense_model(model)
    log = tmp_path / "droplet.log"
    trials_per_task = 4

    tune_argv = ["tune", "--target", TARGET, "--tuner", "droplet"]
    tune_argv += ["--trials", str(2 * trials_per_task), "--number", "1", "--repeat", "2"]
    tune_argv += ["--timeout", "60", "--input-shapes", input_shapes]
    run_tvmc(tune_argv + ["--output", str(log), str(model)])

    model_for_tasks = frontends.load_model(str(model), shape_dict=parse_shape_string(input_shapes))
    tasks = autotvm_get_tuning_tasks(model_for_tasks.mod, model_for_tasks.params, TARGET)
    by_task = {}
    for inp, _ in autotvm.record.load_from_file(str(log)):
        by_task.setdefault(inp.task.workload, []).append(inp.config.index)
    assert set(by_task) == {task.workload for task in tasks}, "every task is tuned"
    target = tvm.target.Target(TARGET)
    with autotvm.apply_history_best(str(log)) as history:
        for workload, indices in by_task.items():
            assert 1 <= len(indices) <= trials_per_task
            assert len(indices) == len(set(indices)), "a config was measured twice"
            assert history.query(target, workload).index in indices

    package = tmp_path / "dense.tar"
    compile_argv = ["compile", "--target", TARGET, "--tuning-records", str(log)]
    compile_argv += ["--input-shapes", input_shapes, "--output", str(package), str(model)]
    run_tvmc(compile_argv)
    assert package.is_file()

    data = np.random.uniform(size=(1, 32)).astype("float32")
    weight = np.random.uniform(size=(16, 32)).astype("float32")
    inputs, outputs = tmp_path / "inputs.npz", tmp_path / "outputs.npz"
    np.savez(inputs, data=data, weight=weight)
    run_argv = ["run", "--device", "cpu", "--inputs", str(inputs), "--outputs", str(outputs)]
    run_tvmc(run_argv + [str(package)])
    tvm.testing.assert_allclose(np.load(outputs)["output_0"], data @ weight.T, rtol=1e-5)


if __name__ == "__main__":
    tvm.testing.main()
