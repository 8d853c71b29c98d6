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
"""Test `tvmc tune --tuner droplet` end to end on a small model and on an ONNX network."""
import numpy as np
import pytest

import tvm
import tvm.testing
from tvm import autotvm, relay
from tvm.driver.tvmc import frontends
from tvm.driver.tvmc.autotuner import autotvm_get_tuning_tasks
from tvm.driver.tvmc.main import _main as tvmc_main
from tvm.testing import onnx_networks

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


def records_by_task(log):
    """Config indices of the records of each workload of an AutoTVM log."""
    by_task = {}
    for inp, _ in autotvm.record.load_from_file(str(log)):
        by_task.setdefault(inp.task.workload, []).append(inp.config.index)
    return by_task


def run_package(tmp_path, package, inputs):
    """`tvmc run` of a compiled package on ``inputs``; returns its first output."""
    inputs_file, outputs_file = tmp_path / "inputs.npz", tmp_path / f"{package.stem}-outputs.npz"
    np.savez(inputs_file, **inputs)
    run_argv = [
        "run",
        "--device",
        "cpu",
        "--inputs",
        str(inputs_file),
        "--outputs",
        str(outputs_file),
    ]
    run_tvmc(run_argv + [str(package)])
    return np.load(outputs_file)["output_0"]


@tvm.testing.requires_llvm
def test_tvmc_tune_droplet_onnx_network(tmp_path):
    """Two trials per task of a reduced ResNet-18 in ONNX, then `tvmc compile` with the records
    and `tvmc run`: the tuned network computes what the untuned one and ONNX Runtime do."""
    spec = onnx_networks.reduced("resnet18")
    model = tmp_path / "resnet18.onnx"
    onnx_networks.write_model(spec, str(model))
    loaded = frontends.load_model(str(model))
    tasks = autotvm_get_tuning_tasks(loaded.mod, loaded.params, TARGET)
    assert any(task.name.startswith("conv2d") for task in tasks), [task.name for task in tasks]
    log = tmp_path / "droplet.log"

    tune_argv = ["tune", "--target", TARGET, "--tuner", "droplet", "--trials", str(2 * len(tasks))]
    tune_argv += ["--number", "1", "--repeat", "2", "--timeout", "60"]
    run_tvmc(tune_argv + ["--output", str(log), str(model)])

    by_task = records_by_task(log)
    assert set(by_task) == {task.workload for task in tasks}, "every task is tuned"
    target = tvm.target.Target(TARGET)
    with autotvm.apply_history_best(str(log)) as history:
        for workload, indices in by_task.items():
            assert 1 <= len(indices) <= 2
            assert len(indices) == len(set(indices)), "a config was measured twice"
            assert history.query(target, workload).index in indices

    untuned, tuned = tmp_path / "untuned.tar", tmp_path / "tuned.tar"
    run_tvmc(["compile", "--target", TARGET, "--output", str(untuned), str(model)])
    compile_argv = ["compile", "--target", TARGET, "--tuning-records", str(log)]
    run_tvmc(compile_argv + ["--output", str(tuned), str(model)])
    inputs = onnx_networks.random_input(spec)
    untuned_output = run_package(tmp_path, untuned, inputs)
    tuned_output = run_package(tmp_path, tuned, inputs)
    # Other schedules sum in another order: equal up to float32 rounding.
    scale = np.abs(untuned_output).max()
    tvm.testing.assert_allclose(tuned_output, untuned_output, rtol=1e-5, atol=1e-5 * scale)
    reference = onnx_networks.onnxruntime_session(str(model)).run(None, inputs)[0]
    tvm.testing.assert_allclose(tuned_output, reference, rtol=1e-5, atol=1e-5 * scale)


@tvm.testing.requires_llvm
def test_tvmc_tune_resumes_from_its_own_records(tmp_path):
    """Tvmc tune resumes from its own records."""
    model = tmp_path / "dense.relay"
    shapes = write_dense_model(model)
    log = tmp_path / "dense.log"

    def tune(prior, output):
        argv = ["tune", "--target", TARGET, "--tuner", "droplet", "--trials", "3"]
        argv += ["--number", "1", "--repeat", "2", "--timeout", "60", "--input-shapes", shapes]
        run_tvmc(argv + ["--tuning-records", str(prior), "--output", str(output), str(model)])

    # The same command each time: a missing prior log means a fresh start.
    tune(log, log)
    before = log.read_bytes()
    first = records_by_task(log)
    assert first and all(1 <= len(indices) <= 3 for indices in first.values())

    tune(log, log)
    assert log.read_bytes().startswith(before)
    second = records_by_task(log)
    assert set(second) == set(first)
    for workload, indices in second.items():
        assert indices[: len(first[workload])] == first[workload]
        assert len(indices) > len(first[workload]), "the resumed run measured new configs"
        assert len(indices) == len(set(indices)), "a config was measured twice"

    # A damaged prior log stops tvmc before anything is tuned or written.
    corrupt = tmp_path / "corrupt.log"
    corrupt.write_bytes(before + b"{not a record\n")
    output = tmp_path / "never-written.log"
    with pytest.raises(ValueError, match="cannot be read after"):
        tune(corrupt, output)
    assert not output.exists()


if __name__ == "__main__":
    tvm.testing.main()
