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
"""Experiment 4: real networks end to end, tuned by each scheduler, against ONNX Runtime.

    python3 ci/tvm_env.py run legacy python benchmarks/networks.py [--quick]   # AutoTVM, Ansor
    python3 ci/tvm_env.py run modern python benchmarks/networks.py [--quick]   # MetaSchedule

ResNet-18 and MobileNetV2 (batch 1, 224x224, float32, seeded random weights,
``tvm.testing.onnx_networks``) are written as ONNX files; the same file feeds
TVM's ONNX frontend (Relay on the legacy line, Relax on the modern one) and
ONNX Runtime.  Per network, each method tunes the heaviest tasks (FLOPs x
occurrences) through the scheduler's public API, with checkpoints along the
run: at each one the network is compiled with the records so far and its
end-to-end latency measured (compile and timing time is not tuning time).
At the end every method's network is compiled once more, its output compared
with ONNX Runtime's on the same input, and timed in interleaved rounds with
ONNX Runtime (2 intra-op threads) and the untuned TVM build.

Methods (``--schedulers``):

- ``autotvm`` (legacy): DropletTuner (with its own stop), XGB, GA and random,
  ``n_trial`` = ``--trials`` per task; TOPI's x86 templates.
- ``ansor`` (legacy): TaskScheduler for K trials per task (``ansor-K``); on a
  copy of that log ``droplet_exploit`` (``ansor-K+droplet``); with
  ``--exploit-shared GLOBAL:CAP``, ``droplet_exploit`` with the tasks' weights
  and ``max_trials_global`` (``ansor-K+droplet-GLOBALxCAP``; the library's two
  passes since 2026-12-06, one pass before); with
  ``--exploit-no-transfer``, ``droplet_exploit(transfer=False)``
  (``ansor-K+droplet-no-transfer``); the same TaskScheduler continued to
  F x K trials per task (``ansor-FK``), unless ``--skip-fk``.  Their tables
  add each tuned task's best measured time in every Ansor method's log.
- ``meta_schedule`` (modern): ``tune_relax`` with N trials per task
  (``ms-N``); on copies of its database, with ``--post-orders``: ``flops``,
  ``post_optimize`` of the heaviest tasks (``ms-N+droplet``); ``time``,
  ``post_optimize`` of every task with ``task_weights`` and the same total as
  ``max_trials_global``, in the library's order (``ms-N+droplet-by-time``);
  ``headroom``, the same budget spent one task at a time, the largest
  weighted time minus the time at the best task's GFLOPS first
  (``ms-N+droplet-by-headroom``); ``time-alone``, the library's order without
  other workloads' schedules taken over (``ms-N+droplet-by-time-alone``);
  ``--global-budgets`` adds the library's order
  with other totals (``ms-N+droplet-by-time-B``); the same tuning continued to
  5N (``ms-5N``), unless ``--skip-5n``.
"""
import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

import tvm
from tvm.testing import onnx_networks

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.baselines import median_seconds  # pylint: disable=wrong-import-position
from benchmarks.network_runs import Compiled, MethodRun  # pylint: disable=wrong-import-position
from benchmarks.report import markdown_table, median  # pylint: disable=wrong-import-position

# Outputs must match ONNX Runtime's within this fraction of the largest |output|.
TOLERANCE = 1e-4
PAPER_TRIALS = 10_000
SCHEDULERS = {"legacy": ("autotvm", "ansor"), "modern": ("meta_schedule",)}


def detect_line() -> str:
    """``legacy`` when this TVM has Relay and AutoTVM, else ``modern``."""
    return "legacy" if importlib.util.find_spec("tvm.autotvm") else "modern"


def output_error(output: np.ndarray, reference: np.ndarray) -> float:
    """Largest absolute difference, as a fraction of the largest |reference| value."""
    return float(np.max(np.abs(output - reference)) / max(np.max(np.abs(reference)), 1e-30))


def onnxruntime_baseline(path: str, inputs: Dict[str, np.ndarray]) -> Compiled:
    """ONNX Runtime on 2 intra-op threads (CPU provider)."""
    session = onnx_networks.onnxruntime_session(path, threads=2)
    output = session.run(None, inputs)[0]
    return Compiled(output, lambda: median_seconds(lambda: session.run(None, inputs), 1, 0.2))


def scale_note(runs: List[MethodRun]) -> str:
    """How the measurements of this run compare with the papers' 10,000 trials per network."""
    if not runs:
        return ""
    most = max(runs, key=lambda run: run.measurements)
    return (
        f"Scale: {most.method} used the most measurements, {most.measurements} for the whole network, "
        f"{most.measurements / PAPER_TRIALS:.1%} of the {PAPER_TRIALS:,} trials per network of the "
        "papers' Ansor runs (arXiv 2406.20037)."
    )


