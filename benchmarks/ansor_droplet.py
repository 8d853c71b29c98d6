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
"""Experiment 2 (arXiv 2406.20037): Ansor K trials + Droplet against Ansor with F x K trials.

    python3 ci/tvm_env.py run legacy python benchmarks/ansor_droplet.py [--quick]

Per task and repeat: Ansor explores K trials (method ``ansor-K``); a copy of
that log is exploited by ``tvm.auto_scheduler.droplet_exploit`` (method
``ansor-K+droplet``); independently, Ansor runs F x K trials (``ansor-FK``).
The two chains run in a shuffled order per repeat.  At the end the best
schedule of every run is rebuilt, checked against numpy and timed again,
interleaved across methods, so kernel times compare under the same machine load.
"""
import argparse
import logging
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tvm
from tvm import auto_scheduler, te, topi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks import workloads  # pylint: disable=wrong-import-position
from benchmarks.report import (  # pylint: disable=wrong-import-position
    Curve,
    comparison_table,
    plot_curves,
    save_curves,
)


@auto_scheduler.register_workload
def bench_matmul(rows: int, reduction: int, cols: int):
    lhs = te.placeholder((rows, reduction), name="A")
    rhs = te.placeholder((reduction, cols), name="B")
    k = te.reduce_axis((0, reduction), name="k")
    out = te.compute((rows, cols), lambda i, j: te.sum(lhs[i, k] * rhs[k, j], axis=k), name="C")
    return [lhs, rhs, out]


@auto_scheduler.register_workload
def bench_conv2d(batch: int, channels: int, size: int, filters: int, kernel: int, pad: int):
    data = te.placeholder((batch, channels, size, size), name="data")
    weight = te.placeholder((filters, channels, kernel, kernel), name="weight")
    out = topi.nn.conv2d_nchw(data, weight, 1, pad, 1, out_dtype="float32")
    return [data, weight, out]


def make_task(name: str, target, quick: bool):
    """(search task, numpy seconds, reference function of the inputs)."""
    if name == "matmul":
        shape = (64, 64, 64) if quick else (1000, 800, 700)
        task = auto_scheduler.SearchTask(func=bench_matmul, args=shape, target=target)
        return task, workloads.numpy_matmul_seconds(*shape), lambda lhs, rhs: lhs @ rhs
    if name == "conv2d":
        spec = dict(workloads.RESNET18_CONV)
        if quick:
            spec.update(channels=8, filters=8, size=14)
        args = tuple(spec[key] for key in ("batch", "channels", "size", "filters", "kernel", "pad"))
        task = auto_scheduler.SearchTask(func=bench_conv2d, args=args, target=target)
        return (
            task,
            workloads.numpy_conv2d_seconds(spec),
            lambda data, weight: workloads.conv2d_im2col(data, weight, spec["pad"]),
        )
    raise SystemExit(f"unknown task {name!r}; choose from matmul, conv2d")


def tuning_options(log: Path, trials: int, args, label: str) -> auto_scheduler.TuningOptions:
    return auto_scheduler.TuningOptions(
        num_measure_trials=trials,
        num_measures_per_round=min(args.per_round, trials),
        runner=auto_scheduler.LocalRunner(
            number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms, timeout=60
        ),
        measure_callbacks=[auto_scheduler.RecordToFile(str(log)), ProgressLine(label)],
        verbose=0,
    )


class ProgressLine(auto_scheduler.measure.PythonBasedMeasureCallback):
    """Prints one line per round of Ansor measurements: trials so far, best GFLOPS, seconds."""

    def __init__(self, label: str):
        super().__init__()
        self.label, self.trials, self.best, self.started = label, 0, 0.0, time.time()

    def callback(self, policy, inputs, results):
        for measure_input, result in zip(inputs, results):
            costs = [float(cost) for cost in result.costs]
            if result.error_no == 0 and costs and all(np.isfinite(costs)):
                gflops = measure_input.task.compute_dag.flop_ct / np.mean(costs) / 1e9
                self.best = max(self.best, gflops)
        self.trials += len(results)
        print(
            f"  [{self.label}] {self.trials:4d} trials, best {self.best:8.2f} GFLOPS, "
            f"{time.time() - self.started:6.1f} s",
            flush=True,
        )


