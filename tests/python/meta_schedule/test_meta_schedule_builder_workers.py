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
"""LocalBuilder's worker processes: new for every call, or kept across calls."""
import os
import re
import sys
from typing import List

import cloudpickle
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.meta_schedule.testing import te_workload

# The builder's worker processes cannot import this test module by name: send
# the build functions defined here by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TARGET = tvm.target.Target("llvm")


def matmul(size: int) -> tvm.IRModule:
    """C = A @ B for square float32 matrices, its size in the attribute ``test_size``."""
    func = te.create_prim_func(te_workload.matmul(size, size, size))
    func = func.with_attr("global_symbol", "main").with_attr("test_size", size)
    return tvm.IRModule({"main": func})


def recording_build(record_path: str, failing_size: int = 0):
    """A build function that appends its worker's process id to ``record_path``.

    It raises for the matmul of ``failing_size``, after recording.
    """

    def build(mod, target, _params=None):
        with open(record_path, "a", encoding="utf-8") as record:
            record.write(f"{os.getpid()}\n")
        if int(mod["main"].attrs["test_size"]) == failing_size:
            raise RuntimeError(f"the matmul of size {failing_size} does not build")
        return tvm.driver.build(mod, target=target)

    return build


def worker_ids(record_path) -> List[int]:
    """The process id of the worker of each build, in build order."""
    with open(record_path, encoding="utf-8") as record:
        return [int(line) for line in record]


def build_inputs(*sizes: int) -> List[ms.builder.BuilderInput]:
    """One builder input per matmul size, for the host."""
    return [ms.builder.BuilderInput(matmul(size), TARGET) for size in sizes]


def test_kept_workers_serve_calls_until_used_up(tmp_path):
    """Three calls, six builds, three builds per worker: two workers, three builds each."""
    record = tmp_path / "workers"
    builder = ms.builder.LocalBuilder(
        f_build=recording_build(str(record), failing_size=17),
        max_workers=1,
        timeout_sec=120,
        max_builds_per_worker=3,
    )
    results = []
    for sizes in ((16, 17), (18, 19), (20, 21)):
        results += builder.build(build_inputs(*sizes))
    errors = [result.error_msg for result in results]
    assert errors[0] is None and errors[2:] == [None] * 4
    assert "the matmul of size 17 does not build" in errors[1]
    for result in results[:1] + results[2:]:
        assert os.path.isfile(result.artifact_path)
    workers = worker_ids(record)
    first, second = workers[:3], workers[3:]
    assert len(set(first)) == 1 and len(set(second)) == 1 and first[0] != second[0]
    assert len(second) == 3


def test_by_default_each_call_has_new_workers(tmp_path):
    """Without the option, each call starts its own worker, as before."""
    record = tmp_path / "workers"
    builder = ms.builder.LocalBuilder(
        f_build=recording_build(str(record)), max_workers=1, timeout_sec=120
    )
    assert builder.max_builds_per_worker is None
    for size in (16, 17):
        (result,) = builder.build(build_inputs(size))
        assert result.error_msg is None
    first, second = worker_ids(record)
    assert first != second


@pytest.mark.parametrize("value", [0, -2, True, 1.5, "4"])
def test_max_builds_per_worker_must_be_positive(value):
    """Anything but None or a positive integer is refused, with the argument's name."""
    with pytest.raises(ValueError, match=f"max_builds_per_worker .*got {re.escape(repr(value))}"):
        ms.builder.LocalBuilder(max_builds_per_worker=value)


if __name__ == "__main__":
    tvm.testing.main()
