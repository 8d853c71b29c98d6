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
"""Experiment 3: MetaSchedule N trials + post-optimization against F x N MetaSchedule trials.

    python3 ci/tvm_env.py run modern python benchmarks/meta_schedule_post_opt.py [--quick]

Per repeat, on one matmul: MetaSchedule's ``tune_tir`` runs N trials
(``ms-N``); a copy of its work directory is post-optimized by this patch set's
``tvm.s_tir.meta_schedule.post_optimization.post_optimize`` (``ms-N+ours``) and
another copy by upstream's own PostOpt (``ms-N+upstream``); independently,
``tune_tir`` runs F x N trials (``ms-FN``).  The two chains run in a shuffled
order per repeat.  Every contender uses the same builder (LocalBuilder, one
worker, 120 s timeout, tensor intrinsics pre-imported) and the same runner.

Upstream's PostOpt is the unmodified ``tvm/s_tir/meta_schedule/post_optimization``
package of the pinned official wheel (``ci/patch_series.py`` downloads it into
``build/patch-series/wheels``): its ``*.py`` files are unpacked from the wheel
into a temporary folder and imported as the standalone package
``upstream_post_optimization``, since the installed copy is replaced by ours.
Its ``Space.run`` creates ``ms.builder.LocalBuilder(timeout_sec=10)`` and its own
``LocalRunner`` per batch; the loaded module's ``ms`` name is pointed at a view of
MetaSchedule whose ``LocalBuilder`` and ``LocalRunner`` return the shared builder
and runner (on 2 cores its own 10 s builder times out on every candidate).
Nothing else of upstream's code is changed.

At the end the best schedule of every run is rebuilt the way MetaSchedule's
builder builds (``tvm.driver.build``), checked against numpy and timed again,
interleaved across methods, so kernel times compare under the same machine load.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import random
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Tuple

import numpy as np

import tvm
from tvm import te
from tvm.driver import build as driver_build
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.post_optimization import default_builder, post_optimize

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.host import host_cpu  # pylint: disable=wrong-import-position
from benchmarks.baselines import numpy_matmul_seconds  # pylint: disable=wrong-import-position
from benchmarks.report import (  # pylint: disable=wrong-import-position
    Curve,
    comparison_table,
    plot_curves,
    save_curves,
)

UPSTREAM_PACKAGE = "tvm/s_tir/meta_schedule/post_optimization/"


def matmul_module(rows: int, reduction: int, cols: int) -> tvm.IRModule:
    lhs = te.placeholder((rows, reduction), name="A")
    rhs = te.placeholder((reduction, cols), name="B")
    k = te.reduce_axis((0, reduction), name="k")
    out = te.compute((rows, cols), lambda i, j: te.sum(lhs[i, k] * rhs[k, j], axis=k), name="C")
    func = te.create_prim_func([lhs, rhs, out]).with_attr("global_symbol", "main")
    return tvm.IRModule({"main": func})


def host_target() -> tvm.target.Target:
    cpu = host_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": 2})


def load_upstream_post_optimization(folder: Path):
    """Upstream's post_optimization package from the pinned official wheel, as a new package."""
    sys.path.insert(0, str(REPO / "ci"))
    import patch_series  # pylint: disable=import-outside-toplevel

    wheel = patch_series.pinned_wheel(patch_series.official_wheel_version())
    package = folder / "upstream_post_optimization"
    package.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        members = [
            name
            for name in archive.namelist()
            if name.startswith(UPSTREAM_PACKAGE)
            and name.endswith(".py")
            and "/" not in name[len(UPSTREAM_PACKAGE) :]
        ]
        if not members:
            raise SystemExit(f"{wheel.name} has no {UPSTREAM_PACKAGE}*.py")
        for name in members:
            (package / name[len(UPSTREAM_PACKAGE):]).write_bytes(archive.read(name))
    spec = importlib.util.spec_from_file_location(
        "upstream_post_optimization", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module, wheel


class _Done:
    """A finished runner future."""

    def __init__(self, result):
        self._result = result

    def result(self):
        return self._result


class SharedMeasurement:
    """The shared builder and runner, as upstream's Space.run asks for them; counts trials."""

    def __init__(self, builder, runner, curve: Curve, flop: float):
        self.builder, self.runner, self.curve, self.flop = builder, runner, curve, flop
        self.trials = 0

    def build(self, build_inputs):
        if not build_inputs:  # upstream asks for empty batches once its budget is spent
            return []
        results = self.builder.build(build_inputs)
        self.trials += len(results)
        for result in results:
            if result.error_msg is not None:
                self.curve.record(0.0)
        return results

    def run(self, runner_inputs):
        results = [future.result() for future in self.runner.run(runner_inputs)]
        for result in results:
            secs = [float(value) for value in result.run_secs or []]
            ok = result.error_msg is None and secs and np.isfinite(np.mean(secs))
            self.curve.record(self.flop / np.mean(secs) / 1e9 if ok else 0.0)
        return [_Done(result) for result in results]

    def ms_view(self):
        """MetaSchedule with LocalBuilder / LocalRunner returning the shared ones."""
        return SimpleNamespace(
            builder=SimpleNamespace(LocalBuilder=lambda **_: self, BuilderInput=ms.builder.BuilderInput),
            runner=SimpleNamespace(
                LocalRunner=lambda **_: self,
                EvaluatorConfig=ms.runner.EvaluatorConfig,
                RunnerInput=ms.runner.RunnerInput,
            ),
            arg_info=ms.arg_info,
            database=ms.database,
        )


def curve_from_work_dir(curve: Curve, work_dir: Path, flop: float) -> Curve:
    """Feed ``curve`` with the GFLOPS of every tuning record of ``work_dir``, in order."""
    with open(work_dir / "database_tuning_record.json", encoding="utf-8") as records:
        for line in records:
            run_secs = json.loads(line)[1][1] or []
            secs = [float(value) for value in run_secs]
            ok = secs and np.isfinite(np.mean(secs)) and np.mean(secs) < 1e9
            curve.record(flop / np.mean(secs) / 1e9 if ok else 0.0)
    return curve


def kernel_timer(work_dir: Path, mod, target, shape, args) -> Tuple[bool, Callable[[], float]]:
    """Rebuild the best schedule of ``work_dir``, check it against numpy; returns a timer."""
    rows, reduction, cols = shape
    database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    schedule = database.query_schedule(mod, target, "main")
    built = driver_build(schedule.mod, target=target)
    module = getattr(built, "mod", built)
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((rows, reduction)).astype("float32")
    rhs = rng.standard_normal((reduction, cols)).astype("float32")
    arrays = [tvm.runtime.tensor(value, dev) for value in (lhs, rhs, np.zeros((rows, cols), "float32"))]
    module["main"](*arrays)
    correct = np.allclose(arrays[2].numpy(), lhs @ rhs, rtol=1e-3, atol=1e-3)
    timer = module.time_evaluator("main", dev, number=args.number, repeat=1, min_repeat_ms=args.min_repeat_ms)
    return correct, lambda: float(timer(*arrays).mean)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny shape and budgets (CI smoke run)")
    parser.add_argument("--shape", default="512,512,512", help="matmul rows,reduction,cols")
    parser.add_argument("--trials", type=int, default=64, help="N: MetaSchedule trials first")
    parser.add_argument(
        "--post-trials", type=int, default=100, help="post-optimization trials (ours and upstream)"
    )
    parser.add_argument("--factor", type=int, default=5, help="F: the long run has F x N trials")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of every method")
    parser.add_argument("--per-iter", type=int, default=64, help="MetaSchedule num_trials_per_iter")
    parser.add_argument("--number", type=int, default=3, help="runner: runs per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="runner: measurements per candidate")
    parser.add_argument("--min-repeat-ms", type=int, default=50, help="runner: min_repeat_ms")
    parser.add_argument("--timing-rounds", type=int, default=7, help="final interleaved timings")
    parser.add_argument("--out", help="results folder (default benchmarks/results/meta_schedule)")
    args = parser.parse_args()
    if args.quick:
        args.shape, args.trials, args.post_trials, args.factor, args.repeats = "64,64,64", 2, 4, 3, 1
        args.number, args.repeat, args.min_repeat_ms, args.timing_rounds = 2, 2, 10, 3
    args.out = args.out or (
        "build/benchmarks-quick/meta_schedule" if args.quick else "benchmarks/results/meta_schedule"
    )
    shape = tuple(int(value) for value in args.shape.split(","))
    if len(shape) != 3 or min(shape) < 1:
        raise SystemExit(f"--shape needs three positive sizes, got {args.shape!r}")
    if min(args.trials, args.post_trials, args.factor, args.repeats, args.per_iter) < 1:
        raise SystemExit("--trials, --post-trials, --factor, --repeats and --per-iter must be positive")
    target = host_target()
    mod = matmul_module(*shape)
    flop = 2.0 * shape[0] * shape[1] * shape[2]
    builder = default_builder(max_workers=1)
    runner = ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(
            number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms
        )
    )
    long_name = f"ms-{args.factor}N"
    methods = ("ms-N", "ms-N+ours", "ms-N+upstream", long_name)
    task_name = "matmul_" + "x".join(map(str, shape))
    out = Path(args.out)
    print(f"TVM {tvm.__version__}, target {target}, N={args.trials}", flush=True)
    curves, tuning_seconds, timers, wrong = [], {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-ms-") as scratch:
        upstream, wheel = load_upstream_post_optimization(Path(scratch) / "upstream")
        print(f"upstream PostOpt from {wheel.name}", flush=True)

        def tune(work_dir: Path, trials: int, seed: int) -> float:
            start = time.time()
            ms.tune_tir(
                mod, target, str(work_dir), max_trials_global=trials,
                num_trials_per_iter=min(args.per_iter, trials), builder=builder, runner=runner, seed=seed,
            )
            return time.time() - start

        for repeat in range(args.repeats):
            chains = ["short", "long"]
            random.Random(repeat).shuffle(chains)
            for chain in chains:
                if chain == "long":
                    work_dir = Path(scratch) / f"long-{repeat}"
                    seconds = tune(work_dir, args.factor * args.trials, repeat)
                    print(f"  [r{repeat}] {long_name}: {seconds:.1f} s", flush=True)
                    runs = {long_name: (work_dir, seconds)}
                    curves.append(curve_from_work_dir(Curve(long_name, task_name, repeat), work_dir, flop))
                else:
                    work_dir = Path(scratch) / f"short-{repeat}"
                    seconds = tune(work_dir, args.trials, repeat)
                    print(f"  [r{repeat}] ms-N: {seconds:.1f} s", flush=True)
                    runs = {"ms-N": (work_dir, seconds)}
                    curves.append(curve_from_work_dir(Curve("ms-N", task_name, repeat), work_dir, flop))
                    post = ["ours", "upstream"]
                    random.Random(repeat + 1).shuffle(post)
                    for which in post:
                        copy = Path(scratch) / f"{which}-{repeat}"
                        shutil.copytree(work_dir, copy)
                        curve = curve_from_work_dir(Curve(f"ms-N+{which}", task_name, repeat), work_dir, flop)
                        start = time.time()
                        if which == "ours":
                            database = ms.database.JSONDatabase(work_dir=str(copy), allow_missing=False)
                            (result,) = post_optimize(
                                database, args.post_trials, builder=builder, runner=runner
                            )
                            post_seconds = time.time() - start
                            # Ours commits every program it measures, in order: the exact curve.
                            curve = curve_from_work_dir(Curve("ms-N+ours", task_name, repeat), copy, flop)
                            detail = (
                                f"{result.trials} trials, speedup {result.speedup:.2f}x "
                                f"({result.stop_reason})"
                            )
                        else:
                            shared = SharedMeasurement(builder, runner, curve, flop)
                            upstream.space.ms = shared.ms_view()
                            random.seed(repeat)  # Space.run drops postprocessing at random
                            printed = io.StringIO()
                            with contextlib.redirect_stdout(printed):
                                upstream.PostOpt(str(copy), target, trials=args.post_trials).run()
                            post_seconds = time.time() - start
                            table = printed.getvalue().strip().splitlines()
                            detail = f"{shared.trials} trials; upstream says: {table[-1] if table else ''}"
                        print(f"  [r{repeat}] ms-N+{which}: {post_seconds:.1f} s, {detail}", flush=True)
                        curves.append(curve)
                        runs[f"ms-N+{which}"] = (copy, seconds + post_seconds)
                for method, (run_dir, run_seconds) in runs.items():
                    tuning_seconds.setdefault(method, []).append(run_seconds)
                    correct, timer = kernel_timer(run_dir, mod, target, shape, args)
                    timers.setdefault(method, []).append(timer)
                    wrong[method] = wrong.get(method, 0) + (not correct)
        kernel_seconds = {method: [] for method in methods}
        for _ in range(args.timing_rounds):
            for method in methods:
                kernel_seconds[method].extend(timer() for timer in timers[method])
    numpy_seconds = numpy_matmul_seconds(*shape)
    save_curves(out / f"{task_name}_curves.json", curves)
    plot = plot_curves(out / f"{task_name}.png", f"MetaSchedule post-optimization, {task_name}", curves)
    table = comparison_table(
        methods, kernel_seconds, tuning_seconds, wrong, flop, numpy_seconds, long_name
    )
    section = (
        f"### {task_name}\n\nN={args.trials} MetaSchedule trials, {args.post_trials} post-optimization "
        f"trials (ours and upstream), {long_name} = {args.factor * args.trials} trials; medians over "
        f"{args.repeats} repeats x {args.timing_rounds} interleaved timing rounds; numpy (OpenBLAS): "
        f"{numpy_seconds * 1e3:.3g} ms.\n\n" + table
    )
    if plot:
        section += f"\n![{task_name}]({plot.name})\n"
    print(section, flush=True)
    header = (
        f"## MetaSchedule post-optimization ({time.strftime('%Y-%m-%d')}, TVM {tvm.__version__}, "
        f"{target})\n\nCommand: `python3 ci/tvm_env.py run modern python "
        f"benchmarks/meta_schedule_post_opt.py {' '.join(sys.argv[1:])}`\n\n"
        "Upstream's PostOpt is the pinned official wheel's package, measured through the same "
        "builder and runner.\n\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text(header + section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
