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
best state of a task) and lists the parameters of its transform steps that the
sketch policy samples or mutates, each a dimension of the space:

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
  padding stage; it mutates none on other targets): the loops of its consumer
  outside the consumer's reduction (or, for a tiled consumer, outside its
  inner spatial tiles) and outside unrolled loops, and, when the consumer is
  itself computed at a stage, that stage's loops outside the consumer (the
  candidates of the sketch policy's compute-location mutation).  A location on
  a loop of extent one is the same program as the location one loop further
  out, so it is valid only for the state's own choice.  A stage counts as
  tiled when a split before its compute-at step made one of its loops an
  outer tile.  The sketch policy's mutation asks the finished state, where
  the fuse its vectorization rule adds to a padding stage's inner loops
  counts too, so it moves fewer stages than this space does; the locations
  kept here are those its initial compute-location rule samples;
- on CPU targets, the tiling level a fused consumer follows (the follow splits,
  ``FSP``, of the sketch rule that tiles a stage with its elementwise consumer:
  levels 1 and 2, two sketches of the policy): the follow splits, the reorder
  after them and the loop the tiled stage is computed at change with it;
- the number of outer loops fused into the parallel loop (a fuse step,
  ``FU``, from loop 0, followed by its ``parallel`` annotation: what the sketch
  policy's parallel mutation changes).

Every dimension lists its values in their natural order (tile lengths and
unroll steps ascending, compute locations from the outermost loop in, levels
and fused loops by number), so that neighbouring indices are similar programs:
a tile of 8 is one step from 4 and 16.  The point of the given state,
:attr:`StateSpace.origin`, is where the search starts; it is usually not the
all-zero corner of the box.  Followed splits (``FSP``, ``FFSP``) read the
lengths of the split they follow and so stay consistent; the loop numbers of
the later annotations and pragmas of a stage whose loops a point renumbers
(another follow level, another fuse) follow their loops.  Every valid point is
replayed on the compute DAG; a point whose steps do not replay is invalid.

A point is a tuple of integers, the representation of the Droplet Search
engine (:mod:`tvm.contrib.droplet_search`); it maps to exact parameter values
and back (:meth:`StateSpace.state`, :meth:`StateSpace.point_of`).
"""
import json
import math
from dataclasses import dataclass
from typing import Dict, Hashable, List, Optional, Sequence, Set, Tuple

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

CPU_FOLLOW_LEVELS = (1, 2)
"""The tiling levels a fused elementwise consumer follows in the sketches for CPU tasks."""

_REDUCTION_ITERATOR = 1  # IteratorKind::kReduction
_SPATIAL_ITERATOR = 0  # IteratorKind::kSpatial
_UNROLL_ANNOTATION = 1  # IteratorAnnotation::kUnroll
_PARALLEL_ANNOTATION = 3  # IteratorAnnotation::kParallel
# The steps on a stage's loops that follow them when a point renumbers the loops.
_LOOP_ANNOTATIONS = ("AN", "PR")
_RENUMBERED_STEPS = _LOOP_ANNOTATIONS + ("FU",)


@dataclass(frozen=True)
class StateParameter:
    """One dimension of a :class:`StateSpace`: a value in one transform step.

    Parameters
    ----------
    kind : str
        ``"tile"`` (a length of a split step), ``"unroll"`` (the value of an
        auto-unroll pragma), ``"compute_at"`` (the stage and loop a stage is
        computed at, a pair), ``"follow_level"`` (the tiling level the follow
        splits of a fused consumer follow) or ``"parallel_fuse"`` (the number of
        outer loops fused into a parallel loop).
    step_index : int
        The position of the step in the state's transform steps (for
        ``"follow_level"``, of the first follow split).
    position : int
        For ``"tile"``, the index of the length in the split's lengths; 0 otherwise.
    values : Tuple[Hashable, ...]
        The values of the dimension, in their natural order.
    original : int
        The index in ``values`` of the original state's value.
    """

    kind: str
    step_index: int
    position: int
    values: Tuple[Hashable, ...]
    original: int

    @property
    def name(self) -> str:
        """A short name for logs, e.g. ``tile[3][1]``, ``unroll[11]``."""
        if self.kind == "tile":
            return f"tile[{self.step_index}][{self.position}]"
        return f"{self.kind}[{self.step_index}]"


@dataclass(frozen=True)
class _FollowBlock:
    """The steps of one fused consumer's follow tiling (the sketch policy's ``FollowTiling``).

    ``split_steps`` are the consumer's follow splits, one per spatial loop,
    ``reorder_step`` the reorder after them (outer tiles first) and
    ``attach_step`` the compute-at of the tiled producer at the last loop of
    ``level`` levels; ``levels`` are the levels the block may take.
    """

    consumer: int
    producer: int
    split_steps: Tuple[int, ...]
    reorder_step: int
    attach_step: int
    level: int
    levels: Tuple[int, ...]

    def write(self, steps: List[list], level: int) -> None:
        """Write the block's steps at ``level`` into ``steps`` (record format), as the
        sketch policy's ``FollowTiling`` and its compute-at of the producer make them."""
        spatial = len(self.split_steps)
        for loop, split_index in enumerate(self.split_steps):
            steps[split_index][2] = loop * (level + 1)
            steps[split_index][4] = level
        steps[self.reorder_step][2] = [
            depth + loop * (level + 1) for depth in range(level + 1) for loop in range(spatial)
        ]
        steps[self.attach_step][3] = spatial * level - 1

    def loop_after(self, loop: int, level: int) -> Optional[int]:
        """The number at ``level`` of the consumer's loop ``loop`` (numbered at
        :attr:`level`), before any fuse; None when that loop is not one loop any more."""
        spatial = len(self.split_steps)
        if loop >= spatial * self.level:  # the innermost level
            return loop + spatial * (level - self.level)
        return loop if loop < spatial * min(level, self.level) else None


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