def plot_latency(path: Path, title: str, runs: List[MethodRun], references: Dict[str, float]) -> Optional[Path]:
    """End-to-end latency against tuning time, one line per method, references as levels."""
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    for run in runs:
        points = run.checkpoints
        axes.plot(
            [point.seconds for point in points],
            [point.latency_ms for point in points],
            marker="o",
            label=run.method,
        )
    for (name, latency), style in zip(references.items(), (":", "--")):
        axes.axhline(latency, color="grey", linestyle=style, label=name)
    axes.set_xlabel("tuning seconds")
    axes.set_ylabel("end-to-end latency, ms")
    axes.set_yscale("log")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def paired_ratio(samples: List[float], reference: List[float]) -> float:
    """Median over the timing rounds of ``samples[i] / reference[i]``.

    Both were timed in the same round, one after the other: on a noisy machine
    the round's load cancels out of their ratio, not out of a ratio of medians.
    """
    return median([sample / base for sample, base in zip(samples, reference)])


def final_table(
    runs: List[MethodRun],
    latencies: Dict[str, List[float]],
    errors: Dict[str, float],
) -> str:
    """Markdown table: end-to-end ms, ratios to ONNX Runtime and to the longest tuning run
    (per timing round), measurements, tuning seconds."""
    rows = []
    by_method = {run.method: run for run in runs}
    longest = max(runs, key=lambda run: run.measurements, default=None)
    for method, samples in latencies.items():
        run = by_method.get(method)
        row = [method, median(samples) * 1e3, paired_ratio(samples, latencies["onnxruntime"])]
        if longest:
            row.append(paired_ratio(latencies[longest.method], samples))
            row.append(run.tuning_seconds / longest.tuning_seconds if run else "-")
        rows.append(
            row
            + [
                run.measurements if run else "-",
                run.tuning_seconds if run else "-",
                f"{errors[method]:.1e}" + ("" if errors[method] <= TOLERANCE else " WRONG"),
                run.notes if run else "",
            ]
        )
    headers = ["method", "end-to-end ms (median)", "latency / ONNX Runtime (per round)"]
    if longest:
        headers += [f"speed vs {longest.method} (per round)", f"tuning time vs {longest.method}"]
    headers += [
        "measurements",
        "tuning seconds",
        "output error vs ONNX Runtime",
        "notes",
    ]
    return markdown_table(headers, rows)


def task_table(runs: List[MethodRun]) -> str:
    """Markdown table of each tuned task's best measured ms per method (the runs that record it)."""
    recorded = [run for run in runs if run.task_ms]
    if not recorded:
        return ""
    rows = [
        [f"task {position + 1}"] + [f"{run.task_ms[position]:.3f}" for run in recorded]
        for position in range(len(recorded[0].task_ms))
    ]
    headers = ["best measured ms, from the log"] + [run.method for run in recorded]
    return markdown_table(headers, rows) + "\n"


