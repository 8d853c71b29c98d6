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

import logging
from typing import List, Optional, Sequence

from tvm.runtime import device as runtime_device
from tvm.target import Target
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..runner import Runner, RunnerInput
from ..utils import remove_build_dir

logger = logging.getLogger("meta_schedule")  # pylint: disable=invalid-name


def runner_device_type(target: Target) -> str:
    """The name of the device a runner opens to run code built for ``target``.

    ``cpu`` for ``llvm`` and ``c``, ``cuda`` for ``cuda``, and so on for every
    target kind with a device (newer MetaSchedule passes the same name).
    """
    device = runtime_device(target.get_target_device_type(), 0)
    name = getattr(device, "type", None)  # devices of the tvm-ffi package name their type
    if isinstance(name, str):
        return name
    return device.MASK2STR[device.device_type]


def measure_schedules(
    schedules: Sequence[Schedule],
    target: Target,
    builder: Builder,
    runner: Runner,
) -> List[Optional[list]]:
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

    Returns
    -------
    run_secs : List[Optional[list]]
        For each schedule, in order, the runner's measured times, or None when
        building or running it failed.
    """
    mods = [sch.mod for sch in schedules]
    builder_results = builder.build([BuilderInput(mod, target) for mod in mods])
    if len(builder_results) != len(mods):
        raise RuntimeError(
            f"the builder returned {len(builder_results)} results for {len(mods)} inputs"
        )
    device_type = runner_device_type(target)
    runner_inputs = []
    built = []
    for position, (mod, result) in enumerate(zip(mods, builder_results)):
        if result.error_msg is not None or result.artifact_path is None:
            logger.debug("Post-optimization candidate failed to build: %s", result.error_msg)
            continue
        runner_inputs.append(
            RunnerInput(
                result.artifact_path,
                device_type=device_type,
                args_info=ArgInfo.from_entry_func(mod, remove_preproc=True),
            )
        )
        built.append(position)
    measured: List[Optional[list]] = [None] * len(mods)
    try:
        futures = runner.run(runner_inputs) if runner_inputs else []
        for position, future in zip(built, futures):
            result = future.result()
            if result.error_msg is not None or not result.run_secs:
                logger.debug("Post-optimization candidate failed to run: %s", result.error_msg)
                continue
            measured[position] = list(result.run_secs)
    finally:
        for inp in runner_inputs:
            remove_build_dir(inp.artifact_path)
    return measured
