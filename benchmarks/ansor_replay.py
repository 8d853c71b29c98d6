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
"""Droplet again on the K records of a kept network run, with variants of its space, side by side.

    python3 ci/tvm_env.py run legacy python benchmarks/networks.py --networks resnet18 \
        --schedulers ansor --tasks 8 --keep-logs --out OUT
    python3 ci/tvm_env.py run legacy python benchmarks/ansor_replay.py OUT/logs-resnet18 \
        --variants no-structure,today --out OUT2

``networks.py`` measures Ansor K, K + Droplet and F x K in one run (F x K is most of its time).
This reruns only the Droplet step, on the same K records (the first tasks x K lines of the kept
F x K log, which resumed from K's), once per variant of the state space, one after the other, and
then times the network built from each log (K, each variant, F x K) in interleaved rounds: a
before and after of a change to the space, against the same F x K, without tuning F x K again.

Variants: ``today`` (the library's space), ``no-structure`` (the space before the follow-level
and parallel-fuse dimensions and compute locations outside the stage a state computes a stage at;
the library's methods that add them are replaced for that run) and ``no-transfer`` (today's
space, without other tasks' fastest states in each search's first batch: ``transfer=False``);
``VARIANT@B`` measures in batches of B states (``batch_size``; by default a radius-1
neighbourhood, two per dimension).

Budgets (``VARIANT~BUDGET``), all spending tasks x exploit measurements: by default ``exploit`` on
every task; ``~shared``: one budget (``max_trials_global``) in one pass (``first_pass_trials=0``),
the tasks by descending weighted cost, at most 2 x exploit each; ``~two-pass``: the library's
passes with that budget: half of ``exploit`` on every task, then the other half by the weighted
costs after the first pass, at most 1.5 x exploit each in all.

Starts (``--rounds R1,R2``): Droplet from Ansor after R rounds of K per task (the first R x tasks
x K lines of the F x K log, which tuned in rounds of tasks x K), so R = 3 asks whether Droplet
pays as a finisher of a longer Ansor run rather than after its first round; every variant runs
from every start.
"""
import argparse
import contextlib
import itertools
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Iterator, List, Tuple

import tvm
from tvm import auto_scheduler
from tvm.auto_scheduler.droplet_log import best_cost_of_workload
from tvm.auto_scheduler.droplet_space import StateSpace
from tvm.testing import onnx_networks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# pylint: disable=wrong-import-position
from benchmarks.network_legacy import Network, ansor_runner, host_target
from benchmarks.network_runs import count_lines
from benchmarks.networks import TOLERANCE, onnxruntime_baseline, output_error, paired_ratio
from benchmarks.report import markdown_table, median

VARIANTS = ("today", "no-structure", "no-transfer")
BUDGETS = ("", "shared", "two-pass")


@contextlib.contextmanager
def space_variant(name: str) -> Iterator[None]:
    """The library's state space (``today``, ``no-transfer``) or the space without its structural
    dimensions."""
    if name in ("today", "no-transfer"):
        yield
        return
    saved = {
        key: StateSpace.__dict__[key]
        for key in ("_follow_level_parameter", "_parallel_fuse_parameter", "_single_consumer")
    }
    StateSpace._follow_level_parameter = lambda self, index: None
    StateSpace._parallel_fuse_parameter = lambda self, index, step: None
    # Without a consumer, a compute location ranges over the loops of the stage it is at.
    StateSpace._single_consumer = staticmethod(lambda state, stage_id: None)
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(StateSpace, key, value)


def parse_variant(variant: str) -> Tuple[str, str, str]:
    """``SPACE~BUDGET@BATCH`` as its three parts (empty when absent)."""
    head, _, batch = variant.partition("@")
    space, _, budget = head.partition("~")
    return space, budget, batch


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("logs", type=Path, help="the logs-NETWORK folder of networks.py --keep-logs")
    parser.add_argument("--network", default="resnet18")
    parser.add_argument("--tasks", type=int, default=8, help="the tasks tuned, the heaviest (as networks.py)")
    parser.add_argument("--explore", type=int, default=16, help="K: Ansor's trials per task")
    parser.add_argument("--exploit", type=int, default=32, help="Droplet trials per task")
    parser.add_argument("--variants", default="no-structure,today", help=f"comma-separated, of {VARIANTS}")
    parser.add_argument("--rounds", default="1", help="comma-separated: Droplet from Ansor after R rounds of K")
    parser.add_argument("--timing-rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ansor-replay"))
    args = parser.parse_args()
    args.variants = args.variants.split(",")
    if not all(part.isdigit() and int(part) > 0 for part in args.rounds.split(",")):
        parser.error(f"--rounds {args.rounds!r}: comma-separated counts of Ansor's rounds, each at least 1")
    args.rounds = [int(part) for part in args.rounds.split(",")]
    for variant in args.variants:
        space, budget, batch = parse_variant(variant)
        if space not in VARIANTS or budget not in BUDGETS or not (
            batch == "" or (batch.isdigit() and int(batch) > 0)
        ):
            parser.error(
                f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}, then "
                f"~{' or ~'.join(BUDGETS[1:])} or not, then @BATCH or not"
            )
    return args


