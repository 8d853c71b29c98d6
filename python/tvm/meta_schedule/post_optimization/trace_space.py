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
"""The search space of a MetaSchedule trace: the decisions a post-optimizer may change.

A tuning record stores the trace that produced its schedule.  Its sampling
decisions and a few annotation values are the coordinates of a box of integer
points (see :mod:`tvm.contrib.droplet_search`):

- ``SamplePerfectTile``: one dimension per inner tile factor, ranging over the
  divisors of the loop extent; the outermost factor is the extent divided by
  the product of the inner ones, so only perfect factorizations within the
  instruction's ``max_innermost_factor`` are valid points;
- ``SampleCategorical``: one dimension over the indices of its candidates;
- ``SampleComputeLocation``: one dimension over the places a block can be
  computed at, as MetaSchedule's ``MutateComputeLocation`` moves it: inlined
  (-2), at the root (-1), or under one of the loops around its first consumer,
  outermost first; which of them a point may take depends on its tiles (a
  loop of extent 1 is no place), and the replay rejects the others;
- ``Annotate`` of an integer constant whose value changes the generated
  program (maximum parallel extent, maximum vector length, unroll steps): one
  dimension over a power-of-two ladder that contains the recorded value.

A point is turned back into a schedule by replaying the trace (without the
postprocessing part it was recorded with) with the point's decisions, checking
that no decision was repaired on the way, and running the postprocessors
again, exactly as MetaSchedule builds its own measure candidates.
"""

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tvm.ir import IRModule
from tvm.tir.schedule import Instruction, Schedule, Trace

from ..logging import get_logger
from ..postproc import Postproc

logger = get_logger(__name__)  # pylint: disable=invalid-name

Point = Tuple[int, ...]

SAMPLE_PERFECT_TILE = "SamplePerfectTile"
SAMPLE_CATEGORICAL = "SampleCategorical"
SAMPLE_COMPUTE_LOCATION = "SampleComputeLocation"
ANNOTATE = "Annotate"
ENTER_POSTPROC = "EnterPostproc"

# Annotations MetaSchedule's postprocessors and lowering read to generate code;
# others (``meta_schedule.tiling_structure``, thread-extent bounds, ...) only
# describe or check a schedule, and changing them changes nothing.
PROGRAM_ANNOTATIONS = (
    "meta_schedule.parallel",
    "meta_schedule.vectorize",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
    "pragma_auto_unroll_max_step",
)

# Replaying a trace whose decisions are all given draws no random number; the
# fixed seed keeps the replay deterministic should a postprocessor sample.
REPLAY_SEED = 1


@dataclass(frozen=True)
class Dimension:
    """One coordinate of a trace space.

    Parameters
    ----------
    kind : str
        ``SamplePerfectTile``, ``SampleCategorical``, ``SampleComputeLocation``
        or ``Annotate``.
    instruction : int
        The position of the instruction in the trace.
    level : int
        For a tile, the position of the factor in the decision (1 is the
        factor right inside the outermost); 0 otherwise.
    values : Tuple[int, ...]
        The value at each index: a tile factor, a candidate index, a compute
        location or an annotation value.
    """

    kind: str
    instruction: int
    level: int
    values: Tuple[int, ...]

    def describe(self, index: int) -> str:
        """A readable ``name=value`` of this dimension at ``index``."""
        if self.kind == SAMPLE_PERFECT_TILE:
            return f"tile#{self.instruction}[{self.level}]={self.values[index]}"
        if self.kind == SAMPLE_CATEGORICAL:
            return f"categorical#{self.instruction}={self.values[index]}"
        if self.kind == SAMPLE_COMPUTE_LOCATION:
            return f"compute_location#{self.instruction}={self.values[index]}"
        return f"annotation#{self.instruction}={self.values[index]}"


