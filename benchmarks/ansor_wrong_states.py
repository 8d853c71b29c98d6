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
"""The kept Ansor logs of a network run with their wrong fastest states marked, in a copy.

    python3 ci/tvm_env.py run legacy python benchmarks/networks.py --networks mobilenet_v2 \
        --schedulers ansor --tasks 12 --keep-logs --out OUT
    python3 ci/tvm_env.py run legacy python benchmarks/ansor_wrong_states.py OUT/logs-mobilenet_v2 \
        --network mobilenet_v2 --tasks 12 --out OUT/logs-mobilenet_v2-checked
    python3 ci/tvm_env.py run legacy python benchmarks/ansor_replay.py OUT/logs-mobilenet_v2-checked \
        --network mobilenet_v2 --tasks 12 --variants today --out OUT2

The legacy build compiles some of Ansor's tuned states into kernels that compute wrong values
(``ENVIRONMENT.md``), and Ansor's own search does not check outputs: when such a kernel is the
fastest record of its task, ``ApplyHistoryBest`` builds the network with it, and a comparison
with that build compares with a network that is fast because it is wrong. Droplet's exploitation
checks its candidates and records a wrong one as ``WRONG_ANSWER``; this does the same for every
record of the folder's logs that is, at its line, faster than every earlier correct record of its
task (so the best record of every prefix of the log, e.g. of each round that ``ansor_replay.py
--rounds`` starts from, is a correct one): each is built and run by the library's
``StateOutputChecker`` against the task's unscheduled program, and a wrong one is written to the
copy with error ``WRONG_ANSWER`` and its costs unchanged. The kept logs are not modified. Each
wrong state is checked again at ``-opt-level=0``, which tells the build's miscompile (right there)
from a schedule that computes something else.
"""
import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List

import tvm
from tvm import auto_scheduler
from tvm.auto_scheduler.droplet_log import costs_of
from tvm.auto_scheduler.measure import MeasureErrorNo
from tvm.auto_scheduler.measure_record import load_record_from_string
from tvm.auto_scheduler.state_output_check import StateOutputChecker
from tvm.testing import onnx_networks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# pylint: disable=wrong-import-position
from benchmarks.network_legacy import Network, host_target


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("logs", type=Path, help="the logs-NETWORK folder of networks.py --keep-logs")
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--tasks", type=int, default=8, help="the tasks tuned, the heaviest (as networks.py)")
    parser.add_argument("--out", type=Path, required=True, help="the folder of the checked copy")
    args = parser.parse_args()
    if args.out.resolve() == args.logs.resolve():
        parser.error("--out must be another folder: the kept logs are not modified")
    return args


def unoptimized(task: auto_scheduler.SearchTask) -> auto_scheduler.SearchTask:
    """The same task for its target at LLVM's ``-opt-level=0``."""
    return auto_scheduler.SearchTask(
        compute_dag=task.compute_dag,
        workload_key=task.workload_key,
        target=tvm.target.Target(f"{task.target} -opt-level=0"),
        hardware_params=task.hardware_params,
        layout_rewrite_option=task.layout_rewrite_option,
    )


def check_log(
    source: Path, copy: Path, tasks: Dict[str, auto_scheduler.SearchTask], checker: StateOutputChecker
) -> List[str]:
    """Write ``source`` to ``copy`` with its wrong running-best records marked; what was found."""
    order = {key: rank + 1 for rank, key in enumerate(tasks)}
    best: Dict[str, float] = {}
    referenced = ""
    found = []
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        inp, res = load_record_from_string(line)
        key, costs = inp.task.workload_key, costs_of(res)
        if key not in tasks or not costs:
            continue
        cost = statistics.fmean(costs)
        if key in best and cost >= best[key]:
            continue
        task = tasks[key]
        if referenced != key:
            checker.set_reference(task, task.compute_dag.get_init_state())
            referenced = key
        difference = checker.difference(task, inp.state)
        if difference is None:
            best[key] = cost
            continue
        at_o0 = checker.difference(unoptimized(task), inp.state)
        record = json.loads(line)
        record["r"][1] = int(MeasureErrorNo.WRONG_ANSWER)
        lines[number - 1] = json.dumps(record) + "\n"
        found.append(
            f"{source.name} line {number}, task {order[key]}, {cost * 1e3:.3f} ms: {difference}; "
            + ("right at -opt-level=0 (a miscompile)" if at_o0 is None else f"at -opt-level=0 too: {at_o0}")
        )
    copy.write_text("".join(lines), encoding="utf-8")
    return found


def main() -> int:
    args = parse_args()
    started = time.time()
    target = host_target()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = onnx_networks.full(args.network)
    with tempfile.TemporaryDirectory(prefix="bench-ansor-wrong-") as workdir:
        model_path = str(Path(workdir) / f"{spec.label}.onnx")
        onnx_networks.write_model(spec, model_path)
        network = Network(spec, model_path, onnx_networks.random_input(spec), target, SimpleNamespace(), Path(workdir))
        all_tasks, _, _, chosen = network.ansor_tasks(args.tasks)
        tasks = {all_tasks[index].workload_key: all_tasks[index] for index in chosen}
        checker = StateOutputChecker()
        found = []
        try:
            for source in sorted(args.logs.iterdir()):
                if source.suffix == ".json":
                    found += check_log(source, args.out / source.name, tasks, checker)
                else:
                    shutil.copy(source, args.out / source.name)
        finally:
            checker.close()
    for line in found:
        print(line, flush=True)
    print(f"{len(found)} wrong states marked in {args.out} ({time.time() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
