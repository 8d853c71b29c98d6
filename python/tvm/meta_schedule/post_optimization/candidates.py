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
"""Candidates of a post-optimization, one per distinct program."""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from tvm.ir import IRModule
from tvm.tir.schedule import Schedule

from ..database import TuningRecord
from .space import Point

# Structural equality moved from tvm.ir to the tvm-ffi package in newer TVM.
try:
    from tvm_ffi import structural_equal, structural_hash
except ImportError:
    from tvm.ir import structural_equal, structural_hash


@dataclass
class Candidate:
    """A scheduled program and the search points that produce it.

    Parameters
    ----------
    schedule : Schedule
        The postprocessed schedule (its trace is what a tuning record stores).
    points : List[Point]
        The search points whose schedules are structurally equal to this one.
    run_secs : Optional[list]
        The measured times, once evaluated; None when the measurement failed
        (or before it).
    measured : bool
        Whether the candidate was evaluated: built and run, or recovered.
    recovered : bool
        Whether its run times come from a record already in the database
        instead of the builder and runner.
    record : Optional[TuningRecord]
        The record this post-optimization committed for it, if it was measured.
    """

    schedule: Schedule
    points: List[Point] = field(default_factory=list)
    run_secs: Optional[list] = None
    measured: bool = False
    recovered: bool = False
    record: Optional[TuningRecord] = None

    @property
    def mod(self) -> IRModule:
        """The scheduled module."""
        return self.schedule.mod

    @property
    def costs(self) -> Tuple[float, ...]:
        """The measured times in seconds; empty when not measured or failed."""
        return seconds(self.run_secs)


def seconds(run_secs: Optional[list]) -> Tuple[float, ...]:
    """Run times as floats (runners report FloatImm); empty for None (a failure)."""
    if not run_secs:
        return ()
    return tuple(float(getattr(secs, "value", secs)) for secs in run_secs)


class CandidateTable:
    """Candidates keyed by structural equality of their scheduled modules.

    Two search points whose schedules lower to structurally equal modules are
    the same program: the table returns the same candidate for both, so the
    program is built and run once.
    """

    def __init__(self) -> None:
        self._buckets: Dict[int, List[Candidate]] = {}

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets.values())

    def find_or_add(self, schedule: Schedule) -> Tuple[Candidate, bool]:
        """The candidate whose module equals ``schedule.mod``, and whether it is new.

        Parameters
        ----------
        schedule : Schedule
            A postprocessed schedule.

        Returns
        -------
        candidate, added : Tuple[Candidate, bool]
            The existing candidate of a structurally equal module (``added``
            False), or a new candidate holding ``schedule`` (``added`` True).
        """
        mod = schedule.mod
        bucket = self._buckets.setdefault(structural_hash(mod), [])
        for candidate in bucket:
            if structural_equal(candidate.mod, mod):
                return candidate, False
        candidate = Candidate(schedule)
        bucket.append(candidate)
        return candidate, True