def exploit(args: argparse.Namespace, tasks, counts, target, variant: str, log: Path) -> str:
    """Droplet on ``log`` with one variant; its time and each task's speedup over its start."""
    options = auto_scheduler.TuningOptions(
        num_measure_trials=args.exploit,
        num_measures_per_round=min(args.explore, 16),
        runner=ansor_runner(),
        verbose=0,
    )
    space, budget, batch = parse_variant(variant)
    total = args.tasks * args.exploit
    if budget == "shared":
        budgets = {"exploitation_trials": 2 * args.exploit, "max_trials_global": total, "first_pass_trials": 0}
    elif budget == "two-pass":
        budgets = {"exploitation_trials": args.exploit * 3 // 2, "max_trials_global": total}
    else:
        budgets = {"exploitation_trials": args.exploit}
    began = time.time()
    with space_variant(space):
        results = auto_scheduler.droplet_exploit(
            str(log), target, options, tasks=tasks, batch_size=int(batch) if batch else None,
            task_weights=counts, transfer=space != "no-transfer", **budgets,
        )
    seconds = time.time() - began
    return f"{seconds:.0f} s; " + ", ".join(
        f"{result.speedup:.2f}x ({result.exploitation_trials})" for result in results
    )


def main() -> int:
    args = parse_args()
    started = time.time()
    target = host_target()
    args.out.mkdir(parents=True, exist_ok=True)
    long_log = args.logs / "ansor.json"
    spec = onnx_networks.full(args.network)
    with tempfile.TemporaryDirectory(prefix="bench-ansor-replay-") as workdir:
        model_path = str(Path(workdir) / f"{spec.label}.onnx")
        onnx_networks.write_model(spec, model_path)
        inputs = onnx_networks.random_input(spec)
        network = Network(spec, model_path, inputs, target, SimpleNamespace(compiles=1), Path(workdir))
        tasks, counts, _, chosen = network.ansor_tasks(args.tasks)
        tasks, counts = [tasks[index] for index in chosen], [counts[index] for index in chosen]
        logs: Dict[str, Path] = {}
        notes: Dict[str, str] = {}
        for rounds in args.rounds:
            start = "ansor-K" if rounds == 1 else f"ansor-{rounds}K"
            start_log = args.out / f"{start}.json"
            with open(long_log, encoding="utf-8") as source:
                start_log.write_text("".join(itertools.islice(source, rounds * args.tasks * args.explore)))
            logs[start] = start_log
            for variant in args.variants:
                method = f"{start}+droplet-{variant}"
                logs[method] = args.out / f"{method}.json"
                shutil.copy(start_log, logs[method])
                notes[method] = exploit(args, tasks, counts, target, variant, logs[method])
                print(f"  {method}: {notes[method]}", flush=True)
        logs[f"ansor-{count_lines(long_log) // args.tasks // args.explore}K"] = long_log
        finals = {"onnxruntime": onnxruntime_baseline(model_path, inputs)}
        for method, log in logs.items():
            finals[method] = network.compile(ansor_log=log)
        reference = finals.pop("onnxruntime").output
        errors = {method: output_error(compiled.output, reference) for method, compiled in finals.items()}
        latencies: Dict[str, List[float]] = {method: [] for method in finals}
        for _ in range(args.timing_rounds):
            for method, compiled in finals.items():
                latencies[method].append(compiled.time_once())
    long_method = list(logs)[-1]
    per_task = {}
    for method, log in logs.items():
        records = list(auto_scheduler.load_records(str(log)))
        per_task[method] = [
            1e3 * best_cost_of_workload(records, task.workload_key, task.target) for task in tasks
        ]
    rows = [
        [
            method,
            f"{median(latencies[method]) * 1e3:.1f}",
            f"{paired_ratio(latencies[long_method], latencies[method]):.3f}x",
            f"{errors[method]:.1e}" + ("" if errors[method] <= TOLERANCE else " WRONG"),
            notes.get(method, ""),
        ]
        for method in finals
    ]
    table = markdown_table(["method", "ms (median)", f"speed vs {long_method}", "output error", "Droplet"], rows)
    task_rows = [[method] + [f"{value:.2f}" for value in values] for method, values in per_task.items()]
    task_table = markdown_table(["best ms per task"] + [str(i + 1) for i in range(len(tasks))], task_rows)
    text = (
        f"## Droplet again on kept K records ({time.strftime('%Y-%m-%d')}, TVM {tvm.__version__}, {target})\n\n"
        f"Command: `python3 ci/tvm_env.py run legacy python benchmarks/ansor_replay.py "
        f"{' '.join(sys.argv[1:])}`; total {time.time() - started:.0f} s. Speeds are medians over "
        f"{args.timing_rounds} interleaved rounds of paired ratios; Droplet: its time and each task's "
        f"speedup over its start (measurements).\n\n{table}\n{task_table}"
    )
    print(text, flush=True)
    (args.out / "README.md").write_text(text)
    (args.out / "replay.json").write_text(
        json.dumps({"latency_ms": {m: [v * 1e3 for v in l] for m, l in latencies.items()},
                    "output_error": errors, "notes": notes, "task_ms": per_task}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
