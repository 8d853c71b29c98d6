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
"""AutoTVM tuners replayed on recorded landscapes (see ``landscape.py``).

    python3 ci/tvm_env.py run legacy python benchmarks/tuner_replay.py \
        --tasks conv2d_r18_2,dense_fc --tuners droplet@db4ce5e,droplet,xgb --seeds 3 --trials 150

Prints, per task and tuner, the median over seeds of the best kernel's speed
relative to the best configuration the landscape knows, at several budgets, and
the measurements needed to reach 97% of it.  The landscapes are kept in
``benchmarks/results/landscapes/`` (one JSON file per task and CPU).
"""
import argparse
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict

import numpy as np

import tvm
from tvm import autotvm, topi  # pylint: disable=unused-import

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import tuners, workloads  # pylint: disable=wrong-import-position
from benchmarks.host import host_cpu  # pylint: disable=wrong-import-position
from benchmarks.landscape import Landscape, replay, runner_costs  # pylint: disable=wrong-import-position

LANDSCAPES = Path(__file__).resolve().parent / "results" / "landscapes"


def conv2d(target, batch, channels, size, filters, kernel, stride, pad):
    data = ("TENSOR", (batch, channels, size, size), "float32")
    weight = ("TENSOR", (filters, channels, kernel, kernel), "float32")
    return autotvm.task.create(
        "conv2d_NCHWc.x86",
        args=(data, weight, (stride, stride), (pad, pad, pad, pad), (1, 1), "NCHW", "NCHW", "float32"),
        target=target,
    )


def depthwise(target, channels, size, stride):
    data = ("TENSOR", (1, channels, size, size), "float32")
    weight = ("TENSOR", (channels, 1, 3, 3), "float32")
    return autotvm.task.create(
        "depthwise_conv2d_NCHWc.x86",
        args=(data, weight, (stride, stride), (1, 1, 1, 1), (1, 1), "NCHW", "NCHW", "float32"),
        target=target,
    )


def dense(target, batch, units, features):
    return autotvm.task.create(
        "dense_pack.x86",
        args=(("TENSOR", (batch, features), "float32"), ("TENSOR", (units, features), "float32"), None, "float32"),
        target=target,
    )


TASKS: Dict[str, Callable] = {
    "matmul512": lambda t: workloads.matmul_task(512, 512, 512, t),
    "conv2d_r18_2": lambda t: conv2d(t, 1, 64, 56, 64, 3, 1, 1),
    "conv2d_r18_3": lambda t: conv2d(t, 1, 128, 28, 128, 3, 1, 1),
    "conv2d_r18_4s": lambda t: conv2d(t, 1, 128, 28, 256, 3, 2, 1),
    "depthwise_mb": lambda t: depthwise(t, 144, 56, 1),
    "dense_fc": lambda t: dense(t, 1, 1000, 512),
}


def make_tuner(name: str, task, seed: int):
    """A tuner by name (see :mod:`benchmarks.tuners`), or ``droplet@REV``: the
    DropletTuner of a git revision that kept the engine in one module,
    ``python/tvm/contrib/droplet_search.py``."""
    if name.startswith("droplet@"):
        tuners.seed_generators(seed)
        return _revision_tuner(name.split("@", 1)[1])(task)
    try:
        return tuners.make_tuner(name, task, seed)
    except ValueError as error:
        raise SystemExit(str(error)) from None


def _revision_tuner(revision: str):
    """The DropletTuner class of an earlier revision of this repository."""
    root = Path(__file__).resolve().parent.parent
    folder = Path(tempfile.mkdtemp(prefix=f"droplet-{revision}-"))
    engine = subprocess.run(
        ["git", "show", f"{revision}:python/tvm/contrib/droplet_search.py"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    tuner = subprocess.run(
        ["git", "show", f"{revision}:python/tvm/autotvm/tuner/droplet_tuner.py"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    module = f"droplet_engine_{revision}"
    (folder / f"{module}.py").write_text(engine)
    for old, new in (
        ("from tvm.contrib.droplet_search import", f"from {module} import"),
        ("from ..", "from tvm.autotvm."),
        ("from .tuner import", "from tvm.autotvm.tuner.tuner import"),
    ):
        tuner = tuner.replace(old, new)
    (folder / f"droplet_tuner_{revision}.py").write_text(tuner)
    sys.path.insert(0, str(folder))
    return importlib.import_module(f"droplet_tuner_{revision}").DropletTuner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="matmul512,conv2d_r18_2")
    parser.add_argument("--tuners", default="droplet@db4ce5e,droplet,droplet:handover=none,xgb,ga,random")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=150)
    parser.add_argument("--batch", type=int, default=2, help="configs per batch (n_parallel)")
    parser.add_argument("--fill", action="store_true", help="measure every config of the tasks first")
    parser.add_argument("--runner-repeat", default="all", choices=("1", "2", "3", "all"),
                        help="give tuners the costs AutoTVM's runner with this repeat reports "
                        "(3, its default, reports the middle of three); all: every recorded cost")
    parser.add_argument("--resample", action="store_true",
                        help="measure each config again in every seed: its costs drawn from the "
                        "recorded ones with replacement (seeded), so that seeds also repeat the noise")
    parser.add_argument("--cpu", help="replay the landscapes recorded on this -mcpu (another "
                        "machine's; nothing is measured then); the host's by default")
    args = parser.parse_args()
    cpu = args.cpu or host_cpu()
    target_string = workloads.host_target_string()
    if args.cpu:
        target_string = " ".join(
            f"-mcpu={cpu}" if part.startswith("-mcpu=") else part for part in target_string.split()
        )
    target = tvm.target.Target(target_string)
    repeat = None if args.runner_repeat == "all" else int(args.runner_repeat)
    budgets = [b for b in (20, 30, 50, 75, 100, 150, 200, 300) if b <= args.trials]
    for task_name in args.tasks.split(","):
        task = TASKS[task_name](target)
        landscape = Landscape(task, str(LANDSCAPES / f"{task_name}-{cpu}.json"),
                              measurable=cpu == host_cpu())
        if args.fill:
            for index in range(len(task.config_space)):
                if task.config_space.is_index_valid(index):
                    landscape.measure(index)
            landscape.save()
        curves = {}
        for tuner_name in args.tuners.split(","):
            curves[tuner_name] = []
            for seed in range(args.seeds):
                tuner = make_tuner(tuner_name, task, seed)
                reported = runner_costs(repeat, seed if args.resample else None)
                curve = replay(tuner, landscape, args.trials, args.batch, reported)
                curves[tuner_name].append(curve)
            landscape.save()
        reference = landscape.best_known()
        print(f"\n{task_name}: {len(task.config_space)} configs, {len(landscape.costs)} measured, "
              f"best known {reference * 1e3:.4f} ms")
        header = "tuner".ljust(36) + "used " + " ".join(f"@{b:<5d}" for b in budgets) + " reach97"
        print(header)
        for tuner_name, runs in curves.items():
            used = np.median([len(run) for run in runs])
            cells = []
            for budget in budgets:
                values = [reference / run[min(budget, len(run)) - 1] for run in runs]
                cells.append(f"{np.median(values):.3f} ")
            reach = [next((i + 1 for i, v in enumerate(run) if reference / v >= 0.97), None) for run in runs]
            reached = [r for r in reach if r is not None]
            reach_text = f"{len(reached)}/{len(runs)}" + (f" med {int(np.median(reached))}" if reached else "")
            print(tuner_name.ljust(36) + f"{used:<5.0f}" + " ".join(cells) + " " + reach_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