def explore(task, log: Path, trials: int, args, seed: int, label: str) -> float:
    """Ansor's own search for ``trials`` measurements; returns the wall time."""
    start = time.time()
    policy = auto_scheduler.SketchPolicy(task, seed=seed, verbose=0)
    task.tune(tuning_options(log, trials, args, label), search_policy=policy)
    return time.time() - start


def curve_from_log(curve: Curve, task, log: Path) -> Curve:
    """Feed ``curve`` with the GFLOPS of every record of ``log``, in order."""
    for measure_input, result in auto_scheduler.load_records(str(log)):
        if measure_input.task.workload_key != task.workload_key:
            continue
        costs = [float(cost) for cost in result.costs]
        ok = result.error_no == 0 and costs and all(np.isfinite(costs))
        curve.record(task.compute_dag.flop_ct / np.mean(costs) / 1e9 if ok else 0.0)
    return curve


def time_best(task, log: Path, reference, rounds: int):
    """Build the log's best schedule, check it against numpy; returns a timing closure."""
    schedule, tensors = task.apply_best(str(log))
    module = tvm.build(schedule, tensors, target=task.target)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    out = tvm.nd.empty([int(d) for d in tensors[-1].shape], "float32", dev)
    arrays = [tvm.nd.array(value, dev) for value in inputs] + [out]
    module(*arrays)
    correct = np.allclose(out.numpy(), reference(*inputs), rtol=1e-3, atol=1e-3)
    timer = module.time_evaluator(module.entry_name, dev, number=5, repeat=1)
    return correct, lambda: float(timer(*arrays).mean)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes and budgets (CI smoke run)")
    parser.add_argument("--tasks", default="matmul,conv2d", help="comma-separated: matmul, conv2d")
    parser.add_argument("--explore", type=int, default=32, help="K: Ansor trials before Droplet")
    parser.add_argument("--exploit", type=int, default=64, help="Droplet trials after exploration")
    parser.add_argument("--factor", type=int, default=8, help="F: the long Ansor run has F x K trials")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of every method")
    parser.add_argument("--per-round", type=int, default=16, help="Ansor measures per round")
    parser.add_argument("--number", type=int, default=3, help="runner: runs per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="runner: measurements per state")
    parser.add_argument("--min-repeat-ms", type=int, default=30, help="runner: min_repeat_ms")
    parser.add_argument("--timing-rounds", type=int, default=7, help="final interleaved timings")
    parser.add_argument("--out", help="results folder (default benchmarks/results/ansor)")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.explore, args.exploit, args.factor, args.repeats = "matmul", 4, 8, 2, 1
        args.per_round, args.min_repeat_ms, args.timing_rounds = 4, 0, 3
    args.out = args.out or ("build/benchmarks-quick/ansor" if args.quick else "benchmarks/results/ansor")
    if min(args.explore, args.exploit, args.factor, args.repeats) < 1:
        raise SystemExit("--explore, --exploit, --factor and --repeats must be positive")
    target = tvm.target.Target(workloads.host_target_string())
    # Droplet's progress (a line per batch) and summary come through TVM's "auto_scheduler" logger.
    progress = logging.StreamHandler(sys.stdout)
    progress.setFormatter(logging.Formatter("  %(message)s"))
    logging.getLogger("auto_scheduler").addHandler(progress)
    logging.getLogger("auto_scheduler").setLevel(logging.INFO)
    out = Path(args.out)
    long_name = f"ansor-{args.factor}K"
    print(f"TVM {tvm.__version__}, target {target}, K={args.explore}", flush=True)
    sections = []
    for task_name in args.tasks.split(","):
        task, numpy_seconds, reference = make_task(task_name, target, args.quick)
        flop = task.compute_dag.flop_ct
        curves, tuning_seconds, timers, wrong = [], {}, {}, {}
        with tempfile.TemporaryDirectory(prefix="bench-ansor-") as workdir:
            for repeat in range(args.repeats):
                chains = ["short", "long"]
                random.Random(repeat).shuffle(chains)
                for chain in chains:
                    if chain == "long":
                        log = Path(workdir) / f"long-{repeat}.json"
                        seconds = explore(
                            task, log, args.factor * args.explore, args, repeat,
                            f"{task_name} {long_name} r{repeat}",
                        )
                        print(f"  [{task_name} r{repeat}] {long_name}: {seconds:.1f} s", flush=True)
                        runs = {long_name: (log, seconds)}
                    else:
                        short = Path(workdir) / f"short-{repeat}.json"
                        seconds = explore(
                            task, short, args.explore, args, repeat, f"{task_name} ansor-K r{repeat}"
                        )
                        exploited = Path(workdir) / f"droplet-{repeat}.json"
                        shutil.copy(short, exploited)
                        start = time.time()
                        (result,) = auto_scheduler.droplet_exploit(
                            str(exploited),
                            target,
                            tuning_options(
                                exploited, args.exploit, args, f"{task_name} +droplet r{repeat}"
                            ),
                            exploitation_trials=args.exploit,
                            tasks=[task],
                        )
                        droplet_seconds = time.time() - start
                        print(
                            f"  [{task_name} r{repeat}] ansor-K: {seconds:.1f} s; +droplet: "
                            f"{result.exploitation_trials} trials, {droplet_seconds:.1f} s, "
                            f"speedup {result.speedup:.2f}x ({result.stop_reason})",
                            flush=True,
                        )
                        runs = {
                            "ansor-K": (short, seconds),
                            "ansor-K+droplet": (exploited, seconds + droplet_seconds),
                        }
                    for method, (log, seconds) in runs.items():
                        tuning_seconds.setdefault(method, []).append(seconds)
                        # Droplet appends every state it measures to the log it exploits.
                        curves.append(curve_from_log(Curve(method, task_name, repeat), task, log))
                        correct, timer = time_best(task, log, reference, args.timing_rounds)
                        timers.setdefault(method, []).append(timer)
                        wrong[method] = wrong.get(method, 0) + (not correct)
            kernel_seconds = {method: [] for method in timers}
            for _ in range(args.timing_rounds):
                for method, method_timers in timers.items():
                    kernel_seconds[method].extend(timer() for timer in method_timers)
        save_curves(out / f"{task_name}_curves.json", curves)
        plot = plot_curves(out / f"{task_name}.png", f"Ansor vs Ansor + Droplet, {task_name}", curves)
        table = comparison_table(
            ("ansor-K", "ansor-K+droplet", long_name), kernel_seconds, tuning_seconds, wrong, flop, numpy_seconds, long_name
        )
        section = (
            f"### {task_name}\n\nK={args.explore} Ansor trials, {args.exploit} Droplet trials, "
            f"{long_name} = {args.factor * args.explore} trials; medians over {args.repeats} repeats "
            f"x {args.timing_rounds} interleaved timing rounds; numpy (OpenBLAS): "
            f"{numpy_seconds * 1e3:.3g} ms.\n\n" + table
        )
        if plot:
            section += f"\n![{task_name}]({plot.name})\n"
        sections.append(section)
        print(section, flush=True)
    header = (
        f"## Ansor + Droplet ({time.strftime('%Y-%m-%d')}, TVM {tvm.__version__}, {target})\n\n"
        f"Command: `python3 ci/tvm_env.py run legacy python benchmarks/ansor_droplet.py "
        f"{' '.join(sys.argv[1:])}`\n\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(header + "\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
