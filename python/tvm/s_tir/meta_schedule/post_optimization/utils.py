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
"""Deprecated helpers of the first post-optimization (apache/tvm#17104).

They read and write the JSON-lines files of a tuning work directory by hand.
The post-optimizer now reads and commits through MetaSchedule's
:class:`~tvm.s_tir.meta_schedule.database.Database` API (see
:func:`~.post_optimizer.post_optimize`); these functions keep their behaviour
and warn with a :class:`DeprecationWarning` naming the replacement.
"""

import json
import os
import warnings
from statistics import fmean
from typing import Any, Dict, List


def deprecated(name: str, replacement: str) -> None:
    """Warn that ``name`` of ``post_optimization`` is deprecated in favour of ``replacement``."""
    warnings.warn(
        f"tvm.s_tir.meta_schedule.post_optimization.{name} is deprecated and will be removed; "
        f"use {replacement}",
        DeprecationWarning,
        stacklevel=3,
    )


def append_lines(json_list: list, log: str, mode: str = "w") -> str:
    """Write each value of ``json_list`` as one JSON line of ``log``; returns ``log``."""
    with open(log, mode, encoding="utf-8") as outfile:
        for value in json_list:
            outfile.write(json.dumps(value) + "\n")
    return log


def write_file(json_list: list, log: str = "/tmp/file.json", mode: str = "w") -> str:
    """Write JSON values to a file, one per line (deprecated).

    Parameters
    ----------
    json_list : list
        The JSON values.
    log : str
        The file to write.
    mode : str
        ``"a"`` appends, ``"w"`` overwrites.

    Returns
    -------
    log : str
        The path of the file.
    """
    deprecated("write_file", "Database.commit_tuning_record of a JSONDatabase")
    return append_lines(json_list, log, mode)


def clean_file(filename: str) -> None:
    """Remove a file if it exists (deprecated).

    Parameters
    ----------
    filename : str
        The file to remove.
    """
    deprecated("utils.clean_file", "os.remove")
    if os.path.isfile(filename):
        os.remove(filename)


def best_line(log: str) -> List[Any]:
    """``[run_secs, line]`` of the line of ``log`` with the lowest mean run time."""
    best: List[Any] = [[1e10], None]
    with open(log, encoding="utf-8") as log_file:
        for line in log_file:
            data = json.loads(line)
            run_secs = data[1][1]
            if fmean(best[0]) > fmean(run_secs):
                best = [run_secs, data]
    return best


def get_time(log: str) -> list:
    """The fastest record of a JSON-lines tuning log (deprecated).

    Parameters
    ----------
    log : str
        Lines ``[workload index, [trace, run_secs, target, args_info]]``.

    Returns
    -------
    best : list
        ``[run_secs, line]`` of the fastest line (``[[1e10], None]`` for none).
    """
    deprecated("get_time", "Database.get_top_k, or the results of post_optimize")
    return best_line(log)


def read_cfg_file(path_tuning_file: str, path_workload_file: str) -> Dict[int, list]:
    """The fastest record of each workload of a tuning work directory (deprecated).

    Parameters
    ----------
    path_tuning_file : str
        The ``database_tuning_record.json`` of a JSONDatabase.
    path_workload_file : str
        Its ``database_workload.json``.

    Returns
    -------
    records : Dict[int, list]
        For each workload index, ``[run_secs, line, workload line]``.
    """
    deprecated("utils.read_cfg_file", "Database.get_top_k of a JSONDatabase")
    with open(path_workload_file, encoding="utf-8") as log_file:
        workloads = [json.loads(line) for line in log_file]
    records: Dict[int, list] = {}
    with open(path_tuning_file, encoding="utf-8") as log_file:
        for line in log_file:
            data = json.loads(line)
            layer, run_secs = data[0], data[1][1]
            if layer not in records or fmean(records[layer][0]) > fmean(run_secs):
                records[layer] = [run_secs, data, workloads[layer]]
    return records
