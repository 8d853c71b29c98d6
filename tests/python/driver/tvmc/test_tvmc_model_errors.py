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
"""`tvmc tune` on models it cannot tune: one error line naming the problem, nothing written."""

import pytest

import tvm
import tvm.testing
from tvm.driver import tvmc
from tvm.driver.tvmc import TVMCException
from tvm.driver.tvmc.main import _main as tvmc_main
from tvm.testing import onnx_networks

onnx = pytest.importorskip("onnx")

TARGET = "llvm"


def tune_failure(tmp_path, model, capsys):
    """Run `tvmc tune` on ``model``; its stderr, after checking the exit code and the folder."""
    before = sorted(path.name for path in tmp_path.iterdir())
    log = tmp_path / "records.json"
    argv = ["tune", "--target", TARGET, "--tuner", "droplet", "--trials", "2"]
    code = tvmc_main(argv + ["--output", str(log), str(model)])
    assert code == 4, "tvmc reports a TVMCException with exit code 4"
    assert sorted(path.name for path in tmp_path.iterdir()) == before, "nothing is written"
    return capsys.readouterr().err


@tvm.testing.requires_llvm
def test_tune_a_file_that_is_not_onnx(tmp_path, capsys):
    model = tmp_path / "model.onnx"
    model.write_text("this text is no ONNX model\n")
    err = tune_failure(tmp_path, model, capsys)
    assert f"Error: {model} is not an ONNX model" in err
    assert "Traceback" not in err


@tvm.testing.requires_llvm
def test_tune_an_empty_onnx_file(tmp_path, capsys):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")
    err = tune_failure(tmp_path, model, capsys)
    assert f"Error: {model} is not an ONNX model: it holds no graph" in err


@tvm.testing.requires_llvm
def test_tune_a_model_without_tunable_task(tmp_path, capsys):
    model = tmp_path / "relu.onnx"
    onnx.save(onnx_networks.single_op_model("Relu"), str(model))
    err = tune_failure(tmp_path, model, capsys)
    assert "Error: the model has no task that AutoTVM can tune for target llvm" in err
    assert "nothing was tuned or written" in err


def test_load_names_the_file(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07\x12\x04junk\xff\xff")
    with pytest.raises(TVMCException, match="model.onnx is not an ONNX model"):
        tvmc.load(str(model), model_format="onnx")


if __name__ == "__main__":
    tvm.testing.main()
