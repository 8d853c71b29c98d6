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
"""Check that auto-scheduler states compute the same outputs as a reference state.

Every state of a task describes the same computation, but a compiler defect
can turn a schedule into a kernel that computes something else.  A
:class:`StateOutputChecker` runs programs of one task on this host on the same
random inputs and compares their outputs with those of a reference state.  The
program checked is preferably the library the builder produced and the runner
measured (:meth:`StateOutputChecker.difference` with ``library``), so what is
timed is what is checked; otherwise the state is built for the task's target.
The reference itself is first compared with the unscheduled program of the
compute DAG; when it differs, the unscheduled program's outputs become the
reference.

The states are built and run in a separate process, so a kernel that crashes
is reported instead of ending the caller.
"""
from typing import Dict, List, Optional, Tuple

import numpy as np

import tvm
from tvm.contrib.droplet_search import error_summary
from tvm.contrib.droplet_search.outputs import output_difference, random_array
from tvm.contrib.popen_pool import PopenWorker

from .compute_dag import LayoutRewriteOption
from .measure import MeasureInput, prepare_input_map
from .search_task import SearchTask, get_task_input_buffer

# The references of the checking process: key -> (input arrays, output indices, outputs)
_REFERENCES: Dict[str, Tuple[List[np.ndarray], List[int], List[np.ndarray]]] = {}


def _build_state(serialized_input: list, layout_rewrite: int):
    """Build a state for its target; returns the task, the module and its arguments."""
    measure_input = MeasureInput.deserialize(serialized_input)
    task = measure_input.task
    schedule, args = task.compute_dag.apply_steps_from_state(measure_input.state, layout_rewrite)
    return task, tvm.build(schedule, args, target=task.target), args


def _run_state(serialized_input: list, layout_rewrite: int, arrays: List[np.ndarray]):
    """Build and run a state on copies of ``arrays``; returns its output indices and outputs."""
    task, module, args = _build_state(serialized_input, layout_rewrite)
    device = tvm.device(task.target.kind.name, 0)
    buffers = [tvm.nd.array(array, device) for array in arrays]
    module(*buffers)
    outputs = [
        index for index, arg in enumerate(args) if not isinstance(arg.op, tvm.te.PlaceholderOp)
    ]
    return outputs, [buffers[index].numpy() for index in outputs]


def _prepare_reference(
    key: str,
    reference: list,
    unscheduled: list,
    layout_rewrite: int,
    fixed_arrays: Dict[int, np.ndarray],
    seed: int,
    tolerance: float,
) -> Optional[str]:
    """Run the unscheduled program and the reference state on the same random inputs."""
    measure_input = MeasureInput.deserialize(unscheduled)
    _, args = measure_input.task.compute_dag.apply_steps_from_state(measure_input.state)
    rng = np.random.default_rng(seed)
    arrays = [
        fixed_arrays[index]
        if index in fixed_arrays
        else random_array(tuple(int(extent) for extent in arg.shape), arg.dtype, rng)
        for index, arg in enumerate(args)
    ]
    outputs, expected = _run_state(unscheduled, LayoutRewriteOption.NO_REWRITE, arrays)
    _, computed = _run_state(reference, layout_rewrite, arrays)
    difference = output_difference(computed, expected, tolerance)
    _REFERENCES[key] = (arrays, outputs, expected if difference else computed)
    return difference


def _check_state(
    key: str, candidate: list, layout_rewrite: int, reference_args: tuple, tolerance: float
) -> Optional[str]:
    """How a state's outputs differ from the reference's, None when they match."""
    if key not in _REFERENCES:  # the checking process was restarted
        _prepare_reference(key, *reference_args)
    arrays, _, reference = _REFERENCES[key]
    _, outputs = _run_state(candidate, layout_rewrite, arrays)
    return output_difference(outputs, reference, tolerance)


def _check_library(
    key: str, library: str, target: str, reference_args: tuple, tolerance: float
) -> Optional[str]:
    """How the outputs of a built library differ from the reference's, None when they match."""
    if key not in _REFERENCES:  # the checking process was restarted
        _prepare_reference(key, *reference_args)
    arrays, output_indices, reference = _REFERENCES[key]
    module = tvm.runtime.load_module(library)
    device = tvm.device(tvm.target.Target(target).kind.name, 0)
    buffers = [tvm.nd.array(array, device) for array in arrays]
    module.get_function(module.entry_name)(*buffers)
    outputs = [buffers[index].numpy() for index in output_indices]
    return output_difference(outputs, reference, tolerance)


