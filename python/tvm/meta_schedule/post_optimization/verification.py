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
"""Output check of post-optimization candidates against the start schedule.

MetaSchedule's runners time kernels without looking at what they compute, so
a miscompiled or wrongly scheduled kernel can become a workload's best
record.  Before a candidate may become the best, the post-optimizer runs the
artifact the builder made for it (the one the runner measured) on fixed
random inputs on this machine, and compares every argument afterwards with
what the start schedule (the record the search started from, built by the
same builder: the build of its re-measurement when there is one, else a build
of its own) computes from the same inputs.

The check needs the target's code to run on this machine.  When it cannot
(a cross-compiling target measured on remote devices through an RPC runner,
or a device this machine lacks), the check is switched off with one log
message and candidates are accepted on their run times alone.
"""

from typing import List, Optional

import numpy as np

import tvm
from tvm.contrib.droplet_search import error_summary
from tvm.contrib.droplet_search.outputs import output_difference, random_array
from tvm.runtime import device as runtime_device
from tvm.target import Target
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..logging import get_logger
from ..utils import remove_build_dir

logger = get_logger(__name__)  # pylint: disable=invalid-name

SEED = 0
"""Seed of the random inputs."""


def _array(data: np.ndarray, device):
    """A TVM array on ``device``."""
    return tvm.nd.array(data, device)


class OutputCheck:
    """Compares the outputs of built candidates with the start schedule's.

    Parameters
    ----------
    start : Schedule
        The postprocessed schedule of the record the search started from.
    target : Target
        The target the candidates are built for.
    name : str
        The workload's name, for log messages.
    builder : Builder
        The builder of the candidates, which builds the start schedule too.
    """

    def __init__(self, start: Schedule, target: Target, name: str, builder: Builder):
        self.start = start
        self.target = target
        self.name = name
        self.builder = builder
        self._inputs: Optional[List[np.ndarray]] = None
        self._expected: Optional[List[np.ndarray]] = None
        self._disabled: Optional[str] = None

    def reference_from(self, artifact_path: str) -> None:
        """Take the expected outputs from an artifact of the start schedule built by the
        builder already (the start measured again in a batch): the start is then not
        built a second time.  The artifact stays the caller's.

        Parameters
        ----------
        artifact_path : str
            The builder's artifact of the start schedule.
        """
        if self._expected is None and self._disabled is None:
            self._run_reference(artifact_path)

    def _prepare(self) -> None:
        """Build and run the start schedule here once, or switch the check off saying why."""
        if self._expected is not None or self._disabled is not None:
            return
        (built,) = self.builder.build([BuilderInput(self.start.mod, self.target)])
        if built.error_msg is not None or built.artifact_path is None:
            self._disable("the start schedule did not build", built.error_msg)
            return
        try:
            self._run_reference(built.artifact_path)
        finally:
            remove_build_dir(built.artifact_path)

    def _run_reference(self, artifact_path: str) -> None:
        """Run the start's artifact on the random inputs, or switch the check off."""
        try:
            device = runtime_device(self.target.get_target_device_type(), 0)
            if not device.exist:
                raise RuntimeError(f"this machine has no {device} device")
            rng = np.random.default_rng(SEED)
            self._inputs = [
                random_array([int(extent) for extent in info.shape], str(info.dtype), rng)
                for info in ArgInfo.from_entry_func(self.start.mod, remove_preproc=True)
            ]
            self._expected = self._outputs(tvm.runtime.load_module(artifact_path))
        except Exception as error:  # pylint: disable=broad-except
            # The start ran on the runner's device: failing here means that the
            # target's code cannot run on this machine.
            self._disable(f"code for target {self.target} cannot run on this machine", error)

    def _disable(self, why: str, error) -> None:
        self._disabled = f"{why} ({error_summary(RuntimeError(str(error)))})"
        logger.warning(
            "Post-optimization of %s: the outputs of candidates are not checked, because %s; "
            "run times alone decide",
            self.name,
            self._disabled,
        )

    def _outputs(self, module) -> List[np.ndarray]:
        """Every argument of ``module``'s entry function after one call on the inputs."""
        device = runtime_device(self.target.get_target_device_type(), 0)
        args = [_array(data, device) for data in self._inputs]
        module[module.entry_name](*args)
        device.sync()
        return [arg.numpy() for arg in args]

    def mismatch(self, artifact_path: str) -> Optional[str]:
        """Why the built candidate at ``artifact_path`` computes wrong, None if it does not.

        Parameters
        ----------
        artifact_path : str
            The builder's artifact of the candidate (before the runner's cleanup).

        Returns
        -------
        reason : Optional[str]
            None when the outputs match the start schedule's (or the check is
            switched off), otherwise a description of the difference.
        """
        self._prepare()
        if self._disabled is not None:
            return None
        try:
            got = self._outputs(tvm.runtime.load_module(artifact_path))
        except Exception as error:  # pylint: disable=broad-except
            return f"it fails to run on this machine: {error_summary(error)}"
        difference = output_difference(got, self._expected)
        return None if difference is None else f"{difference} from the start schedule's"
