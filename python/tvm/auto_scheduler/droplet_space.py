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
"""The Droplet Search space around one auto-scheduler state.

A :class:`StateSpace` takes a state found by the auto-scheduler (usually the
best state of a task) and lists the parameters of its transform steps that can
change without changing the structure of the program:

- the tile lengths of every split step (``SP``) of a loop of the compute
  definition: each length ranges over the divisors of the loop extent (and the
  state's own length), and a point is valid only when the product of the
  lengths of each split it changes divides its extent, so no split is padded
  that the state did not pad and no two points give the same loop nest.  (A
  split of a loop made by another split or a fuse keeps its lengths: its
  extent depends on the other parameters.)  The innermost length of an
  inner-to-outer split stays within ``max_innermost_factor``, the limit the
  sketch policy itself uses (its ``max_innermost_split_factor`` parameter);
- the ``auto_unroll_max_step`` pragma (``PR``), over the values the sketch
  policy samples for the target;
- on CPU targets, the compute location (``CA``) of every stage that is not
  tiled itself (the stages whose location the sketch policy mutates, e.g. a
  padding stage; it mutates none on other targets): the
  loops of its consumer outside the consumer's reduction (or, for a tiled
  consumer, outside its inner spatial tiles) and outside unrolled loops.  A
  location on a loop of extent one is the same program as the location one
  loop further out, so it is valid only for the state's own choice.

Every dimension lists its values in their natural order (tile lengths and
unroll steps ascending, compute locations from the outermost loop in), so that
neighbouring indices are similar programs: a tile of 8 is one step from 4 and
16.  The point of the given state, :attr:`StateSpace.origin`, is where the
search starts; it is usually not the all-zero corner of the box.  Followed
splits (``FSP``, ``FFSP``) read the lengths of the split they follow and so
stay consistent.  Every valid point is replayed on the compute DAG; a point
whose steps do not replay is invalid.

A point is a tuple of integers, the representation of the Droplet Search
engine (:mod:`tvm.contrib.droplet_search`); it maps to exact parameter values
and back (:meth:`StateSpace.state`, :meth:`StateSpace.point_of`).
"""
import json
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from tvm._ffi.base import TVMError
from tvm.autotvm.task.space import get_factors
from tvm.contrib.droplet_search import error_summary

from . import _ffi_api
from .droplet_log import steps_key
from .loop_state import State, StateObject
from .measure import MeasureInput

Point = Tuple[int, ...]

AUTO_UNROLL_PRAGMA = "auto_unroll_max_step$"
"""The prefix of the auto-unroll pragma of the sketch policy."""

CPU_AUTO_UNROLL_MAX_STEPS = (0, 16, 64, 512)
"""The ``auto_unroll_max_step`` values the sketch policy samples for CPU tasks."""

GPU_AUTO_UNROLL_MAX_STEPS = (0, 16, 64, 512, 1024)
"""The ``auto_unroll_max_step`` values the sketch policy samples for GPU tasks."""

_REDUCTION_ITERATOR = 1  # IteratorKind::kReduction
_SPATIAL_ITERATOR = 0  # IteratorKind::kSpatial
_UNROLL_ANNOTATION = 1  # IteratorAnnotation::kUnroll


@dataclass(frozen=True)
class StateParameter:
    """One dimension of a :class:`StateSpace`: a value in one transform step.

    Parameters
    ----------
    kind : str
        ``"tile"`` (a length of a split step), ``"unroll"`` (the value of an
        auto-unroll pragma) or ``"compute_at"`` (the loop a stage is computed at).
    step_index : int
        The position of the step in the state's transform steps.
    position : int
        For ``"tile"``, the index of the length in the split's lengths; 0 otherwise.
    values : Tuple[int, ...]
        The values of the dimension, in their natural order.
    original : int
        The index in ``values`` of the original state's value.
    """

    kind: str
    step_index: int
    position: int
    values: Tuple[int, ...]
    original: int

    @property
    def name(self) -> str:
        """A short name for logs, e.g. ``tile[3][1]``, ``unroll[11]``."""
        if self.kind == "tile":
            return f"tile[{self.step_index}][{self.position}]"
        return f"{self.kind}[{self.step_index}]"


def _value_line(original: int, others: Sequence[int]) -> Tuple[Tuple[int, ...], int]:
    """The values of a dimension in ascending order, the original's among them, and its index."""
    values = tuple(sorted(set(int(value) for value in others) | {int(original)}))
    return values, values.index(int(original))