class StateOutputChecker:
    """Compares the outputs of states of a task with those of a reference state.

    Parameters
    ----------
    tolerance : float
        The tolerance of :func:`~tvm.contrib.droplet_search.outputs.output_difference`.
    timeout : float
        Seconds allowed to build and run one state.
    seed : int
        The seed of the random inputs.
    """

    def __init__(self, tolerance: float = 1e-3, timeout: float = 300.0, seed: int = 0):
        self.tolerance = tolerance
        self.timeout = timeout
        self.seed = seed
        self._worker = PopenWorker()
        self._references = 0
        self._key = ""
        self._reference_args: tuple = ()
        self._layout_rewrite = int(LayoutRewriteOption.NO_REWRITE)
        self._library_inputs_match = True
        self.task: Optional[SearchTask] = None

    def _call(self, function, *args):
        self._worker.send(function, args, timeout=self.timeout)
        return self._worker.recv()

    def set_reference(self, task: SearchTask, state) -> Optional[str]:
        """Make a state of a task the reference of later checks.

        Parameters
        ----------
        task : SearchTask
            The task.
        state : Union[State, StateObject]
            The reference state.

        Returns
        -------
        difference : Optional[str]
            None when the reference state computes the outputs of the unscheduled
            program; otherwise how it differs, and the unscheduled program's
            outputs become the reference.

        Raises
        ------
        ValueError
            When the programs of the task cannot be built or run on this host.
        """
        layout_rewrite = task.layout_rewrite_option
        # The measured libraries of such a task expect transformed weights.
        self._library_inputs_match = (
            layout_rewrite != LayoutRewriteOption.REWRITE_FOR_PRE_TRANSFORMED
        )
        if layout_rewrite == LayoutRewriteOption.REWRITE_FOR_PRE_TRANSFORMED:
            # The same computation, with the weight layout transformed inside the kernel.
            layout_rewrite = LayoutRewriteOption.INSERT_TRANSFORM_STAGE
        unscheduled_state = task.compute_dag.get_init_state()
        _, args = task.compute_dag.apply_steps_from_state(unscheduled_state)
        names = prepare_input_map(args, task.workload_key)
        fixed_arrays = {
            index: get_task_input_buffer(task.workload_key, names[arg]).numpy()
            for index, arg in enumerate(args)
            if arg in names
        }
        self._references += 1
        self._key = f"{self._references} {task.workload_key}"
        self._layout_rewrite = int(layout_rewrite)
        self._reference_args = (
            MeasureInput(task, state).serialize(),
            MeasureInput(task, unscheduled_state).serialize(),
            self._layout_rewrite,
            fixed_arrays,
            self.seed,
            self.tolerance,
        )
        self.task = task
        try:
            return self._call(_prepare_reference, self._key, *self._reference_args)
        except Exception as err:  # pylint: disable=broad-except
            raise ValueError(
                f"the programs of target {task.target} cannot be built and run on this host "
                f"to check their outputs ({type(err).__name__}: {error_summary(err)})"
            ) from None

    def difference(self, task: SearchTask, state, library: Optional[str] = None) -> Optional[str]:
        """How a state's outputs differ from the reference's.

        Parameters
        ----------
        task : SearchTask
            The task of the state (the one given to :meth:`set_reference`).
        state : Union[State, StateObject]
            The state to check.
        library : Optional[str]
            The library built for the state (the file of its ``BuildResult``):
            it is loaded and run, so the program checked is the one measured.
            Without it, or for a task whose weights are pre-transformed
            (``LayoutRewriteOption.REWRITE_FOR_PRE_TRANSFORMED``, whose libraries
            expect transformed weights), the state is built here instead.

        Returns
        -------
        difference : Optional[str]
            None when the outputs match; otherwise a sentence saying how they
            differ, or that the program failed to build, crashed or timed out.
        """
        if self.task is None:
            raise RuntimeError("set_reference() must be called before difference()")
        try:
            if library is not None and self._library_inputs_match:
                return self._call(
                    _check_library,
                    self._key,
                    library,
                    str(task.target),
                    self._reference_args,
                    self.tolerance,
                )
            return self._call(
                _check_state,
                self._key,
                MeasureInput(task, state).serialize(),
                self._layout_rewrite,
                self._reference_args,
                self.tolerance,
            )
        except ChildProcessError:
            return "the program crashed"
        except TimeoutError:
            return f"building and running it took more than {self.timeout} s"
        except Exception as err:  # pylint: disable=broad-except
            return f"it failed to build or run ({type(err).__name__}: {error_summary(err)})"

    def close(self) -> None:
        """End the checking process."""
        self._worker.kill()
