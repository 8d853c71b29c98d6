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
"""The search space of a MetaSchedule tuning record's decisions (TraceSpace)."""
import numpy as np
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import te
from tvm.meta_schedule.post_optimization import TraceSpace
from tvm.meta_schedule.post_optimization.trace_space import annotation_ladder, divisors
from tvm.meta_schedule.testing import te_workload
from tvm.tir.schedule import Schedule

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SIZE = 128


def matmul(size: int = SIZE) -> tvm.IRModule:
    """C = A @ B for square float32 matrices."""
    func = te.create_prim_func(te_workload.matmul(size, size, size))
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


def sampled_space(size: int, rand_state: int):
    """A sampled design-space trace of a ``size`` matmul, and its space."""
    context = ms.TuneContext(
        mod=matmul(size), target=TARGET, space_generator="post-order-apply", rand_state=rand_state
    )
    trace = context.generate_design_space()[0].trace
    return trace, TraceSpace(trace, matmul(size), context.space_generator.postprocs)


def tile_extents(space):
    extents = {}
    for position, decision in space.decisions.items():
        if space.instructions[position].kind.name == "SamplePerfectTile":
            extents[position] = int(np.prod(decision))
    return extents


@pytest.mark.parametrize(
    "extent, expected",
    [(1, (1,)), (7, (1, 7)), (12, (1, 2, 3, 4, 6, 12)), (16, (1, 2, 4, 8, 16))],
)
def test_divisors_ascending(extent, expected):
    """A perfect tile's factors are the divisors of its extent, smallest first."""
    assert divisors(extent) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(0, (0, 1, 2, 4, 8)), (3, (1, 2, 3, 4, 8, 16)), (16, (1, 2, 4, 8, 16, 32, 64, 128))],
)
def test_annotation_ladder_keeps_the_value(value, expected):
    """An annotation's candidates: powers of two around its value, and the value itself."""
    assert annotation_ladder(value) == expected


@tvm.testing.requires_llvm
def test_space_candidates_replay_without_repair():
    """Every valid point replays with exactly its decisions; tiles are perfect."""
    _, space = sampled_space(SIZE, rand_state=7)
    kinds = {dimension.kind for dimension in space.dimensions}
    assert {"SamplePerfectTile", "SampleCategorical", "Annotate"} <= kinds
    extents = tile_extents(space)
    points = [space.start]
    for radius in (1, 2, 3):
        for axis, size in enumerate(space.dims):
            for step in (radius, -radius):
                if 0 <= space.start[axis] + step < size:
                    point = list(space.start)
                    point[axis] += step
                    points.append(tuple(point))
    valid = 0
    for point in points:
        decisions = space.decisions_of(point)
        if decisions is None:
            continue
        for position, extent in extents.items():
            assert int(np.prod(decisions[position])) == extent
        sch = Schedule(matmul(), debug_mask="all")
        space.trace_of(point).apply_to_schedule(sch, remove_postproc=True)
        replayed = [
            sch.trace.get_decision(inst)
            for inst in sch.trace.insts
            if sch.trace.get_decision(inst) is not None
        ]
        wanted = [decisions[position] for position in sorted(decisions)]
        for got, want in zip(replayed, wanted):
            if isinstance(want, tuple):
                assert tuple(int(v) for v in got) == want
            else:
                assert int(got) == want
        assert len(replayed) == len(wanted)
        valid += 1
    assert valid > len(space.dims)
    assert space.schedule(space.start) is not None


@tvm.testing.requires_llvm
def test_record_is_the_start_point():
    """The record is the start and other traces are no points."""
    trace, space = sampled_space(SIZE, rand_state=7)
    assert space.point_of(trace) == tuple(space.start)
    assert len(space.dims) == len(space.start) and all(size >= 1 for size in space.dims)
    # A tiling whose factors do not divide the extent is no point of the space.
    tile = next(d for d in space.dimensions if d.kind == "SamplePerfectTile")
    axis = space.dimensions.index(tile)
    imperfect = [
        index
        for index in range(space.dims[axis])
        if space.decisions_of(tuple(index if a == axis else s for a, s in enumerate(space.start)))
        is None
    ]
    for index in imperfect:
        point = tuple(index if a == axis else s for a, s in enumerate(space.start))
        assert space.schedule(point) is None and space.trace_of(point) is None


