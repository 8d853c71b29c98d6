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
"""Where Ansor's longer run found its best states: inside Droplet's space, or outside it.

    python3 ci/tvm_env.py run legacy python benchmarks/networks.py --networks resnet18 \
        --schedulers ansor --tasks 8 --keep-logs --out OUT
    python3 ci/tvm_env.py run legacy python benchmarks/ansor_states.py OUT/logs-resnet18

For each task of the kept logs, the best state of Ansor K (the first ``--k-records`` records of
the K + Droplet log, K's log copied), of K + Droplet and of Ansor F x K (``ansor.json``, resumed
from K's); then whether F x K's best state is a point of the :class:`StateSpace` Droplet searched
around K's best (``point_of``), and where its transform steps first differ when it is not.
"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import onnx
from tvm import auto_scheduler, relay
from tvm.auto_scheduler.droplet_log import Record, costs_of, read_log, steps_of
from tvm.auto_scheduler.droplet_space import StateSpace
from tvm.testing import onnx_networks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.network_legacy import host_target  # pylint: disable=wrong-import-position


def register_tasks(network: str):
    """Extract the network's tasks again, which registers their workloads in this process."""
    spec = onnx_networks.full(network)
    with tempfile.TemporaryDirectory() as workdir:
        path = str(Path(workdir) / f"{network}.onnx")
        onnx_networks.write_model(spec, path)
        model = onnx.load(path)
    mod, params = relay.frontend.from_onnx(model, shape={onnx_networks.INPUT_NAME: spec.input_shape})
    tasks, counts = auto_scheduler.extract_tasks(mod["main"], params, host_target())
    return {task.workload_key: (task, count) for task, count in zip(tasks, counts)}


def fastest(records, workload_key: str) -> Record:
    """The successful record of a workload with the lowest mean cost."""
    successes = [r for r in records if r[0].task.workload_key == workload_key and costs_of(r[1])]
    return min(successes, key=lambda record: statistics.fmean(costs_of(record[1])))


def milliseconds(record: Record) -> float:
    return statistics.fmean(costs_of(record[1])) * 1e3


def first_difference(ours: list, theirs: list) -> str:
    """The first transform step (record format) whose kind, stage or loop differs."""
    if [step[0] for step in ours] != [step[0] for step in theirs]:
        return f"another sketch ({len(ours)} against {len(theirs)} steps)"
    for index, (mine, other) in enumerate(zip(ours, theirs)):
        if mine[:3] != other[:3] or (mine[0] in ("FSP", "FU", "CA") and mine != other):
            return f"step {index}: {json.dumps(mine)} against {json.dumps(other)}"
    return "the same steps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("logs", type=Path, help="the logs-NETWORK folder of networks.py --keep-logs")
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--k-records", type=int, default=128, help="K's records: tasks x K")
    args = parser.parse_args()
    tasks = register_tasks(args.network)
    long_run = read_log(str(args.logs / "ansor.json"))
    droplet = read_log(str(args.logs / "ansor-K+droplet.json"))
    short = droplet[: args.k_records]
    keys = list(dict.fromkeys(record[0].task.workload_key for record in short))
    print("| task | K / K + Droplet / F x K ms | F x K's best in Droplet's space | first difference | K + Droplet's best, coordinates from K's |")
    print("| --- | --- | --- | --- | --- |")
    for number, key in enumerate(keys, 1):
        task, _ = tasks[key]
        start, exploited, longest = fastest(short, key), fastest(droplet, key), fastest(long_run, key)
        space = StateSpace(task, start[0].state)
        inside = space.point_of(longest[0].state)
        moved = space.point_of(exploited[0].state)
        moved_by = "-" if moved is None else sum(a != b for a, b in zip(space.origin, moved))
        print(
            f"| {number} | {milliseconds(start):.2f} / {milliseconds(exploited):.2f} / "
            f"{milliseconds(longest):.2f} | {'yes: ' + space.describe(inside) if inside else 'no'} | "
            f"{first_difference(steps_of(start[0]), steps_of(longest[0]))} | {moved_by} |"
        )


if __name__ == "__main__":
    main()