def parse_args(line: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="reduced network, tiny budgets, no ms-5N (CI smoke run)")
    parser.add_argument(
        "--demo", action="store_true",
        help="the demo: DropletTuner on ResNet-18's 3 heaviest AutoTVM tasks, 32 trials each",
    )
    parser.add_argument("--line", choices=tuple(SCHEDULERS), default=line, help="default: the installed TVM's")
    parser.add_argument("--networks", default=",".join(onnx_networks.NETWORKS), help="comma-separated")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS[line]), help="comma-separated")
    parser.add_argument("--tasks", type=int, default=3, help="heaviest tasks tuned per network (FLOPs x occurrences)")
    parser.add_argument("--trials", type=int, default=32, help="AutoTVM: n_trial per task, every tuner")
    parser.add_argument(
        "--tuners",
        default="droplet,xgb,ga,random",
        help="AutoTVM tuners; NAME+tl loads the method's log before each task (transfer learning, "
        "as TVM's tuning tutorials: the records of the tasks tuned before it)",
    )
    parser.add_argument("--explore", type=int, default=16, help="Ansor: K trials per task")
    parser.add_argument("--exploit", type=int, default=32, help="Ansor: Droplet trials per task")
    parser.add_argument("--factor", type=int, default=5, help="Ansor: F (the long run has F x K per task)")
    parser.add_argument(
        "--exploit-shared", default="",
        help="Ansor: also run K + Droplet with a budget shared by the tasks, heaviest weighted cost "
        "first, for each GLOBAL:CAP (comma-separated; CAP measurements per task at most), as "
        "ansor-K+droplet-GLOBALxCAP",
    )
    parser.add_argument("--ms-trials", type=int, default=4, help="MetaSchedule: N trials per task")
    parser.add_argument("--post-trials", type=int, default=32, help="MetaSchedule: Droplet trials per task")
    parser.add_argument(
        "--post-orders", default="flops,time",
        help="MetaSchedule: the task orders of post-optimization to run (comma-separated): "
        "flops (the --tasks heaviest by FLOPs, ms-N+droplet), time (the library's order, "
        "ms-N+droplet-by-time), headroom (weighted time minus the time at the best task's GFLOPS, "
        "ms-N+droplet-by-headroom), time-alone (the library's order without other workloads' "
        "schedules taken over, ms-N+droplet-by-time-alone); all but flops with the budget "
        "--tasks x --post-trials",
    )
    parser.add_argument(
        "--global-budgets", default="",
        help="MetaSchedule: also run ms-N+droplet-by-time with these global budgets (comma-separated "
        "measurements, per-task cap --post-trials), as ms-N+droplet-by-time-B",
    )
    parser.add_argument("--skip-5n", action="store_true", help="MetaSchedule: no ms-5N (order comparisons)")
    parser.add_argument(
        "--build-workers", type=int,
        help="MetaSchedule: build processes of the default_builder every method shares "
        "(default: its own, one per logical CPU; runs before 2026-12-07 used 1)",
    )
    parser.add_argument("--skip-fk", action="store_true", help="Ansor: no ansor-FK (Droplet budget comparisons)")
    parser.add_argument(
        "--exploit-no-transfer", action="store_true",
        help="Ansor: also run K + Droplet without other tasks' states (transfer=False) on a copy of the K log",
    )
    parser.add_argument(
        "--shared-caps", default="",
        help="MetaSchedule: also run ms-N+droplet-by-time with these per-task caps (comma-separated), "
        "same global budget (--tasks x --post-trials), as ms-N+droplet-by-time-capC",
    )
    parser.add_argument(
        "--keep-logs", action="store_true",
        help="copy the tuning logs and databases into OUT/logs-NETWORK (for analysis after the run)",
    )
    parser.add_argument(
        "--population", type=int, default=256,
        help="evolutionary search population of Ansor and MetaSchedule (0: theirs, 2048 and 512)",
    )
    parser.add_argument("--timing-rounds", type=int, default=7, help="final interleaved timing rounds")
    parser.add_argument(
        "--compiles", type=int, default=1,
        help="compile each method's network this many times; a timing is the median over the "
        "instances (one compiled network is a draw of about 1-3%%)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="results folder (default benchmarks/results/networks)")
    args = parser.parse_args()
    if args.quick:
        # One task each, and no ms-5N (TVM's own tuning, resumed): the smoke run
        # checks the script's paths through the integrations, not the baselines.
        args.networks, args.tasks, args.trials, args.tuners = "resnet18", 1, 4, "droplet"
        args.post_orders, args.skip_5n = "time", True
        args.explore, args.exploit, args.factor = 4, 4, 2
        args.ms_trials, args.post_trials, args.timing_rounds, args.population = 1, 4, 3, 32
    if args.demo:
        args.networks, args.schedulers, args.tuners, args.tasks, args.trials = "resnet18", "autotvm", "droplet", 3, 32
        args.timing_rounds = 5
    default_out = "build/demo/networks" if args.demo else "benchmarks/results/networks"
    args.out = Path(args.out or ("build/benchmarks-quick/networks" if args.quick else default_out))
    if args.line != line:
        raise SystemExit(f"this TVM ({tvm.__version__}) is the {line} line; run the {args.line} line's environment")
    unknown = set(args.schedulers.split(",")) - set(SCHEDULERS[args.line])
    if unknown:
        raise SystemExit(
            f"schedulers {sorted(unknown)} are not on the {args.line} line; it has {SCHEDULERS[args.line]}"
        )
    for name in args.networks.split(","):
        if name not in onnx_networks.NETWORKS:
            raise SystemExit(f"unknown network {name!r}; choose from {onnx_networks.NETWORKS}")
    try:
        args.shared_caps = [int(cap) for cap in args.shared_caps.split(",") if cap]
        args.global_budgets = [int(budget) for budget in args.global_budgets.split(",") if budget]
    except ValueError:
        raise SystemExit("--shared-caps and --global-budgets take comma-separated trial counts")
    try:
        args.exploit_shared = [
            tuple(int(count) for count in pair.split(":")) for pair in args.exploit_shared.split(",") if pair
        ]
    except ValueError:
        raise SystemExit("--exploit-shared takes comma-separated GLOBAL:CAP measurement counts")
    if any(len(pair) != 2 or min(pair) < 1 for pair in args.exploit_shared):
        raise SystemExit("--exploit-shared takes comma-separated GLOBAL:CAP positive measurement counts")
    args.post_orders = [order for order in args.post_orders.split(",") if order]
    orders = {"flops", "time", "headroom", "time-alone"}
    if not args.post_orders or set(args.post_orders) - orders:
        raise SystemExit(f"--post-orders takes {', '.join(sorted(orders))}, got {','.join(args.post_orders)!r}")
    budgets = (args.tasks, args.trials, args.explore, args.exploit, args.ms_trials, args.post_trials)
    budgets += tuple(args.shared_caps) + tuple(args.global_budgets)
    if min(budgets) < 1 or args.factor < 2 or args.timing_rounds < 1 or args.compiles < 1:
        raise SystemExit("budgets, --timing-rounds and --compiles must be positive and --factor at least 2")
    return args


def main() -> int:
    args = parse_args(detect_line())
    if args.line == "legacy":
        from benchmarks import network_legacy as path_module  # pylint: disable=import-outside-toplevel
    else:
        from benchmarks import network_modern as path_module  # pylint: disable=import-outside-toplevel
    target = path_module.host_target()
    print(f"TVM {tvm.__version__} ({args.line} line), target {target}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    sections, raw = [], []
    started = time.time()
    for name in args.networks.split(","):
        spec = onnx_networks.reduced(name) if args.quick else onnx_networks.full(name)
        with tempfile.TemporaryDirectory(prefix="bench-networks-") as workdir:
            model_path = str(Path(workdir) / f"{spec.label}.onnx")
            onnx_networks.write_model(spec, model_path)
            inputs = onnx_networks.random_input(spec)
            network = path_module.Network(spec, model_path, inputs, target, args, Path(workdir))
            print(f"{spec.label}: {network.describe()}", flush=True)
            finals = {"onnxruntime": onnxruntime_baseline(model_path, inputs)}
            finals["tvm-untuned"] = network.compile_untuned()
            runs = []
            for scheduler in args.schedulers.split(","):
                for run, compiled in network.tune(scheduler):
                    runs.append(run)
                    finals[run.method] = compiled
            reference = finals["onnxruntime"].output
            errors = {method: output_error(compiled.output, reference) for method, compiled in finals.items()}
            latencies = {method: [] for method in finals}
            for _ in range(args.timing_rounds):
                for method, compiled in finals.items():
                    latencies[method].append(compiled.time_once())
            if args.keep_logs:
                kept = args.out / f"logs-{spec.label}"
                shutil.copytree(workdir, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.onnx", "*.so", "*.tar"))
                print(f"  {spec.label}: tuning logs kept in {kept}", flush=True)
        references = {key: median(latencies[key]) * 1e3 for key in ("onnxruntime", "tvm-untuned")}
        plot = plot_latency(
            args.out / f"{spec.label}-{args.line}.png", f"{spec.label}: end-to-end latency ({args.line} line)", runs, references
        )
        section = (
            f"### {spec.label}\n\n{network.describe()}\n\n{final_table(runs, latencies, errors)}\n"
            f"{task_table(runs)}"
            f"{scale_note(runs)} Outputs are compared with ONNX Runtime's on the same input: "
            f"the largest difference must stay within {TOLERANCE:g} of the largest |output|.\n"
        )
        if plot:
            section += f"\n![{spec.label}]({plot.name})\n"
        print(section, flush=True)
        sections.append(section)
        raw.append(
            {
                "network": spec.label,
                "runs": [asdict(run) for run in runs],
                "latency_ms": {key: [value * 1e3 for value in values] for key, values in latencies.items()},
                "output_error": errors,
            }
        )
    header = (
        f"## Networks end to end ({time.strftime('%Y-%m-%d')}, TVM {tvm.__version__}, {target})\n\n"
        f"Command: `python3 ci/tvm_env.py run {args.line} python benchmarks/networks.py "
        f"{' '.join(sys.argv[1:])}`; total {time.time() - started:.0f} s.\n\n"
    )
    (args.out / f"README-{args.line}.md").write_text(header + "\n".join(sections))
    (args.out / f"{args.line}.json").write_text(json.dumps(raw, indent=1))
    print(f"total {time.time() - started:.0f} s; results in {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
