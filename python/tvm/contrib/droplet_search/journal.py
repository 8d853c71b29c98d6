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
"""Checks of the JSON-lines files the Droplet integrations read and append to.

AutoTVM logs, auto-scheduler logs and MetaSchedule's JSON databases hold one
JSON record per line, and the integrations append to them.  A process killed
while writing leaves a last line cut short, or a complete line without its
newline, after which an appended record would be glued to it; TVM's readers
then fail without naming the file.  :func:`check_json_lines` names the file and
the line instead, and never changes the file.
"""
import json
import os
from typing import Tuple


def check_json_lines(path: str, what: str, comment_prefixes: Tuple[bytes, ...] = ()) -> int:
    """Check that every line of a JSON-lines file is a complete JSON value.

    Lines starting with one of ``comment_prefixes`` are skipped, the comments
    the file's TVM reader skips; a blank line is refused, as TVM's readers
    fail on it.

    Parameters
    ----------
    path : str
        The file; a missing or empty file holds no line.
    what : str
        What the file is, for messages (e.g. ``"the auto-scheduler log"``).
    comment_prefixes : Tuple[bytes, ...]
        How the lines that the file's reader skips start: ``(b"#",)`` for
        AutoTVM logs, ``(b"#", b" ")`` for auto-scheduler logs, none for
        MetaSchedule's JSON databases.

    Returns
    -------
    records : int
        The number of JSON lines.

    Raises
    ------
    ValueError
        Naming the file and the line: a blank line, a line that is not JSON
        (cut short by a process stopped mid-write, when it is the last one), or
        a last line without its newline.
    """
    if not os.path.isfile(path):
        return 0
    with open(path, "rb") as stream:
        lines = stream.read().split(b"\n")
    records = 0
    for number, line in enumerate(lines[:-1], start=1):
        if comment_prefixes and line.startswith(comment_prefixes):
            continue
        if not line.strip():
            raise ValueError(
                f"line {number} of {what} {path} is not a JSON record but a blank line, on "
                "which TVM's reader of the file fails; remove that line before using the file; "
                "it was not changed"
            )
        try:
            json.loads(line.decode("utf-8"))
        except ValueError:
            last = number == len(lines) - 1
            raise ValueError(
                f"line {number} of {what} {path} is not a JSON record"
                f"{' (cut short: the process writing it was stopped mid-write?)' if last else ''}; "
                "remove or repair that line before using the file; it was not changed"
            ) from None
        records += 1
    if lines[-1].strip():
        try:
            json.loads(lines[-1].decode("utf-8"))
            state = "is complete but has no newline"
        except ValueError:
            state = "was cut short by a process stopped mid-write"
        raise ValueError(
            f"{what} {path} does not end with a newline: its last record (line {len(lines)}) "
            f"{state}, and records appended to the file would be glued to it; remove or "
            "complete that line before using the file; it was not changed"
        )
    return records
