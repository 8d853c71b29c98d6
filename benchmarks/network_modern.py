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
"""The modern line's path of ``networks.py``: Relax's ONNX frontend and MetaSchedule.

Every MetaSchedule task of the network is tuned (an untuned Relax kernel is a
plain loop nest, tens of times slower than a scheduled one); Droplet
post-optimizes the heaviest ones by FLOPs, and on another copy of the
database every task with the same total budget (``max_trials_global``),
those that take the most time in the N network first (``task_weights``).

Builds run in the post-optimizer's ``default_builder``: ``--build-workers``
LocalBuilder workers (by default its own number, one per logical CPU; runs
before 2026-12-07 used one), kept across batches (``max_builds_per_worker``),
so a batch does not wait for a new worker's imports, with a 120 s build
timeout.  (Builds in this process, as before 2026-12-02, had no timeout: one
hung for 17 minutes.)
All methods use the same builder and runner.
"""
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator, List, Tuple

import onnx

import tvm
import tvm.s_tir.analysis
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import relax_integration
from tvm.s_tir.meta_schedule.post_optimization import default_builder, post_optimize
from tvm.s_tir.meta_schedule.post_optimization.workloads import mean_run_secs
from tvm.testing import onnx_networks

from benchmarks.host import host_cpu  # pylint: disable=wrong-import-position
from benchmarks.network_runs import Clock, Compiled, MethodRun, compiled_instances, count_lines

RECORDS = "database_tuning_record.json"


def host_target() -> tvm.target.Target:
    """The host CPU with both cores."""
    return tvm.target.Target({"kind": "llvm", "mcpu": host_cpu(), "num-cores": 2})


def best_flops_rate(seconds: List[float], flops: List[float]) -> float:
    """The highest FLOPs per second of any task (0 when no task has both)."""
    return max((work / secs for work, secs in zip(flops, seconds) if secs > 0 and work > 0), default=0.0)


def slack_of(seconds: List[float], flops: List[float], index: int) -> float:
    """The best GFLOPS among the tasks over task ``index``'s own (inf without FLOPs)."""
    best = best_flops_rate(seconds, flops)
    if best <= 0 or flops[index] <= 0 or seconds[index] <= 0:
        return float("inf")
    return best / (flops[index] / seconds[index])


def headroom_order(seconds: List[float], flops: List[float]) -> List[int]:
    """Task indices by headroom, largest first: a task's weighted time minus the time its
    FLOPs would take at the best GFLOPS of any task, ``share x (1 - 1/slack)``."""
    best = best_flops_rate(seconds, flops)

    def headroom(index: int) -> float:
        if best <= 0 or flops[index] <= 0:
            return seconds[index]
        return seconds[index] - flops[index] / best

    return sorted(range(len(seconds)), key=lambda index: -headroom(index))


def full_network(name: str, workdir: Path) -> "Network":
    """The full network ``name`` on the host CPU, its ONNX model written into ``workdir``:
    for scripts that tune or compile it outside ``networks.py`` (no tuning options; one
    compilation per ``compile``)."""
    spec = onnx_networks.full(name)
    model_path = workdir / f"{spec.label}.onnx"
    onnx_networks.write_model(spec, str(model_path))
    return Network(spec, str(model_path), onnx_networks.random_input(spec), host_target(), SimpleNamespace(compiles=1), workdir)


