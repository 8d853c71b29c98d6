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
"""Identity and run times of the programs a post-optimization measures."""
from typing import Optional, Tuple

from tvm.ir import IRModule
from tvm.ir import structural_equal, structural_hash


def seconds(run_secs: Optional[list]) -> Tuple[float, ...]:
    """Run times as floats (runners report FloatImm); empty for None (a failure)."""
    if not run_secs:
        return ()
    return tuple(float(getattr(secs, "value", secs)) for secs in run_secs)


class ProgramKey:
    """A scheduled module as a dictionary key: equal when structurally equal.

    Two search points whose postprocessed schedules are structurally equal are
    the same program, measured once.

    Parameters
    ----------
    mod : IRModule
        The scheduled module.
    """

    def __init__(self, mod: IRModule):
        self.mod = mod
        self._hash = int(structural_hash(mod))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, ProgramKey)
            and self._hash == other._hash
            and bool(structural_equal(self.mod, other.mod))
        )
