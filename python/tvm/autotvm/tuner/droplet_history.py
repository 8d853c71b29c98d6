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
"""Tuning records read by :meth:`DropletTuner.load_history`.

A history is read whole and checked before the search is touched: a log cut by
a crash, or a line that is not a record, is named with its line number, and
the records of other workloads, other targets or configs of another space are
counted and left out of the task's own history; the fastest configs of other
workloads of the same template and target are kept apart, for a search that
starts without records of its own.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Set, Tuple, Union

from tvm.contrib.droplet_search import error_summary, mean
from tvm.contrib.droplet_search.journal import check_json_lines

from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from ..record import decode
from ..task.space import ConfigEntity

Record = Tuple[MeasureInput, MeasureResult]

_UNREADABLE = (
    "a log cut by a crash in the middle of a write ends with such a line, and TVM's own readers "
    "(autotvm.record.load_from_file, apply_history_best, tvmc --tuning-records) reject the whole "
    "log: remove or repair the line, then resume"
)


def read_records(data_set: Union[str, bytes, os.PathLike, Iterable[Record]]) -> List[Record]:
    """All tuning records of a history, or a ValueError naming the first unreadable one.

    Parameters
    ----------
    data_set : Union[str, os.PathLike, Iterable[Tuple[MeasureInput, MeasureResult]]]
        The path of an AutoTVM log, or records such as
        ``autotvm.record.load_from_file(path)`` yields.

    Returns
    -------
    records : List[Tuple[MeasureInput, MeasureResult]]
        The records, in order.
    """
    records: List[Record] = []
    if isinstance(data_set, (str, bytes, os.PathLike)):
        path = os.fsdecode(data_set)
        check_json_lines(path, "the AutoTVM log", comment_prefixes=(b"#",))
        with open(path) as log:
            for line_number, row in enumerate(log, 1):
                if row.startswith("#"):  # as autotvm.record.load_from_file
                    continue
                try:
                    record = decode(row)
                except Exception as error:  # pylint: disable=broad-except
                    raise ValueError(
                        f"line {line_number} of the AutoTVM log {path} is not an AutoTVM tuning "
                        f"record ({error_summary(error)}); {_UNREADABLE}"
                    ) from error
                if record is not None:
                    records.append(record)
        return records
    iterator = iter(data_set)
    while True:
        try:
            record = next(iterator)
        except StopIteration:
            break
        except OSError:
            raise
        except Exception as error:  # pylint: disable=broad-except
            raise ValueError(
                f"the tuning records cannot be read after {len(records)} records: the next line "
                f"is not an AutoTVM tuning record ({error_summary(error)}); {_UNREADABLE}"
            ) from error
        try:
            inp, res = record
        except (TypeError, ValueError):
            inp = res = None
        if not isinstance(inp, MeasureInput) or not isinstance(res, MeasureResult):
            raise TypeError(
                "DropletTuner.load_history takes (MeasureInput, MeasureResult) pairs, as "
                f"autotvm.record.load_from_file yields, or a log path; item {len(records)} is "
                f"{record!r:.200}"
            )
        records.append((inp, res))
    return records


@dataclass
class TaskHistory:
    """The records of one task (workload and target) in a history.

    Parameters
    ----------
    costs : Dict[int, List[float]]
        The costs of each config measured successfully, pooled over its records.
    failed : Set[int]
        The configs with a failed record.
    skipped : Dict[str, int]
        Records left out because of their ``workload``, their ``target``, or a
        config that is not in the task's ``space``.
    related : Dict[tuple, List[ConfigEntity]]
        The successful configs of each other workload of the task's template
        and target (another task of the same network, say), fastest first: by
        the mean cost of their fastest record.
    """

    costs: Dict[int, List[float]] = field(default_factory=dict)
    failed: Set[int] = field(default_factory=set)
    skipped: Dict[str, int] = field(
        default_factory=lambda: {"workload": 0, "target": 0, "space": 0}
    )
    related: Dict[tuple, List[ConfigEntity]] = field(default_factory=dict)


def task_history(task, records: Iterable[Record]) -> TaskHistory:
    """The successful and failed configs of ``task`` among ``records``."""
    history = TaskHistory()
    target = str(task.target)
    # Per related workload: config index -> (lowest mean cost, config).
    related: Dict[tuple, Dict[int, Tuple[float, ConfigEntity]]] = {}
    for inp, res in records:
        if inp.task.workload != task.workload:
            history.skipped["workload"] += 1
            if inp.task.name == task.name and str(inp.target) == target and _succeeded(res):
                cost = mean(res.costs)
                configs = related.setdefault(inp.task.workload, {})
                known = configs.get(inp.config.index)
                if known is None or cost < known[0]:
                    configs[inp.config.index] = (cost, inp.config)
        elif str(inp.target) != target:
            history.skipped["target"] += 1
        elif not _config_in_space(task.config_space, inp.config):
            history.skipped["space"] += 1
        elif _succeeded(res):
            history.costs.setdefault(inp.config.index, []).extend(float(c) for c in res.costs)
        else:
            history.failed.add(inp.config.index)
    for workload, configs in related.items():
        ranked = sorted(configs.values(), key=lambda item: item[0])
        history.related[workload] = [config for _, config in ranked]
    return history


def _succeeded(result: MeasureResult) -> bool:
    return result.error_no == MeasureErrorNo.NO_ERROR and len(result.costs) > 0


def _config_in_space(space, config) -> bool:
    """Whether a logged config is the valid config of the same index in ``space``."""
    index = config.index
    if not 0 <= index < space.range_length or not space.is_index_valid(index):
        return False

    def entities(entity):
        return json.loads(json.dumps(entity.to_json_dict()["entity"]))

    return entities(config) == entities(space.get(index))
