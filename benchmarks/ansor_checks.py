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
"""Ansor logs whose fastest states compute wrong values, marked in a copy.

The legacy build compiles some of Ansor's tuned states into kernels that compute wrong values
(``ENVIRONMENT.md``), and Ansor's own search does not check outputs: when such a kernel is the
fastest record of its task, ``ApplyHistoryBest`` builds the network with it, and a comparison
with that build compares with a network that is fast because it is wrong. Droplet's exploitation
checks its candidates and records a wrong one as ``WRONG_ANSWER``; :class:`StateVerdicts` and
:func:`mark_wrong` do the same for the records of a log that a build or a replay would start
from. Each state is built and run by the library's ``StateOutputChecker`` against its task's
unscheduled program; a wrong one is written to a copy of the log with error ``WRONG_ANSWER`` and
its costs unchanged, every record of the same state too. The log itself is never modified.
"""
import json
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import tvm
from tvm import auto_scheduler
from tvm.auto_scheduler.droplet_log import costs_of, state_key
from tvm.auto_scheduler.measure import MeasureErrorNo
from tvm.auto_scheduler.measure_record import load_record_from_string
from tvm.auto_scheduler.state_output_check import StateOutputChecker


def unoptimized(task: auto_scheduler.SearchTask) -> auto_scheduler.SearchTask:
    """The same task for its target at LLVM's ``-opt-level=0``."""
    return auto_scheduler.SearchTask(
        compute_dag=task.compute_dag,
        workload_key=task.workload_key,
        target=tvm.target.Target(f"{task.target} -opt-level=0"),
        hardware_params=task.hardware_params,
        layout_rewrite_option=task.layout_rewrite_option,
    )


class StateVerdicts:
    """Whether states compute their task's outputs, each state checked once.

    The checking process starts at the first check and ends with :meth:`close`; the verdicts
    are kept across :meth:`close`, so one object serves every log of a run.
    """

    def __init__(self):
        self._verdicts: Dict[Tuple[str, str], Optional[str]] = {}
        self._checker: Optional[StateOutputChecker] = None
        self._referenced = ""

    def _checker_of(self, task: auto_scheduler.SearchTask) -> StateOutputChecker:
        """The checking process, with ``task``'s unscheduled program as its reference."""
        if self._checker is None:
            self._checker = StateOutputChecker()
        if self._referenced != task.workload_key:
            self._checker.set_reference(task, task.compute_dag.get_init_state())
            self._referenced = task.workload_key
        return self._checker

    def difference(self, task: auto_scheduler.SearchTask, measure_input) -> Optional[str]:
        """None when the state of ``measure_input`` computes the outputs of ``task``'s
        unscheduled program; otherwise how it differs."""
        key = (task.workload_key, state_key(measure_input))
        if key not in self._verdicts:
            self._verdicts[key] = self._checker_of(task).difference(task, measure_input.state)
        return self._verdicts[key]

    def at_opt_level_0(self, task: auto_scheduler.SearchTask, measure_input) -> str:
        """How a wrong state's outputs compare at LLVM's ``-opt-level=0``: a state right there
        is a miscompile, not a schedule that computes something else."""
        difference = self._checker_of(task).difference(unoptimized(task), measure_input.state)
        return "right at -opt-level=0 (a miscompile)" if difference is None else f"at -opt-level=0 too: {difference}"

    def close(self) -> None:
        """End the checking process (a later check starts another)."""
        if self._checker is not None:
            self._checker.close()
            self._checker = None
            self._referenced = ""


def mark_wrong(
    source: Path,
    copy: Path,
    tasks: Dict[str, auto_scheduler.SearchTask],
    verdicts: StateVerdicts,
    running_bests: bool = False,
    opt_level_0: bool = False,
) -> List[str]:
    """Write ``source`` to ``copy`` with wrong states of ``tasks`` marked ``WRONG_ANSWER``.

    Parameters
    ----------
    source : Path
        An auto-scheduler log; it is only read.
    copy : Path
        The checked copy, written only when a state is marked.
    tasks : Dict[str, SearchTask]
        The tasks to check, by workload key (records of other tasks are copied as they are).
    verdicts : StateVerdicts
        The checks, and those made before.
    running_bests : bool
        False: the fastest state of each task is checked, then the next fastest while the
        fastest is wrong, so that the best record of every task in the copy is a right one
        (what ``ApplyHistoryBest`` builds). True: every record that is, at its line, faster
        than every earlier right record of its task is checked, so that the best record of
        every prefix of the copy is a right one (e.g. of each round that
        ``ansor_replay.py --rounds`` starts from).
    opt_level_0 : bool
        Check each wrong state again at LLVM's ``-opt-level=0`` and say how it compares.

    Returns
    -------
    found : List[str]
        One line per wrong state: the line of its first record, its task (its rank in
        ``tasks``), its cost and how its outputs differ.
    """
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    order = {key: rank + 1 for rank, key in enumerate(tasks)}
    # (task key, state key), cost, input; in line order
    candidates: List[Tuple[Tuple[str, str], float, object]] = []
    lines_of_state: Dict[Tuple[str, str], List[int]] = {}
    for number, line in enumerate(lines, start=1):
        measure_input, result = load_record_from_string(line)
        key, costs = measure_input.task.workload_key, costs_of(result)
        if key not in tasks or not costs:
            continue
        state = (key, state_key(measure_input))
        lines_of_state.setdefault(state, []).append(number)
        candidates.append((state, statistics.fmean(costs), measure_input))
    if not running_bests:
        candidates.sort(key=lambda candidate: candidate[1])
    wrong: Dict[Tuple[str, str], str] = {}
    settled: Dict[str, float] = {}  # task -> cost of its fastest right record so far
    for state, cost, measure_input in candidates:
        key = state[0]
        if key in settled and (not running_bests or cost >= settled[key]):
            continue
        if state in wrong:
            continue
        difference = verdicts.difference(tasks[key], measure_input)
        if difference is None:
            settled[key] = cost
            continue
        wrong[state] = (
            f"{source.name} line {lines_of_state[state][0]}, task {order[key]}, {cost * 1e3:.3f} ms: "
            f"{difference}"
        )
        if opt_level_0:
            wrong[state] += "; " + verdicts.at_opt_level_0(tasks[key], measure_input)
        for marked in lines_of_state[state]:
            record = json.loads(lines[marked - 1])
            record["r"][1] = int(MeasureErrorNo.WRONG_ANSWER)
            lines[marked - 1] = json.dumps(record) + "\n"
    if wrong:
        copy.write_text("".join(lines), encoding="utf-8")
    return list(wrong.values())
