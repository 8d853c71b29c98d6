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
"""AutoTVM config spaces as the integer points of Droplet Search.

Each knob of a :any:`ConfigSpace` gives one or more dimensions of a point:

- a split knob (``tile_ow = [-1, a, b, c]``) gives one dimension per inner
  factor, over the values that factor takes in the knob's entities.  Its
  entity index orders the factor tuples lexicographically, so index neighbours
  are often unrelated tilings; factor coordinates make a step change one tile
  size to the next.  A point whose factors are not an entity of the knob (a
  filtered or tail-breaking tiling) is not a configuration.  The values that
  divide the split's extent come first, in ascending order, then those that
  leave a tail (the powers of two of the ``verbose`` and ``power2`` policies),
  in ascending order: a tail makes a different loop nest, and a step from one
  divisor to the next should not have to cross it.
- every other knob gives one dimension over its entity indices.

A point is valid when it is a configuration that the space's filters accept
(``ConfigSpace.is_index_valid``).
"""
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from ..task.space import ConfigSpace, SplitSpace

Point = Tuple[int, ...]


def entity_key(entity) -> Hashable:
    """What a knob's entity stands for, comparable across spaces: a split's inner
    sizes, or another knob's value (None for no entity)."""
    if entity is None:
        return None
    size = getattr(entity, "size", None)
    if size is not None:
        return tuple(int(value) for value in size[1:])
    return repr(getattr(entity, "val", entity))


def factor_line(values: Sequence[int], extent: int) -> Tuple[int, ...]:
    """The values of one split factor in the order of their dimension.

    Parameters
    ----------
    values : Sequence[int]
        The values the factor takes.
    extent : int
        The extent of the split loop.

    Returns
    -------
    line : Tuple[int, ...]
        The distinct values, those dividing ``extent`` first, each group ascending.
    """
    return tuple(sorted(set(values), key=lambda value: (extent % value != 0, value)))


class _Knob:
    """The dimensions of one knob and the map between their values and its entities."""

    def __init__(self, name: str, subspace, factors: bool):
        self.name = name
        self.size = len(subspace)
        if factors:
            tilings = [tuple(entity.size[1:]) for entity in subspace.entities]
            self.values: List[Tuple[int, ...]] = [
                factor_line([tiling[position] for tiling in tilings], subspace.product)
                for position in range(len(tilings[0]))
            ]
            self.entity_of: Optional[Dict[Point, int]] = {}
            self.coordinates: Optional[List[Point]] = []
            for entity_index, tiling in enumerate(tilings):
                coordinates = tuple(
                    values.index(value) for values, value in zip(self.values, tiling)
                )
                self.entity_of.setdefault(coordinates, entity_index)
                self.coordinates.append(coordinates)
            self.dims = [len(values) for values in self.values]
        else:
            self.entity_of = self.coordinates = None
            self.dims = [self.size]


class KnobGeometry:
    """Points of Droplet Search <-> config indices of an AutoTVM config space.

    Parameters
    ----------
    space : ConfigSpace
        The task's config space.
    factors : bool
        Whether split knobs get one dimension per inner factor (see the module
        documentation); one dimension per knob (its entity index) otherwise.
    """

    def __init__(self, space: ConfigSpace, factors: bool = True):
        self.space = space
        self.knobs: List[_Knob] = []
        for name, subspace in space.space_map.items():
            split = isinstance(subspace, SplitSpace) and len(subspace) > 1
            self.knobs.append(_Knob(name, subspace, factors and split))
        self.dims: Point = tuple(size for knob in self.knobs for size in knob.dims)
        self._entity_indices: Optional[List[Dict[Hashable, int]]] = None

    def knobs_of_entities(self, entities: Mapping[str, object]) -> Optional[List[int]]:
        """The knob indices of the config whose knobs have the values of ``entities``.

        Parameters
        ----------
        entities : Mapping[str, object]
            Entities by knob name, as a config of another space or a fallback
            config holds them (``ConfigEntity._entity_map``).

        Returns
        -------
        knob_indices : Optional[List[int]]
            One entity index per knob of this space; None when a knob is missing
            from ``entities`` or has no entity of that value here.
        """
        if self._entity_indices is None:
            self._entity_indices = []
            for subspace in self.space.space_map.values():
                indices: Dict[Hashable, int] = {}
                for index, entity in enumerate(subspace.entities):
                    indices.setdefault(entity_key(entity), index)
                self._entity_indices.append(indices)
        knobs = []
        for name, indices in zip(self.space.space_map, self._entity_indices):
            index = indices.get(entity_key(entities.get(name)))
            if index is None:
                return None
            knobs.append(index)
        return knobs

    def knob_indices(self, point: Sequence[int]) -> Optional[List[int]]:
        """The entity index of every knob at ``point``; None when a split is no entity."""
        indices, position = [], 0
        for knob in self.knobs:
            width = len(knob.dims)
            coordinates = tuple(point[position : position + width])
            position += width
            if knob.entity_of is None:
                indices.append(coordinates[0])
                continue
            entity = knob.entity_of.get(coordinates)
            if entity is None:
                return None
            indices.append(entity)
        return indices

    def index(self, point: Sequence[int]) -> Optional[int]:
        """The config index of ``point``, None when it is not a configuration."""
        indices = self.knob_indices(point)
        return None if indices is None else int(self.space.knob2point(indices))

    def point(self, index: int) -> Point:
        """The point of config ``index``."""
        return self.point_of_knobs(self.space.point2knob(index))

    def point_of_knobs(self, knob_indices: Sequence[int]) -> Point:
        """The point of a vector of knob entity indices."""
        point: List[int] = []
        for knob, entity in zip(self.knobs, knob_indices):
            if knob.coordinates is None:
                point.append(int(entity))
            else:
                point.extend(knob.coordinates[int(entity)])
        return tuple(point)

    def is_valid(self, point: Sequence[int]) -> bool:
        """Whether ``point`` is a configuration the space's filters accept."""
        index = self.index(point)
        return index is not None and bool(self.space.is_index_valid(index))

    def describe(self) -> str:
        """The knobs and their dimensions, for messages."""
        return ", ".join("%s (%d values)" % (knob.name, knob.size) for knob in self.knobs)
