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
"""numpy (OpenBLAS) baselines of the benchmarks' computations, on this machine.

No TVM import: both lines' benchmarks use it (the modern line has no autotvm).
"""
import time
from typing import Callable

import numpy as np

RESNET18_CONV = {"batch": 1, "channels": 64, "size": 56, "filters": 64, "kernel": 3, "pad": 1}


def median_seconds(function: Callable[[], object], repeats: int = 7, min_seconds: float = 0.05) -> float:
    """Median wall time of ``function`` over ``repeats`` batches of at least ``min_seconds``."""
    function()
    samples = []
    for _ in range(repeats):
        calls, start = 0, time.perf_counter()
        while True:
            function()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        samples.append(elapsed / calls)
    return float(np.median(samples))


def numpy_matmul_seconds(rows: int, reduction: int, cols: int) -> float:
    """Median time of the same matmul in numpy (OpenBLAS) on this machine."""
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((rows, reduction)).astype("float32")
    rhs = rng.standard_normal((reduction, cols)).astype("float32")
    return median_seconds(lambda: lhs @ rhs)


def conv2d_im2col(data: np.ndarray, kernel: np.ndarray, pad: int) -> np.ndarray:
    """Stride-1 NCHW conv2d as im2col + one OpenBLAS matmul."""
    batch, channels, height, width = data.shape
    filters, _, size, _ = kernel.shape
    padded = np.pad(data, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out_h, out_w = height + 2 * pad - size + 1, width + 2 * pad - size + 1
    windows = np.lib.stride_tricks.sliding_window_view(padded, (size, size), axis=(2, 3))
    columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(batch * out_h * out_w, -1)
    result = columns @ kernel.reshape(filters, -1).T
    return result.reshape(batch, out_h, out_w, filters).transpose(0, 3, 1, 2)


def numpy_conv2d_seconds(spec: dict = None) -> float:
    """Median time of the same conv2d in numpy (im2col + OpenBLAS) on this machine."""
    spec = spec or RESNET18_CONV
    rng = np.random.default_rng(0)
    data = rng.standard_normal(
        (spec["batch"], spec["channels"], spec["size"], spec["size"])
    ).astype("float32")
    kernel = rng.standard_normal(
        (spec["filters"], spec["channels"], spec["kernel"], spec["kernel"])
    ).astype("float32")
    return median_seconds(lambda: conv2d_im2col(data, kernel, spec["pad"]))
