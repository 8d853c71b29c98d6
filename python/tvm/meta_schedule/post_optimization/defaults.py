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
"""Defaults of the post-optimizer: trial budget, builder and runner."""

import numbers
from typing import Optional, Union

from ..builder import Builder, LocalBuilder
from ..runner import EvaluatorConfig, LocalRunner, Runner

PostOptimizationBudget = Union[bool, int, None]
"""The ``post_optimization`` argument of the tuning functions: on/off or trials per workload."""

DEFAULT_TRIALS = 100
"""Measurements per workload when post-optimization is just switched on."""

BUILD_TIMEOUT_SEC = 120.0
"""Seconds a worker may spend building one candidate."""

RUN_TIMEOUT_SEC = 60.0
"""Seconds a worker may spend running one candidate."""


def default_builder(max_workers: Optional[int] = None) -> Builder:
    """A LocalBuilder with a generous build timeout, for small or loaded machines.

    Parameters
    ----------
    max_workers : Optional[int]
        The number of build processes; one per logical CPU by default.
    """
    return LocalBuilder(max_workers=max_workers, timeout_sec=BUILD_TIMEOUT_SEC)


def default_runner() -> Runner:
    """A LocalRunner that measures each candidate three times.

    Three repeats give the Welch test of the search a variance to work with;
    each repeat runs the kernel for at least 100 ms (MetaSchedule's default).
    """
    return LocalRunner(
        timeout_sec=RUN_TIMEOUT_SEC,
        evaluator_config=EvaluatorConfig(number=3, repeat=3, min_repeat_ms=100),
    )


def resolve_builder(builder: Union[str, Builder]) -> Builder:
    """The builder to measure with: ``"local"`` is :func:`default_builder`."""
    if isinstance(builder, Builder):
        return builder
    if builder == "local":
        return default_builder()
    return Builder.create(builder)


def resolve_runner(runner: Union[str, Runner]) -> Runner:
    """The runner to measure with: ``"local"`` is :func:`default_runner`."""
    if isinstance(runner, Runner):
        return runner
    if runner == "local":
        return default_runner()
    return Runner.create(runner)


def post_optimization_trials(post_optimization: PostOptimizationBudget) -> int:
    """The per-workload trial budget a ``post_optimization`` argument stands for.

    Parameters
    ----------
    post_optimization : Union[bool, int, None]
        False, None or 0: no post-optimization; True: :data:`DEFAULT_TRIALS`
        measurements per workload; a positive int: that many.

    Returns
    -------
    trials : int
        The budget, 0 when post-optimization is off.
    """
    if post_optimization is None or post_optimization is False:
        return 0
    if post_optimization is True:
        return DEFAULT_TRIALS
    if isinstance(post_optimization, numbers.Integral) and post_optimization >= 0:
        return int(post_optimization)
    raise ValueError(
        "post_optimization must be a bool or a non-negative number of trials per workload, "
        f"got {post_optimization!r}"
    )
