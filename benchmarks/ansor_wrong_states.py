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
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from tvm.testing import onnx_networks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# pylint: disable=wrong-import-position
from benchmarks.ansor_checks import StateVerdicts, mark_wrong
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


def main() -> int:
    args = parse_args()
    started = time.time()
    target = host_target()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = onnx_networks.full(args.network)
    with tempfile.TemporaryDirectory(prefix="bench-ansor-wrong-") as workdir:
        model_path = str(Path(workdir) / f"{spec.label}.onnx")
        onnx_networks.write_model(spec, model_path)
        network = Network(spec, model_path, onnx_networks.random_input(spec), target, SimpleNamespace(compiles=1), Path(workdir))
        all_tasks, _, _, chosen = network.ansor_tasks(args.tasks)
        tasks = {all_tasks[index].workload_key: all_tasks[index] for index in chosen}
        verdicts = StateVerdicts()
        found = []
        try:
            for source in sorted(args.logs.iterdir()):
                if source.name.endswith("-checked.json"):
                    continue  # networks.py's copies for its builds (their final bests checked)
                copy = args.out / source.name
                marked = []
                if source.suffix == ".json":
                    marked = mark_wrong(source, copy, tasks, verdicts, running_bests=True, opt_level_0=True)
                if not marked:
                    shutil.copy(source, copy)
                found += marked
        finally:
            verdicts.close()
    for line in found:
        print(line, flush=True)
    print(f"{len(found)} wrong states marked in {args.out} ({time.time() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
