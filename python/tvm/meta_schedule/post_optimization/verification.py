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

The start is a tuning record, and a compiler defect can have made it wrong as
well.  So the start's outputs are first compared with those of the unscheduled
workload, built by TVM here for the same target.  When they differ, the start
is wrong: that is logged, and the unscheduled workload's outputs become the
reference.  This needs the unscheduled workload to build for the target and
to take the start's arguments, and it is skipped for workloads of more than
:data:`UNSCHEDULED_FLOP_LIMIT` operations, whose unscheduled loops would run
for too long.

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
from tvm.ir import IRModule
from tvm.runtime import device as runtime_device
from tvm.target import Target
from tvm.tir.analysis import estimate_tir_flops
from tvm.tir.schedule import Schedule

from ..arg_info import ArgInfo
from ..builder import Builder, BuilderInput
from ..logging import get_logger
from ..utils import remove_build_dir

logger = get_logger(__name__)  # pylint: disable=invalid-name

SEED = 0
"""Seed of the random inputs."""

UNSCHEDULED_FLOP_LIMIT = 2e9
"""The largest workload, in floating-point operations, whose unscheduled program is
run to check the start (at about one GFLOPS, a couple of seconds)."""


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
    workload : Optional[IRModule]
        The unscheduled workload, whose outputs check the start's; the start is
        not checked when omitted.

    Attributes
    ----------
    start_difference : Optional[str]
        How the start's outputs differ from the unscheduled workload's, once the
        reference is prepared; None when they match or could not be compared.
    """

    def __init__(
        self,
        start: Schedule,
        target: Target,
        name: str,
        builder: Builder,
        workload: Optional[IRModule] = None,
    ):
        self.start = start
        self.target = target
        self.name = name
        self.builder = builder
        self.workload = workload
        self.start_difference: Optional[str] = None
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
            return
        self._check_start()

    def _check_start(self) -> None:
        """Compare the start's outputs with the unscheduled workload's; when they
        differ, the start is wrong and the unscheduled workload's outputs are the reference."""
        expected = self._unscheduled_outputs()
        difference = None if expected is None else output_difference(self._expected, expected)
        if difference is None:
            return
        self.start_difference = f"{difference} from the unscheduled workload's"
        self._expected = expected
        logger.warning(
            "Post-optimization of %s: the start record computes a wrong result (%s); "
            "candidates are checked against the unscheduled workload instead. The database "
            "keeps that record: it stays the workload's best unless a faster program is measured",
            self.name,
            self.start_difference,
        )

    def _unscheduled_outputs(self) -> Optional[List[np.ndarray]]:
        """The unscheduled workload's outputs on the inputs, None when it cannot be run."""
        if self.workload is None:
            return None
        try:
            flops = float(estimate_tir_flops(self.workload))
            if flops > UNSCHEDULED_FLOP_LIMIT:
                logger.debug(
                    "Post-optimization of %s: the start is not checked against the unscheduled "
                    "workload, too large to run (%.3g operations)",
                    self.name,
                    flops,
                )
                return None
            signature = [info.as_json() for info in ArgInfo.from_entry_func(self.workload)]
            start = ArgInfo.from_entry_func(self.start.mod, remove_preproc=True)
            if signature != [info.as_json() for info in start]:
                logger.debug(
                    "Post-optimization of %s: the start is not checked against the unscheduled "
                    "workload, whose arguments differ (rewritten layouts)",
                    self.name,
                )
                return None
            module = tvm.build(self.workload, target=self.target)
            (function,) = self.workload.get_global_vars()
            entry = getattr(module, "entry_name", None) or function.name_hint
            return self._outputs(module, entry)
        except Exception as error:  # pylint: disable=broad-except
            logger.debug(
                "Post-optimization of %s: the start is not checked against the unscheduled "
                "workload, which does not run here: %s",
                self.name,
                error_summary(error),
            )
            return None

    def _disable(self, why: str, error) -> None:
        self._disabled = f"{why} ({error_summary(RuntimeError(str(error)))})"
        logger.warning(
            "Post-optimization of %s: the outputs of candidates are not checked, because %s; "
            "run times alone decide",
            self.name,
            self._disabled,
        )

    def _outputs(self, module, name: Optional[str] = None) -> List[np.ndarray]:
        """Every argument of ``module``'s function ``name`` (by default its entry
        function) after one call on the inputs."""
        device = runtime_device(self.target.get_target_device_type(), 0)
        args = [_array(data, device) for data in self._inputs]
        module[name or module.entry_name](*args)
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
        if difference is None:
            return None
        if self.start_difference is not None:
            return f"{difference} from the unscheduled workload's"
        return f"{difference} from the start schedule's"