class Network:
    """One ONNX network on the modern line: Relax module, compile helpers, tuning methods."""

    def __init__(self, spec, model_path: str, inputs, target, args, workdir: Path):
        self.spec, self.inputs, self.target, self.args, self.workdir = spec, inputs, target, args, workdir
        mod = from_onnx(onnx.load(model_path), shape_dict={onnx_networks.INPUT_NAME: spec.input_shape})
        with self.target:
            self.mod = tvm.transform.Sequential(
                [
                    relax.transform.DecomposeOpsForInference(),
                    relax.transform.CanonicalizeBindings(),
                    relax.get_pipeline("zero"),
                ]
            )(mod)
        self.tasks = relax_integration.extract_tasks(self.mod, self.target)
        self.weights = [
            tvm.s_tir.analysis.estimate_tir_flops(task.dispatched[0]) * task.weight for task in self.tasks
        ]

    def describe(self) -> str:
        """One line about the network: its tasks and FLOPs."""
        return (
            f"{len(self.tasks)} MetaSchedule tasks, {sum(self.weights) / 1e9:.2f} GFLOP per inference "
            "(TVM's count)"
        )

    def _compiled(self, executable) -> Compiled:
        dev = tvm.cpu()
        machine = relax.VirtualMachine(executable, dev)
        data = tvm.runtime.tensor(self.inputs[onnx_networks.INPUT_NAME], dev)
        output = machine["main"](data).numpy()
        timer = machine.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=200)
        return Compiled(output, lambda: float(timer(data).mean))

    def compile_untuned(self) -> Compiled:
        """Relax's build of the network without schedules."""
        return compiled_instances(
            lambda: self._compiled(tvm.compile(self.mod, target=self.target)), self.args.compiles
        )

    def weighted_seconds(self, work_dir: Path) -> List[float]:
        """Per task, its best record's mean run time x its weight: its share of the network's time."""
        database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
        seconds = []
        for task in self.tasks:
            mod = task.dispatched[0]
            best = []
            if database.has_workload(mod):
                best = database.get_top_k(database.commit_workload(mod), 1)
            mean = mean_run_secs(best[0]) if best else None
            seconds.append(mean * task.weight if mean is not None else 0.0)
        return seconds

    def compile(self, work_dir: Path) -> Compiled:
        """The network with the best schedule of each task in the database of ``work_dir``.

        As Relax's static-shape tuning pipeline does: the database is applied to
        the fused module that was tuned (``compile_relax`` would legalize and
        fuse it again, into functions the database does not hold).
        """
        database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)

        def compile_once() -> Compiled:
            with self.target, database, tvm.transform.PassContext(opt_level=3):
                scheduled = relax.transform.MetaScheduleApplyDatabase(enable_warning=True)(self.mod)
            return self._compiled(tvm.compile(scheduled, target=self.target))

        return compiled_instances(compile_once, self.args.compiles)

    def post_optimize(self, database, indices, cap, builder, runner, **options):
        """``post_optimize`` of the tasks at ``indices`` on ``database``, ``cap`` trials each."""
        return post_optimize(
            database,
            cap,
            target=self.target,
            builder=builder,
            runner=runner,
            tasks=[self.tasks[index].dispatched[0] for index in indices],
            **options,
        )

    def post_optimize_in_order(self, database, indices, cap, budget, builder, runner):
        """``post_optimize`` of one task at a time, in the order of ``indices``, until
        ``budget`` measurements are spent; one result per index (unreached: ``None``)."""
        results = []
        for index in indices:
            if budget <= 0:
                results.append(None)
                continue
            (result,) = self.post_optimize(
                database,
                [index],
                cap,
                builder,
                runner,
                task_weights=[self.tasks[index].weight],
                max_trials_global=budget,
            )
            budget -= result.measured
            results.append(result)
        return results

    def tune(self, scheduler: str) -> Iterator[Tuple[MethodRun, Compiled]]:
        """MetaSchedule N, N + Droplet post-optimization, and 5N; ``scheduler`` is ``meta_schedule``."""
        assert scheduler == "meta_schedule", scheduler
        args = self.args
        builder = default_builder(max_workers=args.build_workers)
        runner = ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(
                number=3, repeat=3, min_repeat_ms=0 if args.quick else 50
            )
        )

        strategy = "evolutionary"
        if args.population:
            strategy = ms.search_strategy.EvolutionarySearch(
                population_size=args.population, init_min_unmeasured=max(1, args.population // 4)
            )

        def tune_relax(work_dir: Path, trials_per_task: int) -> None:
            relax_integration.tune_relax(
                self.mod, {}, self.target, str(work_dir),
                max_trials_global=trials_per_task * len(self.tasks),
                max_trials_per_task=trials_per_task,
                num_trials_per_iter=min(trials_per_task, 64),
                builder=builder, runner=runner, seed=args.seed, strategy=strategy,
            )

        long_name = "ms-5N"
        long_run = MethodRun(self.spec.label, long_name)
        clock = Clock(long_run)
        work_dir = self.workdir / "ms"
        with clock:
            tune_relax(work_dir, args.ms_trials)
        compiled = self.compile(work_dir)
        clock.checkpoint(count_lines(work_dir / RECORDS), compiled, label="ms-N")
        short = long_run.branch("ms-N", f"N={args.ms_trials} per task, all {len(self.tasks)} tasks")
        yield short, compiled

        by_flops = sorted(range(len(self.tasks)), key=lambda index: -self.weights[index])[: args.tasks]
        seconds = self.weighted_seconds(work_dir)
        budget = args.tasks * args.post_trials
        all_tasks = list(range(len(self.tasks)))
        # The library's order: every task, the largest best-record time x weight first,
        # until the same number of measurements is spent; per-task caps other than
        # --post-trials on request (--shared-caps).
        shared = dict(task_weights=[task.weight for task in self.tasks], max_trials_global=budget)
        # By headroom: the same budget, one task at a time, the largest headroom first
        # (see headroom_order).
        by_headroom = headroom_order(seconds, self.weights)
        print(
            "  headroom order (task: share of N's kernel time, slack): "
            + ", ".join(
                f"{index + 1}: {seconds[index] / sum(seconds):.1%}, "
                f"{slack_of(seconds, self.weights, index):.2f}"
                for index in by_headroom
            ),
            flush=True,
        )
        orders = {
            "flops": [("ms-N+droplet", by_flops, args.post_trials, {})],
            "time": [("ms-N+droplet-by-time", all_tasks, args.post_trials, shared)]
            + [(f"ms-N+droplet-by-time-cap{cap}", all_tasks, cap, shared) for cap in args.shared_caps]
            + [
                (f"ms-N+droplet-by-time-{total}", all_tasks, args.post_trials, dict(shared, max_trials_global=total))
                for total in args.global_budgets
            ],
            "headroom": [("ms-N+droplet-by-headroom", by_headroom, args.post_trials, None)],
            # The library's order without other workloads' schedules in each first batch.
            "time-alone": [("ms-N+droplet-by-time-alone", all_tasks, args.post_trials, dict(shared, transfer=False))],
        }
        selections = [selection for order in args.post_orders for selection in orders[order]]
        for method, indices, cap, options in selections:
            post_dir = self.workdir / method
            shutil.copytree(work_dir, post_dir)
            post_run = short.branch(method)
            post_clock = Clock(post_run)
            database = ms.database.JSONDatabase(work_dir=str(post_dir), allow_missing=False)
            with post_clock:
                if options is None:
                    results = self.post_optimize_in_order(database, indices, cap, budget, builder, runner)
                else:
                    results = self.post_optimize(database, indices, cap, builder, runner, **options)
            searched = [
                (index, result) for index, result in zip(indices, results) if result and result.measured
            ]
            share = sum(seconds[index] for index, _ in searched) / sum(seconds)
            post_run.notes = (
                f"post-optimized tasks {[index + 1 for index, _ in searched]} of {len(self.tasks)} "
                f"({share:.0%} of the N network's kernel time): "
                + ", ".join(
                    f"{result.speedup:.2f}x ({result.trials}"
                    + (f", {result.transferred} taken over" if result.transferred else "")
                    + ")"
                    for _, result in searched
                )
            )
            post_compiled = self.compile(post_dir)
            post_clock.checkpoint(count_lines(post_dir / RECORDS), post_compiled)
            yield post_run, post_compiled

        if args.skip_5n:
            return
        with clock:
            tune_relax(work_dir, 4 * args.ms_trials)
        compiled = self.compile(work_dir)
        clock.checkpoint(count_lines(work_dir / RECORDS), compiled)
        long_run.notes = f"5N={5 * args.ms_trials} per task (N, then 4N resumed from the database)"
        yield long_run, compiled