def divisors(extent: int) -> Tuple[int, ...]:
    """The positive divisors of ``extent`` in ascending order."""
    small, large = [], []
    factor = 1
    while factor * factor <= extent:
        if extent % factor == 0:
            small.append(factor)
            if factor * factor != extent:
                large.append(extent // factor)
        factor += 1
    return tuple(small + large[::-1])


def annotation_ladder(value: int) -> Tuple[int, ...]:
    """Candidate values of an annotation: powers of two around ``value``, and ``value``."""
    top = max(3, int(value).bit_length() + 2)
    return tuple(sorted({int(value)} | {1 << exponent for exponent in range(top + 1)}))


def _as_int(value) -> int:
    return int(value.value) if hasattr(value, "value") else int(value)


def _dtype(value) -> str:
    """The data type of an immediate."""
    return str(value.dtype)


def _is_int_constant(value) -> bool:
    """Whether an instruction input is an integer constant (an ``IntImm`` or a Python
    int), not a random variable."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    immediate = getattr(value, "value", None)
    return (
        isinstance(immediate, int)
        and not isinstance(immediate, bool)
        and _dtype(value).startswith(("int", "uint"))
    )


def _with_value(constant, value: int):
    """An integer constant like ``constant`` (same type and data type) holding ``value``."""
    if isinstance(constant, int):
        return value
    return type(constant)(_dtype(constant), value)


def trace_key(trace: Trace) -> str:
    """The text of a trace without its postprocessing part: equal texts, same program."""
    return "\n".join(str(line) for line in trace.as_python(remove_postproc=True))


def _instructions(trace: Trace) -> List[Instruction]:
    """The instructions of a trace before its postprocessing part."""
    instructions = []
    for inst in trace.insts:
        if inst.kind.name == ENTER_POSTPROC:
            break
        instructions.append(inst)
    return instructions


def _decision_value(decision):
    """A sampling decision as plain Python: a tuple of ints (tile) or an int."""
    if isinstance(decision, (list, tuple)) or hasattr(decision, "__len__"):
        return tuple(_as_int(item) for item in decision)
    return _as_int(decision)


def _loops_around_consumers(trace: Trace, mod: IRModule) -> Dict[int, int]:
    """Per ``SampleComputeLocation`` instruction of ``trace``, how many loops surround
    the first consumer of its block when the trace is replayed on ``mod``: the
    places its decision may take besides -2 and -1 (tile sizes do not change the
    count).  Empty when the replay fails."""
    loops: Dict[int, int] = {}
    sch = Schedule(mod, seed=REPLAY_SEED, debug_mask="none", error_render_level="none")
    position = iter(range(len(trace.insts)))

    def observe(inst, inputs, _attrs, decision):
        index = next(position)
        if inst.kind.name == SAMPLE_COMPUTE_LOCATION:
            consumers = sch.get_consumers(inputs[0])
            loops[index] = len(sch.get_loops(consumers[0])) if consumers else 0
        return decision

    try:
        trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=observe)
    except Exception as error:  # pylint: disable=broad-except
        logger.debug("No compute locations: the record's trace does not replay: %s", error)
        return {}
    return loops


class TraceSpace:
    """The decisions of one trace as a box of integer points.

    Parameters
    ----------
    trace : Trace
        The trace of a tuning record (its postprocessing part is ignored).
    mod : IRModule
        The workload the trace schedules.
    postprocs : Sequence[Postproc]
        The postprocessors of the tuning task, applied to every candidate.
    """

    def __init__(self, trace: Trace, mod: IRModule, postprocs: Sequence[Postproc]):
        self.mod = mod
        self.postprocs = list(postprocs)
        self.instructions: List[Instruction] = _instructions(trace)
        self.decisions: Dict[int, object] = {}
        for index, inst in enumerate(self.instructions):
            decision = trace.get_decision(inst)
            if decision is not None:
                self.decisions[index] = _decision_value(decision)
        consumer_loops = (
            _loops_around_consumers(trace, mod)
            if any(inst.kind.name == SAMPLE_COMPUTE_LOCATION for inst in self.instructions)
            else {}
        )
        self.dimensions: List[Dimension] = []
        start: List[int] = []
        for index, inst in enumerate(self.instructions):
            for dimension in self._dimensions_of(index, inst, consumer_loops):
                original = self._original_value(dimension)
                if len(dimension.values) > 1:
                    self.dimensions.append(dimension)
                    start.append(dimension.values.index(original))
        self.start: Point = tuple(start)

    # ------------------------------------------------------------ building
    def _dimensions_of(
        self, index: int, inst: Instruction, consumer_loops: Dict[int, int]
    ) -> List[Dimension]:
        kind = inst.kind.name
        if kind == SAMPLE_PERFECT_TILE and index in self.decisions:
            factors = self.decisions[index]
            extent = 1
            for factor in factors:
                extent *= factor
            values = divisors(extent)
            return [
                Dimension(SAMPLE_PERFECT_TILE, index, level, values)
                for level in range(1, len(factors))
            ]
        if kind == SAMPLE_CATEGORICAL and index in self.decisions:
            candidates = inst.attrs[0]
            return [Dimension(SAMPLE_CATEGORICAL, index, 0, tuple(range(len(candidates))))]
        if kind == SAMPLE_COMPUTE_LOCATION and index in self.decisions:
            loops = consumer_loops.get(index, 0)
            values = tuple(range(-2, loops))
            if self.decisions[index] not in values:
                return []
            return [Dimension(SAMPLE_COMPUTE_LOCATION, index, 0, values)]
        if (
            kind == ANNOTATE
            and str(inst.attrs[0]) in PROGRAM_ANNOTATIONS
            and _is_int_constant(inst.inputs[1])
        ):
            return [Dimension(ANNOTATE, index, 0, annotation_ladder(_as_int(inst.inputs[1])))]
        return []

    def _original_value(self, dimension: Dimension) -> int:
        if dimension.kind == SAMPLE_PERFECT_TILE:
            return self.decisions[dimension.instruction][dimension.level]
        if dimension.kind in (SAMPLE_CATEGORICAL, SAMPLE_COMPUTE_LOCATION):
            return self.decisions[dimension.instruction]
        return _as_int(self.instructions[dimension.instruction].inputs[1])

    # ------------------------------------------------------------ points
    @property
    def dims(self) -> Tuple[int, ...]:
        """The number of values of each dimension."""
        return tuple(len(dimension.values) for dimension in self.dimensions)

    def describe(self, point: Sequence[int]) -> str:
        """A readable form of the values of ``point`` that differ from the start."""
        changes = [
            dimension.describe(index)
            for dimension, index, origin in zip(self.dimensions, point, self.start)
            if index != origin
        ]
        return ", ".join(changes) if changes else "the recorded schedule"

    def decisions_of(self, point: Sequence[int]) -> Optional[Dict[int, object]]:
        """The sampling decisions of ``point`` by instruction position.

        Returns None when the tile factors of ``point`` are not a perfect
        factorization within the instruction's ``max_innermost_factor``.
        """
        decisions = dict(self.decisions)
        tiles: Dict[int, List[int]] = {}
        for dimension, index in zip(self.dimensions, point):
            value = dimension.values[index]
            if dimension.kind == SAMPLE_PERFECT_TILE:
                factors = tiles.setdefault(
                    dimension.instruction, list(self.decisions[dimension.instruction])
                )
                factors[dimension.level] = value
            elif dimension.kind in (SAMPLE_CATEGORICAL, SAMPLE_COMPUTE_LOCATION):
                decisions[dimension.instruction] = value
        for position, factors in tiles.items():
            original = self.decisions[position]
            extent = 1
            for factor in original:
                extent *= factor
            inner = 1
            for factor in factors[1:]:
                inner *= factor
            if extent % inner != 0:
                return None
            max_innermost_factor = _as_int(self.instructions[position].attrs[1])
            if 0 < max_innermost_factor < factors[-1]:
                return None
            factors[0] = extent // inner
            decisions[position] = tuple(factors)
        return decisions

    def point_of(self, trace: Trace) -> Optional[Point]:
        """The point whose trace is ``trace`` (postprocessing aside), None if there is none.

        Parameters
        ----------
        trace : Trace
            The trace of a tuning record of the same workload.

        Returns
        -------
        point : Optional[Point]
            The point of the space whose trace renders as ``trace`` does; None
            when the trace has another structure or takes a value no dimension has.
        """
        instructions = _instructions(trace)
        if len(instructions) != len(self.instructions):
            return None
        point = []
        for dimension in self.dimensions:
            inst = instructions[dimension.instruction]
            if inst.kind.name != dimension.kind:
                return None
            if dimension.kind == ANNOTATE:
                if not _is_int_constant(inst.inputs[1]):
                    return None
                value = _as_int(inst.inputs[1])
            else:
                decision = trace.get_decision(inst)
                if decision is None:
                    return None
                value = _decision_value(decision)
                if dimension.kind == SAMPLE_PERFECT_TILE:
                    value = value[dimension.level]
            if value not in dimension.values:
                return None
            point.append(dimension.values.index(value))
        point = tuple(point)
        candidate = self.trace_of(point)
        if candidate is None or trace_key(candidate) != trace_key(trace):
            return None
        return point

    def point_like(
        self, trace: Trace, *, is_valid: Optional[Callable[[Point], bool]] = None
    ) -> Optional[Point]:
        """The point that takes over the decisions of another workload's trace.

        ``trace`` schedules another workload with the same instructions (e.g. a
        convolution of other sizes, tuned by the same rules).  Each coordinate
        takes the other trace's value where this space has it: a tile's inner
        factors where they are divisors of this loop and form a perfect tiling
        of it (else the whole tile keeps this space's start), a categorical
        choice among the same candidates, a compute location of the dimension
        where the point replays with it (a place the other loop nest has may
        not exist around this one's tiles), an annotation value of the ladder.
        Other coordinates keep the start's value; whether the point replays is
        otherwise :meth:`schedule`'s question.

        Parameters
        ----------
        trace : Trace
            The trace of a tuning record of another workload.
        is_valid : Optional[Callable[[Point], bool]]
            Whether a point replays into a schedule, asked only when a compute
            location moved; by default whether :meth:`schedule` gives one.  A
            caller that keeps the schedules of its points passes its own, so
            that no point is replayed twice.

        Returns
        -------
        point : Optional[Point]
            None when the trace's instructions (up to its postprocessing) are not
            this space's, kind by kind.
        """
        instructions = _instructions(trace)
        if len(instructions) != len(self.instructions) or any(
            theirs.kind.name != ours.kind.name
            for theirs, ours in zip(instructions, self.instructions)
        ):
            return None
        point = list(self.start)
        tiles: Dict[int, List[Tuple[int, int]]] = {}  # instruction -> (axis, factor)
        for axis, dimension in enumerate(self.dimensions):
            inst = instructions[dimension.instruction]
            if dimension.kind == ANNOTATE:
                if _is_int_constant(inst.inputs[1]):
                    value = _as_int(inst.inputs[1])
                    if value in dimension.values:
                        point[axis] = dimension.values.index(value)
                continue
            decision = trace.get_decision(inst)
            if decision is None:
                continue
            value = _decision_value(decision)
            if dimension.kind == SAMPLE_CATEGORICAL:
                ours = self.instructions[dimension.instruction]
                if [str(item) for item in inst.attrs[0]] == [str(item) for item in ours.attrs[0]]:
                    point[axis] = value
            elif dimension.kind == SAMPLE_COMPUTE_LOCATION:
                if value in dimension.values:
                    point[axis] = dimension.values.index(value)
            elif len(value) == len(self.decisions[dimension.instruction]):
                tiles.setdefault(dimension.instruction, []).append((axis, value[dimension.level]))
        # Each tile is taken over whole, when it is a perfect tiling here (the start's
        # tiles are, so decisions_of judges the tile being taken over).
        for factors in tiles.values():
            if any(factor not in self.dimensions[axis].values for axis, factor in factors):
                continue
            trial = list(point)
            for axis, factor in factors:
                trial[axis] = self.dimensions[axis].values.index(factor)
            if self.decisions_of(trial) is not None:
                point = trial
        moved = [
            axis
            for axis, dimension in enumerate(self.dimensions)
            if dimension.kind == SAMPLE_COMPUTE_LOCATION and point[axis] != self.start[axis]
        ]
        if is_valid is None:
            is_valid = lambda candidate: self.schedule(candidate) is not None
        if moved and not is_valid(tuple(point)):
            for axis in moved:
                point[axis] = self.start[axis]
        return tuple(point)

    def trace_of(self, point: Sequence[int]) -> Optional[Trace]:
        """The trace (without postprocessing) that ``point`` stands for, None if invalid."""
        decisions = self.decisions_of(point)
        if decisions is None:
            return None
        return self._trace(point, decisions)

    def _trace(self, point: Sequence[int], decisions: Dict[int, object]) -> Trace:
        annotations = {
            dimension.instruction: dimension.values[index]
            for dimension, index in zip(self.dimensions, point)
            if dimension.kind == ANNOTATE
        }
        insts = []
        for position, inst in enumerate(self.instructions):
            if position in annotations:
                value = _with_value(inst.inputs[1], annotations[position])
                inst = Instruction(inst.kind, [inst.inputs[0], value], inst.attrs, inst.outputs)
            insts.append(inst)
        trace_decisions = {}
        for position, decision in decisions.items():
            trace_decisions[insts[position]] = (
                list(decision) if isinstance(decision, tuple) else decision
            )
        return Trace(insts, trace_decisions)

    def schedule(self, point: Sequence[int]) -> Optional[Schedule]:
        """The postprocessed schedule of ``point``.

        Returns None when the point is not a perfect tiling, when replaying the
        trace fails or would change (repair) any of its decisions, or when a
        postprocessor rejects the schedule.
        """
        decisions = self.decisions_of(point)
        if decisions is None:
            return None
        sch = Schedule(self.mod, seed=REPLAY_SEED, debug_mask="none", error_render_level="none")
        try:
            self._trace(point, decisions).apply_to_schedule(sch, remove_postproc=True)
        except Exception as error:  # pylint: disable=broad-except
            # Schedule errors differ between TVM versions; any of them rejects the point.
            logger.debug("Point %s does not replay: %s", point, error)
            return None
        replayed = sch.trace
        got = [
            _decision_value(replayed.get_decision(inst))
            for inst in replayed.insts
            if replayed.get_decision(inst) is not None
        ]
        if got != [decisions[position] for position in sorted(decisions)]:
            logger.debug("Point %s was repaired on replay", point)
            return None
        sch.enter_postproc()
        for postproc in self.postprocs:
            if not postproc.apply(sch):
                return None
        return sch
