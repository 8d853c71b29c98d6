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
"""Measure candidate schedules through the user's builder and runner."""

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from tvm.runtime import device as runtime_device
from tvm.target import Target
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..logging import get_logger
from ..runner import Runner, RunnerInput
from ..utils import remove_build_dir

logger = get_logger(__name__)  # pylint: disable=invalid-name


def runner_device_type(target: Target) -> str:
    """The name of the device a runner opens to run code built for ``target``.

    ``cpu`` for ``llvm`` and ``c``, ``cuda`` for ``cuda``, and so on for every
    target kind with a device.
    """
    device = runtime_device(target.get_target_device_type(), 0)
    return device.MASK2STR[device.device_type]


@dataclass
class Measurement:
    """The outcome of building and running one schedule.

    Parameters
    ----------
    run_secs : Optional[list]
        The runner's measured times, None when building or running failed.
    error : Optional[str]
        Why it failed (the builder's or runner's error message).
    artifact_path : Optional[str]
        The builder's artifact; removed when :func:`measure_schedules` returns.
    """

    run_secs: Optional[list] = None
    error: Optional[str] = None
    artifact_path: Optional[str] = None

    def fail(self, error: str) -> None:
        """Turn this measurement into a failure."""
        self.run_secs = None
        self.error = error


def measure_schedules(
    schedules: Sequence[Schedule],
    target: Target,
    builder: Builder,
    runner: Runner,
    inspect: Optional[Callable[[List[Measurement]], None]] = None,
) -> List[Measurement]:
    """Build all schedules in one batch, run the built ones in one batch.

    This is what MetaSchedule's task scheduler does with a batch of measure
    candidates: the arguments are described by the entry function, the device
    is the target's device, and the builder's artifacts are removed once the
    runner is done with them.

    Parameters
    ----------
    schedules : Sequence[Schedule]
        The postprocessed schedules to measure.
    target : Target
        The target to build for.
    builder : Builder
        The user's builder.
    runner : Runner
        The user's runner (with its evaluator configuration).
    inspect : Optional[Callable[[List[Measurement]], None]]
        Called with the measurements while the artifacts still exist; it may
        turn measurements into failures (see :meth:`Measurement.fail`).

    Returns
    -------
    measurements : List[Measurement]
        For each schedule, in order, its run times or why it failed.
    """
    mods = [sch.mod for sch in schedules]
    builder_results = builder.build([BuilderInput(mod, target) for mod in mods])
    if len(builder_results) != len(mods):
        raise RuntimeError(
            f"the builder returned {len(builder_results)} results for {len(mods)} inputs"
        )
    device_type = runner_device_type(target)
    measured = [Measurement() for _ in mods]
    runner_inputs = []
    built = []
    for position, (mod, result) in enumerate(zip(mods, builder_results)):
        if result.error_msg is not None or result.artifact_path is None:
            measured[position].error = f"build error: {result.error_msg}"
            logger.debug("Post-optimization candidate failed to build: %s", result.error_msg)
            continue
        measured[position].artifact_path = result.artifact_path
        runner_inputs.append(
            RunnerInput(
                result.artifact_path,
                device_type=device_type,
                args_info=ArgInfo.from_entry_func(mod, remove_preproc=True),
            )
        )
        built.append(position)
    try:
        futures = runner.run(runner_inputs) if runner_inputs else []
        for position, future in zip(built, futures):
            result = future.result()
            if result.error_msg is not None or not result.run_secs:
                measured[position].error = f"run error: {result.error_msg}"
                logger.debug("Post-optimization candidate failed to run: %s", result.error_msg)
                continue
            measured[position].run_secs = list(result.run_secs)
        if inspect is not None:
            inspect(measured)
    finally:
        for inp in runner_inputs:
            remove_build_dir(inp.artifact_path)
    return measured
