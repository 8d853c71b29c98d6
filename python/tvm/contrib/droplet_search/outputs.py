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
"""Random inputs and output comparison for checking tuned kernels.

Runners time kernels without looking at what they compute, so a miscompiled or
wrongly scheduled kernel could become a task's best record.  The Droplet
integrations run candidates that could become the best on the same random
inputs as their start and compare the results with :func:`output_difference`.
"""
from typing import List, Optional, Sequence

import numpy as np

TOLERANCE = 1e-3
"""Relative tolerance: schedules may reorder floating-point reductions."""


def random_array(shape: Sequence[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """A random kernel input.

    Parameters
    ----------
    shape : Sequence[int]
        The array's shape.
    dtype : str
        Its data type.
    rng : np.random.Generator
        The source of the values.

    Returns
    -------
    array : np.ndarray
        Uniform in [-1, 1) for floats, integers in [-8, 8) (unsigned: [0, 8))
        and booleans otherwise.
    """
    shape = tuple(int(extent) for extent in shape)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype("bool")
    if dtype.startswith("uint"):
        return rng.integers(0, 8, shape).astype(dtype)
    if dtype.startswith("int"):
        return rng.integers(-8, 8, shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)


def output_difference(
    outputs: List[np.ndarray], reference: List[np.ndarray], tolerance: float = TOLERANCE
) -> Optional[str]:
    """How outputs differ from reference outputs, or None when they match.

    Parameters
    ----------
    outputs, reference : List[np.ndarray]
        The arrays to compare, in the same order.
    tolerance : float
        For floating-point arrays, the relative tolerance; the absolute
        tolerance is ``tolerance`` times the largest finite magnitude of the
        reference array.  NaN must meet NaN and an infinity the same infinity.
        Other arrays must be equal.

    Returns
    -------
    difference : Optional[str]
        A sentence describing the first mismatching array and where its values
        differ most, None when all match.
    """
    if len(outputs) != len(reference):
        return f"{len(outputs)} outputs, expected {len(reference)}"
    for index, (output, expected) in enumerate(zip(outputs, reference)):
        if output.shape != expected.shape or output.dtype != expected.dtype:
            return (
                f"output {index} is {output.dtype}{list(output.shape)}, "
                f"expected {expected.dtype}{list(expected.shape)}"
            )
        if np.issubdtype(expected.dtype, np.floating):
            finite = np.abs(expected[np.isfinite(expected)])
            scale = float(finite.max()) if finite.size else 0.0
            wrong = ~np.isclose(
                output, expected, rtol=tolerance, atol=tolerance * max(scale, 1e-30), equal_nan=True
            )
        else:
            wrong = output != expected
        if wrong.any():
            # The worst mismatch: the largest difference among the differing values,
            # a NaN or infinity against a number first.
            with np.errstate(invalid="ignore", over="ignore"):
                distance = np.abs(output.astype("float64") - expected.astype("float64"))
            distance = np.where(wrong, np.nan_to_num(distance, nan=np.inf), -1.0)
            worst = np.unravel_index(np.argmax(distance), output.shape)
            where = tuple(int(i) for i in worst)
            return (
                f"{int(wrong.sum())} of {wrong.size} values of output {index} differ "
                f"(at {where}: {output[worst].item()!r}, expected {expected[worst].item()!r})"
            )
    return None