def padded_conv2d() -> tvm.IRModule:
    """A 3x3 convolution with padding: its padding block gets a sampled compute location."""
    func = te.create_prim_func(te_workload.conv2d_nhwc(1, 14, 14, 16, 16, 3, 1, 1))
    return tvm.IRModule({"main": func.with_attr("global_symbol", "main")})


@tvm.testing.requires_llvm
def test_compute_location_is_a_dimension():
    """Where the padding is computed is a dimension; each place replays as that decision."""
    context = ms.TuneContext(
        mod=padded_conv2d(), target=TARGET, space_generator="post-order-apply", rand_state=1
    )
    trace = context.generate_design_space()[0].trace
    space = TraceSpace(trace, padded_conv2d(), context.space_generator.postprocs)
    axis = next(
        axis
        for axis, dimension in enumerate(space.dimensions)
        if dimension.kind == "SampleComputeLocation"
    )
    dimension = space.dimensions[axis]
    original = space.decisions[dimension.instruction]
    assert dimension.values[:2] == (-2, -1) and dimension.values[space.start[axis]] == original
    assert space.point_of(trace) == tuple(space.start)
    places = []
    for index, value in enumerate(dimension.values):
        point = tuple(index if a == axis else s for a, s in enumerate(space.start))
        sch = space.schedule(point)
        if sch is None:
            continue
        (decision,) = [
            sch.trace.get_decision(inst)
            for inst in sch.trace.insts
            if inst.kind.name == "SampleComputeLocation"
        ]
        assert int(decision) == value
        assert space.point_of(space.trace_of(point)) == point
        places.append(value)
    # The root and at least two loops around the convolution; not every loop is a place.
    assert -1 in places and len(places) >= 3, places
    assert len(places) < len(dimension.values)
    # Another trace's place is taken over where it replays here, else the start's is kept.
    asked = []

    def reject(candidate):
        asked.append(candidate)
        return False

    for index, value in enumerate(dimension.values):
        point = tuple(index if a == axis else s for a, s in enumerate(space.start))
        taken = space.point_like(space.trace_of(point))
        assert taken == (point if value in places else tuple(space.start))
        # A caller that keeps its schedules judges the moved place itself, once.
        asked.clear()
        rejected = space.point_like(space.trace_of(point), is_valid=reject)
        assert rejected == tuple(space.start)
        assert asked == ([] if point == tuple(space.start) else [point])
    moved = next(value for value in places if value != original)
    point = tuple(
        dimension.values.index(moved) if a == axis else s for a, s in enumerate(space.start)
    )
    assert f"compute_location#{dimension.instruction}={moved}" in space.describe(point)


def tiles_and_choices(space, point):
    """The inner tile factors and categorical choices of a point, by instruction."""
    decisions = space.decisions_of(point)
    return {
        position: decision[1:] if isinstance(decision, tuple) else decision
        for position, decision in decisions.items()
        if space.instructions[position].kind.name in ("SamplePerfectTile", "SampleCategorical")
    }


@tvm.testing.requires_llvm
def test_point_like_takes_over_other_decisions():
    """Another workload's trace maps where this loop nest allows it, else keeps the start."""
    small_trace, small = sampled_space(SIZE // 2, rand_state=3)
    large_trace, large = sampled_space(SIZE, rand_state=5)
    small_decisions = tiles_and_choices(small, small.start)
    large_decisions = tiles_and_choices(large, large.start)
    assert small_decisions != large_decisions
    # Into the 128 matmul: every inner tiling of 64 divides 128, so all is taken over.
    point = large.point_like(small_trace)
    assert tiles_and_choices(large, point) == small_decisions
    assert large.schedule(point) is not None
    # Into the 64 matmul: a tile of 128 whose inner factors do not divide 64 keeps the start.
    point = small.point_like(large_trace)
    taken = tiles_and_choices(small, point)
    kept = 0
    for position, inner in taken.items():
        if not isinstance(inner, tuple):
            assert inner == large_decisions[position]
        elif (SIZE // 2) % int(np.prod(large_decisions[position])) == 0:
            assert inner == large_decisions[position]
        else:
            assert inner == small_decisions[position]
            kept += 1
    assert kept > 0, "the traces were chosen to have a tile of 128 that 64 cannot take"
    assert small.point_like(tvm.tir.schedule.Trace(large_trace.insts[:3], {})) is None


if __name__ == "__main__":
    tvm.testing.main()
