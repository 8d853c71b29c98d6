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
"""What a Droplet Search reports: one result per task, and short error messages."""
import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class DropletResult:
    """What Droplet Search did for one task.

    Parameters
    ----------
    name : str
        The task: its name, workload key or structural hash.
    target : Any
        The target its programs were built and measured for.
    before : float
        The mean cost (seconds) of the start, measured alongside the first
        candidates when it was measured again, else as recorded.
    after : float
        The mean cost of the best point found; ``before`` when nothing faster
        was found.
    measured : int
        Programs built and run by this search, the start's re-measurement
        included; every one is recorded in the log or database.
    reused : int
        Points whose costs were taken from records made before the search (the
        start and earlier measurements of an interrupted search).
    wrong_outputs : int
        Measured programs whose outputs differ from the start's, recorded as failures.
    stop_reason : str
        Why the search ended.
    converged_after : Optional[int]
        Measurements when the neighbourhood of the best point was exhausted
        (where the original Droplet Search stops); None when the search ended
        before.
    record : Any
        The record of the best program found, when it is faster than the start.
    """

    name: str
    target: Any
    before: float
    after: float
    measured: int
    reused: int = 0
    wrong_outputs: int = 0
    stop_reason: str = ""
    converged_after: Optional[int] = None
    record: Any = None

    @property
    def speedup(self) -> float:
        """``before / after``: 1.0 when nothing improved, infinity for a cost of zero."""
        if self.after == self.before:
            return 1.0
        if self.after <= 0:
            return math.inf
        return self.before / self.after

    @property
    def improved(self) -> bool:
        """Whether a program faster than the start was found (its record is ``record``)."""
        return self.record is not None

    def followed_by(self, later: "DropletResult") -> "DropletResult":
        """This search and ``later``, which continued it from its best program, as one.

        The start and its cost are this search's, the best found is the later's
        (or this search's, when the later found nothing faster than its start),
        and the counts add up.

        Parameters
        ----------
        later : DropletResult
            The result of the search that continued this one.

        Returns
        -------
        result : DropletResult
            A copy of ``later`` covering both searches.
        """
        converged = later.converged_after
        best = later if later.record is not None else self
        return dataclasses.replace(
            later,
            before=self.before,
            after=best.after,
            record=best.record,
            measured=self.measured + later.measured,
            reused=self.reused,
            wrong_outputs=self.wrong_outputs + later.wrong_outputs,
            converged_after=None if converged is None else self.measured + converged,
        )


_FRAME = re.compile(r"^\d+: ")
"""A frame of TVM's C++ backtrace (``12: tvm::relay::ErrorReporter::...``)."""

_ERROR_LINE = re.compile(r"^([\w.]*(Error|Exception)\b|.*Check failed)")
"""A line that names an error (``TVMError: ...``) or a failed check."""


def error_summary(error: BaseException) -> str:
    """The line of an error message that says what failed, at most 300 characters.

    TVM's messages carry a backtrace; the first line that starts with the
    name of an error or says a check failed is the useful one, else the first
    line outside the backtrace that mentions an error, else the last line.

    Parameters
    ----------
    error : BaseException
        The error (or an error message wrapped in an exception).

    Returns
    -------
    summary : str
        One line.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    messages = [line for line in lines if not _FRAME.match(line)]
    for line in messages:
        if _ERROR_LINE.match(line):
            return line[:300]
    for line in messages:
        if "Error" in line:
            return line[:300]
    return lines[-1][:300] if lines else type(error).__name__