def _value_in_step(parameter: StateParameter, step: list) -> Optional[Hashable]:
    """The value a step (record format) gives a parameter: a tile length, the auto-unroll
    step, the compute location, the follow level or the number of fused loops; None when it
    gives none (an unknown length, another pragma)."""
    if parameter.kind == "tile":
        length = step[4][parameter.position]
        return None if length is None else int(length)
    if parameter.kind == "unroll":
        return _auto_unroll_step(step[3])
    if parameter.kind == "compute_at":
        return (int(step[2]), int(step[3]))
    if parameter.kind == "follow_level":
        return int(step[4])
    return len(step[2])


def _is_tiled(stage) -> bool:
    """Whether a stage (of a replayed state) is tiled: one of its loops is an outer split."""
    return any(iterator.name.endswith(".0") for iterator in stage.iters)


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
        # The follow tilings of fused consumers, by consumer stage.
        self._follow_blocks: Dict[int, _FollowBlock] = {}
        # The consumer of each stage whose compute location may move out to its consumer's
        # location, by the index of the compute-at step.
        self._compute_consumers: Dict[int, int] = {}
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
        # The steps whose fields besides their kind and stage a point may change.
        self._shaped_steps: Set[int] = self._find_shaped_steps()
        # The fuse step, among them, of each stage whose loops a point renumbers.
        self._renumbered_fuses: Dict[int, int] = {
            int(self.steps[index][1]): index
            for index in sorted(self._shaped_steps, reverse=True)
            if self.steps[index][0] == "FU"
        }
        self._states: Dict[Point, State] = {self.origin: self.origin_state}
        self._invalid: Dict[Point, str] = {}

    # ------------------------------------------------------------ building
    def _replay(self, steps: List[list]) -> State:
        """The state of ``steps`` replayed on the compute DAG (raises TVMError if invalid)."""
        record = [self._input_record[0], [self._input_record[1][0], steps]]
        measure_input = _ffi_api.DeserializeMeasureInput(json.dumps(record))
        return self.task.compute_dag.infer_bound_from_state(measure_input.state)

    def _find_parameters(self) -> List[StateParameter]:
        # The sketch policy mutates compute locations, follow levels and parallel fuses on
        # CPU targets only.
        is_cpu = "cpu" in [str(key) for key in self.task.target.keys]
        parameters = []
        for index, step in enumerate(self.steps):
            kind = step[0]
            parameter = None
            if kind == "SP":
                parameters.extend(self._tile_parameters(index, step))
            elif kind == "PR" and _auto_unroll_step(step[3]) is not None:
                max_step = _auto_unroll_step(step[3])
                values, original = _value_line(max_step, self.auto_unroll_max_steps)
                parameter = StateParameter("unroll", index, 0, values, original)
            elif kind == "CA" and is_cpu:
                parameter = self._compute_at_parameter(index, step)
            elif kind == "FSP" and is_cpu:
                parameter = self._follow_level_parameter(index)
            elif kind == "FU" and is_cpu:
                parameter = self._parallel_fuse_parameter(index, step)
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

    @staticmethod
    def _locations(stage) -> List[int]:
        """The loops of a stage another stage may be computed at (the sketch policy's rule):
        outside its reduction, or for a tiled stage outside its inner spatial tiles, and
        outside unrolled loops."""
        is_tiled = _is_tiled(stage)
        locations = []
        visited_reduction = False
        for iter_id, iterator in enumerate(stage.iters):
            if int(iterator.iter_kind) == _REDUCTION_ITERATOR:
                visited_reduction = True
                if not is_tiled:
                    break
            elif int(iterator.iter_kind) == _SPATIAL_ITERATOR and visited_reduction:
                break
            if int(iterator.annotation) == _UNROLL_ANNOTATION:
                break
            locations.append(iter_id)
        return locations

    @staticmethod
    def _single_consumer(state: State, stage_id: int) -> Optional[int]:
        """The one stage that reads a stage's output, None when there are several or none."""
        operation = state.stages[stage_id].op
        consumers = [
            index
            for index, stage in enumerate(state.stages)
            if any(tensor.op.same_as(operation) for tensor in stage.op.input_tensors)
        ]
        return consumers[0] if len(consumers) == 1 else None

    @staticmethod
    def _attachment(steps: Sequence[list], stage_id: int) -> Optional[Tuple[int, int]]:
        """The stage and loop the last compute-at step of ``steps`` attaches a stage to."""
        for step in reversed(steps):
            if step[0] == "CA" and int(step[1]) == stage_id:
                return int(step[2]), int(step[3])
        return None

    def _compute_at_parameter(self, index: int, step: list) -> Optional[StateParameter]:
        # ["CA", stage_id, target_stage_id, target_iter_id]
        stage_id, target_stage_id, target_iter_id = int(step[1]), int(step[2]), int(step[3])
        before = self._replay(self.steps[:index])
        if _is_tiled(before.stages[stage_id]):
            return None  # a tiled stage: its location is part of its tiling structure
        original = (target_stage_id, target_iter_id)
        locations: List[Tuple[int, int]] = []
        consumer = self._single_consumer(before, stage_id)
        if consumer is not None:
            # The loops of the stage the consumer is computed at, outside the consumer,
            # then the consumer's own loops: from the outermost loop in.
            outer = self._attachment(self.steps[:index], consumer)
            if outer is not None:
                outer_stage, attach_loop = outer
                block = self._follow_blocks.get(outer_stage)
                if block is not None and block.producer == consumer:
                    # another follow level attaches the consumer elsewhere
                    attach_loop = max(attach_loop, len(block.split_steps) * max(block.levels) - 1)
                iterators = before.stages[outer_stage].iters
                for loop in range(attach_loop):
                    if loop < len(iterators) and (
                        int(iterators[loop].iter_kind) == _REDUCTION_ITERATOR
                        or int(iterators[loop].annotation) == _UNROLL_ANNOTATION
                    ):
                        break
                    locations.append((outer_stage, loop))
            locations += [(consumer, loop) for loop in self._locations(before.stages[consumer])]
        if original in locations:
            self._compute_consumers[index] = consumer
        else:  # not at its consumer: the loops of the stage it is computed at
            own = self._locations(before.stages[target_stage_id])
            locations = sorted({(target_stage_id, loop) for loop in own} | {original})
        return StateParameter("compute_at", index, 0, tuple(locations), locations.index(original))

    def _later_steps_renumberable(self, stage_id: int, after: int, attached: bool) -> bool:
        """Whether the steps after ``after`` leave the stage numbering alone and, on the
        stage ``stage_id``, only annotate it, add pragmas or fuse it (steps whose loop
        numbers :meth:`_renumber` follows); with ``attached`` False, no later step
        computes a stage at one of its loops either."""
        for step in self.steps[after + 1 :]:
            if step[0] in ("CHR", "CHW", "RF"):
                return False
            if int(step[1]) == stage_id and step[0] not in _RENUMBERED_STEPS:
                return False
            if not attached and step[0] == "CA" and int(step[2]) == stage_id:
                return False
        return True

    def _follow_level_parameter(self, index: int) -> Optional[StateParameter]:
        """The follow level of the follow tiling starting at step ``index``, when its steps
        are exactly those of the sketch policy's follow tiling."""
        first = self.steps[index]
        consumer, level = int(first[1]), int(first[4])
        previous = self.steps[index - 1] if index > 0 else None
        if previous is not None and previous[0] == "FSP" and int(previous[1]) == consumer:
            return None  # not the first follow split of its block
        split_steps = []
        position = index
        while (
            position < len(self.steps)
            and self.steps[position][0] == "FSP"
            and int(self.steps[position][1]) == consumer
        ):
            split_steps.append(position)
            position += 1
        if position >= len(self.steps) or self.steps[position][:2] != ["RE", consumer]:
            return None
        if len(self._replay(self.steps[:index]).stages[consumer].iters) != len(split_steps):
            return None
        producer = int(self.steps[int(first[3])][1])
        attach_step = next(
            (
                later
                for later in range(position + 1, len(self.steps))
                if self.steps[later][0] == "CA" and int(self.steps[later][1]) == producer
            ),
            None,
        )
        if attach_step is None or int(self.steps[attach_step][2]) != consumer:
            return None
        if not self._later_steps_renumberable(consumer, position, attached=True):
            return None
        # The sketch policy's levels, within the lengths of the splits followed.
        splits = min(len(self.steps[int(self.steps[split][3])][4]) for split in split_steps)
        levels = tuple(sorted({value for value in CPU_FOLLOW_LEVELS if value <= splits} | {level}))
        block = _FollowBlock(
            consumer, producer, tuple(split_steps), position, attach_step, level, levels
        )
        written = json.loads(json.dumps(self.steps))
        block.write(written, level)
        if written != self.steps:
            return None  # not exactly the sketch policy's follow tiling
        self._follow_blocks[consumer] = block
        return StateParameter("follow_level", index, 0, levels, levels.index(level))

    def _parallel_fuse_parameter(self, index: int, step: list) -> Optional[StateParameter]:
        """The number of loops of a fuse from loop 0 whose loop is then made parallel."""
        # ["FU", stage_id, fused_ids]; ["AN", stage_id, iter_id, annotation]
        stage_id, fused = int(step[1]), [int(loop) for loop in step[2]]
        if not fused or fused != list(range(len(fused))) or index + 1 >= len(self.steps):
            return None
        annotation = self.steps[index + 1]
        if annotation[0] != "AN" or annotation[1:] != [stage_id, 0, _PARALLEL_ANNOTATION]:
            return None
        if not self._later_steps_renumberable(stage_id, index, attached=False):
            return None
        fusable = 0
        for iterator in self._replay(self.steps[:index]).stages[stage_id].iters:
            if int(iterator.iter_kind) == _REDUCTION_ITERATOR or int(iterator.annotation) != 0:
                break
            fusable += 1
        block = self._follow_blocks.get(stage_id)
        if block is not None:  # a deeper follow level has more loops
            fusable += len(block.split_steps) * max(0, max(block.levels) - block.level)
        values, original = _value_line(len(fused), range(1, fusable + 1))
        return StateParameter("parallel_fuse", index, 0, values, original)

    def _find_shaped_steps(self) -> Set[int]:
        shaped: Set[int] = set()
        renumbered_from: Dict[int, int] = {}  # stage -> the step after which loops may move
        for parameter in self.parameters:
            if parameter.kind == "compute_at":
                shaped.add(parameter.step_index)
            elif parameter.kind == "follow_level":
                block = self._follow_blocks[int(self.steps[parameter.step_index][1])]
                shaped.update(block.split_steps)
                shaped.update((block.reorder_step, block.attach_step))
                renumbered_from[block.consumer] = block.reorder_step
            elif parameter.kind == "parallel_fuse":
                stage_id = int(self.steps[parameter.step_index][1])
                after = renumbered_from.get(stage_id, parameter.step_index - 1)
                renumbered_from[stage_id] = min(after, parameter.step_index - 1)
        for stage_id, after in renumbered_from.items():
            shaped.update(
                index
                for index in range(after + 1, len(self.steps))
                if int(self.steps[index][1]) == stage_id
                and self.steps[index][0] in _RENUMBERED_STEPS
            )
        return shaped

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
            The original steps with the point's parameter values substituted
            (and the loop numbers of later steps of a stage whose loops the
            point renumbers following their loops).
        """
        return self._shaped(self._check_in_box(point))[0]

    def _shaped(self, point: Point) -> Tuple[List[list], Optional[str]]:
        """The steps of a point, and why a later step's loop has no number in it (or None)."""
        steps = json.loads(json.dumps(self.steps))
        levels: Dict[int, Tuple[_FollowBlock, int]] = {}  # consumer stage -> block, level
        fuses: Dict[int, int] = {}  # stage -> number of loops fused
        for parameter, index in zip(self.parameters, point):
            value = parameter.values[index]
            step = steps[parameter.step_index]
            if parameter.kind == "tile":
                step[4][parameter.position] = value
            elif parameter.kind == "unroll":
                step[3] = f"{AUTO_UNROLL_PRAGMA}{value}"
            elif parameter.kind == "compute_at":
                step[2], step[3] = value
            elif parameter.kind == "follow_level":
                block = self._follow_blocks[int(step[1])]
                levels[block.consumer] = (block, value)
                block.write(steps, value)
            else:
                step[2] = list(range(value))
                fuses[int(step[1])] = value
        for stage_id in set(levels) | set(fuses):
            conflict = self._renumber(steps, stage_id, levels.get(stage_id))
            if conflict is not None:
                return steps, conflict
        return steps, None

    def _renumber(
        self, steps: List[list], stage_id: int, level: Optional[Tuple[_FollowBlock, int]]
    ) -> Optional[str]:
        """Renumber the loops of the later annotations and pragmas of a stage after its
        follow level or parallel fuse changed; why one has no loop any more, else None."""
        block, new_level = level if level is not None else (None, None)

        def moved(loop: int) -> Optional[int]:
            if block is None or new_level == block.level:
                return loop
            return block.loop_after(loop, new_level)

        fuse_index = self._renumbered_fuses.get(stage_id)
        start = block.reorder_step if block is not None else fuse_index
        fused_before = len(self.steps[fuse_index][2]) if fuse_index is not None else 0
        fused_now = len(steps[fuse_index][2]) if fuse_index is not None else 0
        for index in range(start + 1, len(steps)):
            step = steps[index]
            if step[0] == "CA" and int(step[2]) == stage_id and index not in self._shaped_steps:
                if moved(int(step[3])) != int(step[3]):
                    return f"the loop step {index} computes stage {step[1]} at moves"
            # The fuse takes the outer loops of the renumbered stage: replaying checks it.
            if int(step[1]) != stage_id or step[0] not in _LOOP_ANNOTATIONS:
                continue
            loop = int(self.steps[index][2])
            if fuse_index is not None and index > fuse_index:
                if loop == 0:  # the fused loop
                    continue
                new_loop = moved(loop + fused_before - 1)
                if new_loop is None or new_loop - fused_now + 1 < 1:
                    return f"the loop of step {index} ({step[0]}) is fused or gone"
                step[2] = new_loop - fused_now + 1
            else:
                new_loop = moved(loop)
                if new_loop is None:
                    return f"the loop of step {index} ({step[0]}) is gone"
                step[2] = new_loop
        return None

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
        steps, conflict = self._shaped(point)
        if conflict is not None:
            return conflict
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
            if parameter.kind != "compute_at":
                continue
            reason = self._location_invalid_reason(steps, parameter, index != parameter.original)
            if reason is not None:
                return reason
        self._states[point] = state
        return None

    def _location_invalid_reason(
        self, steps: List[list], parameter: StateParameter, moved: bool
    ) -> Optional[str]:
        """Why the compute location of a point (steps) is not a candidate, or None."""
        step_index = parameter.step_index
        step = steps[step_index]
        target_stage_id, loop = int(step[2]), int(step[3])
        consumer = self._compute_consumers.get(step_index)
        if consumer is not None and target_stage_id != consumer:
            attachment = self._attachment(steps[:step_index], consumer)
            if attachment is None or attachment[0] != target_stage_id or loop >= attachment[1]:
                return (
                    f"compute_at step {step_index} attaches to loop {loop} of stage "
                    f"{target_stage_id}, not outside its consumer's location {attachment}"
                )
        if not moved and target_stage_id not in self._follow_blocks:
            return None  # the state's own loop, on a stage whose loops no point renumbers
        iterators = self._replay(steps[:step_index]).stages[target_stage_id].iters
        if loop >= len(iterators):
            return f"compute_at step {step_index} attaches to a loop stage {target_stage_id} lacks"
        if moved and int(iterators[loop].range.extent) == 1:
            return (
                f"compute_at step {step_index} attaches to a loop of extent 1, "
                "the same program as the next outer location"
            )
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

    def _same_skeleton(self, index: int, step: list) -> bool:
        """Whether another state's step is this state's step ``index`` but for the fields a
        point may change: the same kind, stage and loop (kind and stage for a step whose
        loops a point may change)."""
        width = 2 if index in self._shaped_steps else 3
        return list(step[:width]) == list(self.steps[index][:width])

    def point_like(self, steps: Sequence[list]) -> Optional[Point]:
        """The point that takes over the parameter values of another task's state.

        ``steps`` schedule another task with this state's transform steps (the
        same kinds on the same stages and loops, e.g. a convolution of other
        sizes from the same sketch).  A split takes the other split's lengths where each is a
        value of its dimension and together they divide this loop (else the
        whole split keeps the origin's lengths); an unroll pragma, a compute
        location, a follow level or a number of fused loops takes the other's
        value where its dimension has it.  Other
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
            not self._same_skeleton(index, step) for index, step in enumerate(steps)
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