def _auto_unroll_step(pragma) -> Optional[int]:
    """The step of an auto-unroll pragma (``auto_unroll_max_step$16``: 16), None for another."""
    text = str(pragma)
    if not text.startswith(AUTO_UNROLL_PRAGMA):
        return None
    return int(text[len(AUTO_UNROLL_PRAGMA) :])


def _value_in_step(parameter: StateParameter, step: list) -> Optional[int]:
    """The value a step (record format) gives a parameter: a tile length, the auto-unroll
    step or the compute location; None when it gives none (an unknown length, another pragma)."""
    if parameter.kind == "tile":
        length = step[4][parameter.position]
        return None if length is None else int(length)
    if parameter.kind == "unroll":
        return _auto_unroll_step(step[3])
    return int(step[3])


class StateSpace:
    """The tunable parameters of one auto-scheduler state, as Droplet Search points.

    Parameters
    ----------
    task : SearchTask
        The task the state belongs to; its compute DAG validates every point.
    state : Union[State, StateObject]
        The state the space is built around: the point :attr:`origin`.
    max_innermost_factor : int
        The largest innermost tile length of an inner-to-outer split (the
        sketch policy's ``max_innermost_split_factor``, 64 by default).  The
        original length is kept even when larger.
    auto_unroll_max_steps : Optional[Sequence[int]]
        The values of the auto-unroll pragma; by default those the sketch policy
        samples for the task's target.
    """

    def __init__(
        self,
        task,
        state,
        max_innermost_factor: int = 64,
        auto_unroll_max_steps: Optional[Sequence[int]] = None,
    ):
        if max_innermost_factor < 1:
            raise ValueError(f"max_innermost_factor must be positive, got {max_innermost_factor}")
        self.task = task
        self.max_innermost_factor = int(max_innermost_factor)
        if auto_unroll_max_steps is None:
            is_gpu = "gpu" in [str(key) for key in task.target.keys]
            auto_unroll_max_steps = (
                GPU_AUTO_UNROLL_MAX_STEPS if is_gpu else CPU_AUTO_UNROLL_MAX_STEPS
            )
        self.auto_unroll_max_steps = tuple(sorted(set(int(v) for v in auto_unroll_max_steps)))
        state_object = state if isinstance(state, StateObject) else state.state_object
        self._input_record = json.loads(
            _ffi_api.SerializeMeasureInput(MeasureInput(task, state_object))
        )
        self.steps: List[list] = self._input_record[1][1]
        self.origin_state = self._replay(self.steps)
        self.parameters: Tuple[StateParameter, ...] = tuple(
            parameter for parameter in self._find_parameters() if len(parameter.values) > 1
        )
        self.dims: Tuple[int, ...] = tuple(len(parameter.values) for parameter in self.parameters)
        self.origin: Point = tuple(parameter.original for parameter in self.parameters)
        # The split steps whose lengths are parameters; other splits keep the state's
        # lengths, which need not divide their recorded extent (e.g. a split of a fused loop).
        self._tiled_steps = sorted(
            {parameter.step_index for parameter in self.parameters if parameter.kind == "tile"}
        )
        self._states: Dict[Point, State] = {self.origin: self.origin_state}
        self._invalid: Dict[Point, str] = {}

    # ------------------------------------------------------------ building
    def _replay(self, steps: List[list]) -> State:
        """The state of ``steps`` replayed on the compute DAG (raises TVMError if invalid)."""
        record = [self._input_record[0], [self._input_record[1][0], steps]]
        measure_input = _ffi_api.DeserializeMeasureInput(json.dumps(record))
        return self.task.compute_dag.infer_bound_from_state(measure_input.state)

    def _find_parameters(self) -> List[StateParameter]:
        # The sketch policy mutates compute locations on CPU targets only.
        is_cpu = "cpu" in [str(key) for key in self.task.target.keys]
        parameters = []
        for index, step in enumerate(self.steps):
            kind = step[0]
            if kind == "SP":
                parameters.extend(self._tile_parameters(index, step))
            elif kind == "PR" and _auto_unroll_step(step[3]) is not None:
                max_step = _auto_unroll_step(step[3])
                values, original = _value_line(max_step, self.auto_unroll_max_steps)
                parameters.append(StateParameter("unroll", index, 0, values, original))
            elif kind == "CA" and is_cpu:
                parameter = self._compute_at_parameter(index, step)
                if parameter is not None:
                    parameters.append(parameter)
        return parameters

    def _tile_parameters(self, index: int, step: list) -> List[StateParameter]:
        # ["SP", stage_id, iter_id, extent, lengths, inner_to_outer]; extent 0 = unknown
        extent, lengths, inner_to_outer = int(step[3]), step[4], bool(step[5])
        if extent <= 0 or any(length is None for length in lengths):
            return []
        iterator = self._replay(self.steps[:index]).stages[int(step[1])].iters[int(step[2])]
        if "." in iterator.name or "@" in iterator.name or int(iterator.range.extent) != extent:
            # A split of a split or fused loop: its extent depends on other parameters.
            return []
        divisors = get_factors(extent)
        parameters = []
        for position, length in enumerate(lengths):
            candidates = divisors
            if inner_to_outer and position == len(lengths) - 1:
                candidates = [value for value in divisors if value <= self.max_innermost_factor]
            values, original = _value_line(int(length), candidates)
            parameters.append(StateParameter("tile", index, position, values, original))
        return parameters

    def _compute_at_parameter(self, index: int, step: list) -> Optional[StateParameter]:
        # ["CA", stage_id, target_stage_id, target_iter_id]
        stage_id, target_stage_id, target_iter_id = int(step[1]), int(step[2]), int(step[3])
        before = self._replay(self.steps[:index])
        if any(iterator.name.endswith(".0") for iterator in before.stages[stage_id].iters):
            return None  # a tiled stage: its location is part of its tiling structure
        target = before.stages[target_stage_id]
        target_is_tiled = any(iterator.name.endswith(".0") for iterator in target.iters)
        locations = []
        visited_reduction = False
        for iter_id, iterator in enumerate(target.iters):
            if int(iterator.iter_kind) == _REDUCTION_ITERATOR:
                visited_reduction = True
                if not target_is_tiled:
                    break
            elif int(iterator.iter_kind) == _SPATIAL_ITERATOR and visited_reduction:
                break
            if int(iterator.annotation) == _UNROLL_ANNOTATION:
                break
            locations.append(iter_id)
        values, original = _value_line(target_iter_id, locations)
        return StateParameter("compute_at", index, 0, values, original)

    # ------------------------------------------------------------- points
    def _check_in_box(self, point: Sequence[int]) -> Point:
        point = tuple(int(index) for index in point)
        if len(point) != len(self.dims) or any(
            not 0 <= index < size for index, size in zip(point, self.dims)
        ):
            raise ValueError(f"{point} is not a point of a space with dimensions {self.dims}")
        return point

    def steps_of(self, point: Sequence[int]) -> List[list]:
        """The transform steps (record format) of a point.

        Parameters
        ----------
        point : Sequence[int]
            A point of the space.

        Returns
        -------
        steps : List[list]
            The original steps with the point's parameter values substituted.
        """
        point = self._check_in_box(point)
        steps = json.loads(json.dumps(self.steps))
        for parameter, index in zip(self.parameters, point):
            value = parameter.values[index]
            step = steps[parameter.step_index]
            if parameter.kind == "tile":
                step[4][parameter.position] = value
            elif parameter.kind == "unroll":
                step[3] = f"{AUTO_UNROLL_PRAGMA}{value}"
            else:
                step[3] = value
        return steps

    def key(self, point: Sequence[int]) -> str:
        """The state key (:func:`~.droplet_log.state_key`) of the state of a point."""
        return steps_key(self.steps_of(point))

    def values_of(self, point: Sequence[int]) -> Dict[str, int]:
        """The parameter values of a point, by :attr:`StateParameter.name`."""
        point = self._check_in_box(point)
        return {
            parameter.name: parameter.values[index]
            for parameter, index in zip(self.parameters, point)
        }

    def describe(self, point: Sequence[int]) -> str:
        """The parameters a point changes from the origin, e.g. ``tile[1][2]=8 unroll[11]=64``."""
        point = self._check_in_box(point)
        changes = [
            f"{parameter.name}={parameter.values[index]}"
            for parameter, index in zip(self.parameters, point)
            if index != parameter.original
        ]
        return " ".join(changes) or "origin"

    def invalid_reason(self, point: Sequence[int]) -> Optional[str]:
        """Why a point is not a valid state of the task, or None when it is valid.

        Parameters
        ----------
        point : Sequence[int]
            A point of the space.

        Returns
        -------
        reason : Optional[str]
            None for a valid point, else a sentence naming the violated rule.
        """
        point = self._check_in_box(point)
        if point in self._states:
            return None
        if point in self._invalid:
            return self._invalid[point]
        reason = self._find_invalid_reason(point)
        if reason is not None:
            self._invalid[point] = reason
        return reason

    def is_valid(self, point: Sequence[int]) -> bool:
        """Whether a point is a valid state of the task (the engine's ``is_valid``)."""
        return self.invalid_reason(point) is None

    def _find_invalid_reason(self, point: Point) -> Optional[str]:
        steps = self.steps_of(point)
        for index in self._tiled_steps:
            step = steps[index]
            if step[4] != self.steps[index][4] and int(step[3]) % math.prod(step[4]) != 0:
                return (
                    f"the tile lengths {step[4]} of split step {index} do not divide "
                    f"its extent {step[3]}"
                )
        try:
            state = self._replay(steps)
        except TVMError as err:
            return f"the steps do not replay on the compute DAG: {error_summary(err)}"
        for parameter, index in zip(self.parameters, point):
            if parameter.kind != "compute_at" or index == parameter.original:
                continue
            step = steps[parameter.step_index]
            before = self._replay(steps[: parameter.step_index])
            iterator = before.stages[int(step[2])].iters[int(step[3])]
            if int(iterator.range.extent) == 1:
                return (
                    f"compute_at step {parameter.step_index} attaches to a loop of extent 1, "
                    "the same program as the next outer location"
                )
        self._states[point] = state
        return None

    def state(self, point: Sequence[int]) -> State:
        """The state of a valid point, its bounds inferred.

        Parameters
        ----------
        point : Sequence[int]
            A valid point of the space.

        Returns
        -------
        state : State
            The replayed state.
        """
        point = self._check_in_box(point)
        reason = self.invalid_reason(point)
        if reason is not None:
            raise ValueError(f"{point} is not a valid state: {reason}")
        return self._states[point]

    def point_like(self, steps: Sequence[list]) -> Optional[Point]:
        """The point that takes over the parameter values of another task's state.

        ``steps`` schedule another task with this state's transform steps (the
        same kinds on the same stages and loops, e.g. a convolution of other
        sizes from the same sketch).  A split takes the other split's lengths where each is a
        value of its dimension and together they divide this loop (else the
        whole split keeps the origin's lengths); an unroll pragma or a compute
        location takes the other's value where its dimension has it.  Other
        coordinates keep the origin's value; whether the point is a valid state
        is :meth:`is_valid`'s question.

        Parameters
        ----------
        steps : Sequence[list]
            The transform steps (record format) of another task's state.

        Returns
        -------
        point : Optional[Point]
            None when the steps are not this state's kinds on the same stages
            and loops, step by step (their other fields, e.g. an annotation,
            may differ: only the parameter values are taken over).
        """
        if len(steps) != len(self.steps) or any(
            theirs[:3] != ours[:3] for theirs, ours in zip(steps, self.steps)
        ):
            return None
        point = list(self.origin)
        splits: Dict[int, List[int]] = {}  # step index -> the axes of its lengths
        for axis, parameter in enumerate(self.parameters):
            if parameter.kind == "tile":
                splits.setdefault(parameter.step_index, []).append(axis)
                continue
            value = _value_in_step(parameter, steps[parameter.step_index])
            if value in parameter.values:
                point[axis] = parameter.values.index(value)
        for step_index, axes in splits.items():
            theirs = steps[step_index][4]
            lengths = list(self.steps[step_index][4])
            if len(theirs) != len(lengths) or any(length is None for length in theirs):
                continue
            taken = {}
            for axis in axes:
                parameter = self.parameters[axis]
                lengths[parameter.position] = _value_in_step(parameter, steps[step_index])
                if lengths[parameter.position] in parameter.values:
                    taken[axis] = parameter.values.index(lengths[parameter.position])
            extent = int(self.steps[step_index][3])
            if len(taken) == len(axes) and extent % math.prod(lengths) == 0:
                for axis, index in taken.items():
                    point[axis] = index
        return tuple(point)

    def point_of(self, state) -> Optional[Point]:
        """The point of a state, or None when the state is not in the space.

        Parameters
        ----------
        state : Union[State, StateObject]
            A state of the same task.

        Returns
        -------
        point : Optional[Point]
            The point whose steps equal the state's steps exactly; None when the
            state differs from the origin outside the space's parameters or
            takes a value no dimension has.
        """
        state_object = state if isinstance(state, StateObject) else state.state_object
        record = json.loads(_ffi_api.SerializeMeasureInput(MeasureInput(self.task, state_object)))
        steps = record[1][1]
        if len(steps) != len(self.steps):
            return None
        point = []
        for parameter in self.parameters:
            step = steps[parameter.step_index]
            if step[0] != self.steps[parameter.step_index][0]:
                return None
            value = _value_in_step(parameter, step)
            if value is None or value not in parameter.values:
                return None
            point.append(parameter.values.index(value))
        point = tuple(point)
        if self.steps_of(point) != steps:
            return None
        return point
