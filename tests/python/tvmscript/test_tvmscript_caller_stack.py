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
"""The caller frames TVMScript's decorators capture (``utils.caller_stack``)."""
import importlib
import inspect
import sys
import textwrap

import numpy as np
import pytest

import tvm
import tvm.testing
from tvm.script import ir as I
from tvm.script import tirx as T
from tvm.script.parser.core import utils


def _stacks():
    """Both listings of the same stack, taken from one frame."""
    return utils.caller_stack(), inspect.stack()


def test_caller_stack_agrees_with_inspect():
    """Frame by frame: the frame, its file, line, function and current line."""
    ours, reference = _stacks()
    assert len(ours) == len(reference)
    assert ours[0].function == "_stacks"
    assert ours[1].function == "test_caller_stack_agrees_with_inspect"
    for mine, theirs in zip(ours, reference):
        assert mine.frame is theirs.frame
        assert mine.filename == theirs.filename
        assert mine.function == theirs.function
        assert mine.lineno == theirs.lineno
        assert mine.code_context == theirs.code_context
        assert mine.index == theirs.index


def test_caller_stack_in_a_module_being_imported(tmp_path, monkeypatch):
    """A prim function of a module being imported (frozen frames above it) parses."""
    (tmp_path / "caller_stack_module.py").write_text(
        textwrap.dedent(
            """
            from tvm.script import tirx as T
            from tvm.script.parser.core import utils

            FRAMES = utils.caller_stack()


            @T.prim_func
            def add_one(a: T.Buffer((8,), "float32"), b: T.Buffer((8,), "float32")):
                for i in range(8):
                    b[i] = a[i] + T.float32(1)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("caller_stack_module")
    try:
        assert isinstance(module.add_one, tvm.tirx.PrimFunc)
        frozen = [info for info in module.FRAMES if info.filename.startswith("<frozen")]
        assert frozen, "an import runs through importlib's frozen frames"
        assert all(info.code_context is None for info in frozen)
        assert module.FRAMES[0].code_context[0].strip() == "FRAMES = utils.caller_stack()"
    finally:
        sys.modules.pop("caller_stack_module", None)


def _closure_function(extent: int):
    @T.prim_func
    def fill(a: T.Buffer((extent,), "float32")):
        for i in range(extent):
            a[i] = T.float32(2)

    return fill


@I.ir_module
class _Module:
    @T.prim_func
    def main(a: T.Buffer((4,), "float32")):  # pylint: disable=no-self-argument
        for i in range(4):
            a[i] = T.float32(3)


@pytest.mark.skipif(not tvm.testing.env.has_llvm(), reason="need llvm")
def test_decorators_still_parse_and_run():
    """A prim function in a closure and one in a module class build and compute."""
    dev = tvm.cpu()
    for function, extent, value in ((_closure_function(6), 6, 2.0), (_Module["main"], 4, 3.0)):
        built = tvm.compile(function, target="llvm")
        data = tvm.runtime.tensor(np.zeros(extent, "float32"), dev)
        built(data)
        np.testing.assert_array_equal(data.numpy(), np.full(extent, value, "float32"))


if __name__ == "__main__":
    tvm.testing.main()
