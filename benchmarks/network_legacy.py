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
"""The legacy line's paths of ``networks.py``: Relay's ONNX frontend, AutoTVM and Ansor."""
import logging
import random
import shutil
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import numpy as np
import onnx

import tvm
from tvm import auto_scheduler, autotvm, relay
from tvm.auto_scheduler.droplet_log import best_cost_of_workload
from tvm.contrib import graph_executor
from tvm.testing import onnx_networks

from benchmarks.ansor_checks import StateVerdicts, mark_wrong
from benchmarks.autotvm_tuners import curve_callback
from benchmarks.network_runs import Clock, Compiled, MethodRun, compiled_instances, count_lines
from benchmarks.report import Curve
from benchmarks.tuners import make_tuner
from benchmarks.workloads import host_target_string

TRANSFER = "+tl"
"""The suffix of an AutoTVM tuner given the log of the tasks tuned before each task
(``tuner.load_history``), as TVM's tuning tutorials do with ``use_transfer_learning``."""


def host_target() -> tvm.target.Target:
    """The host CPU as ``-mcpu`` (the closest CPU this LLVM knows, see ``host.py``)."""
    return tvm.target.Target(host_target_string())


def ansor_runner(quick: bool = False) -> auto_scheduler.LocalRunner:
    """The runner of every Ansor method: three costs per state, each of runs of at least 30 ms."""
    return auto_scheduler.LocalRunner(number=3, repeat=3, min_repeat_ms=0 if quick else 30, timeout=60)


class Network:
    """One ONNX network on the legacy line: Relay module, compile helpers, tuning methods."""

    def __init__(self, spec, model_path: str, inputs, target, args, workdir: Path):
        self.spec, self.inputs, self.target, self.args, self.workdir = spec, inputs, target, args, workdir
        model = onnx.load(model_path)
        self.layers = onnx_networks.layers(model)
        self.mod, self.params = relay.frontend.from_onnx(
            model, shape={onnx_networks.INPUT_NAME: spec.input_shape}
        )
        # Tasks without records use TOPI's fallback configurations: do not warn for each.
        autotvm.GLOBAL_SCOPE.silent = True
        logging.getLogger("auto_scheduler").setLevel(logging.INFO)

    def describe(self) -> str:
        """One line about the network: its layers and FLOPs."""
        flop = sum(layer.flop for layer in self.layers)
        return f"{len(self.layers)} convolution and dense layers, {flop / 1e9:.2f} GFLOP per inference"

    # ---------------------------------------------------------------- compiling
    def _compiled(self, lib) -> Compiled:
        dev = tvm.cpu()
        module = graph_executor.GraphModule(lib["default"](dev))
        module.set_input(**self.inputs)
        module.run()
        output = module.get_output(0).numpy()
        timer = module.module.time_evaluator("run", dev, number=1, repeat=1, min_repeat_ms=200)
        return Compiled(output, lambda: float(timer().mean))

    def compile_untuned(self) -> Compiled:
        """Relay's build with TOPI's fallback configurations."""
        return self.compile()

    def compile(self, autotvm_log: Optional[Path] = None, ansor_log: Optional[Path] = None) -> Compiled:
        """Build the network with AutoTVM or Ansor records (the best of each task), --compiles times."""
        return compiled_instances(lambda: self._compiled(self._build(autotvm_log, ansor_log)), self.args.compiles)

    def _build(self, autotvm_log: Optional[Path], ansor_log: Optional[Path]):
        if ansor_log is not None:
            with auto_scheduler.ApplyHistoryBest(str(ansor_log)):
                config = {"relay.backend.use_auto_scheduler": True}
                with tvm.transform.PassContext(opt_level=3, config=config):
                    return relay.build(self.mod, target=self.target, params=self.params)
        if autotvm_log is not None:
            with autotvm.apply_history_best(str(autotvm_log)):
                with tvm.transform.PassContext(opt_level=3):
                    return relay.build(self.mod, target=self.target, params=self.params)
        with tvm.transform.PassContext(opt_level=3):
            return relay.build(self.mod, target=self.target, params=self.params)

    # ------------------------------------------------------------------ tuning
    def tune(self, scheduler: str) -> Iterator[Tuple[MethodRun, Compiled]]:
        """Every method of ``scheduler`` (``autotvm`` or ``ansor``), with its final build."""
        random.seed(self.args.seed)
        np.random.seed(self.args.seed)
        if scheduler == "autotvm":
            yield from self._autotvm()
        else:
            yield from self._ansor()

    def _occurrences(self, task) -> int:
        """How many layers of the network an AutoTVM task computes (operand shapes and strides)."""
        data, weight = tuple(task.args[0][1]), tuple(task.args[1][1])
        strides = tuple(task.args[2]) if "conv" in task.name else ()
        return max(
            1,
            sum(
                1
                for layer in self.layers
                if layer.data == data and layer.weight == weight and (not strides or layer.strides == strides)
            ),
        )

    def _selection_note(self, weights: List[float], chosen: List[int], kind: str) -> str:
        """Say (and print) which share of the tasks' weighted FLOPs the chosen tasks hold."""
        share = sum(weights[index] for index in chosen) / sum(weights)
        note = (
            f"{kind}: {len(chosen)} of {len(weights)} tasks tuned, the heaviest by FLOPs x occurrences "
            f"({share:.0%} of the tasks' weighted FLOPs)"
        )
        print(f"  {self.spec.label}: {note}", flush=True)
        return note

    def _autotvm(self) -> Iterator[Tuple[MethodRun, Compiled]]:
        tasks = autotvm.task.extract_from_program(self.mod["main"], target=self.target, params=self.params)
        weights = [task.flop * self._occurrences(task) for task in tasks]
        chosen = sorted(range(len(tasks)), key=lambda index: -weights[index])[: self.args.tasks]
        note = self._selection_note(weights, chosen, "AutoTVM")
        measure_option = autotvm.measure_option(
            builder=autotvm.LocalBuilder(timeout=60),
            runner=autotvm.LocalRunner(
                number=2, repeat=3, min_repeat_ms=0 if self.args.quick else 50, timeout=60,
                enable_cpu_cache_flush=True,
            ),
        )
        for tuner in self.args.tuners.split(","):
            run = MethodRun(self.spec.label, f"autotvm-{tuner}", notes=note)
            clock = Clock(run)
            log = self.workdir / f"autotvm-{tuner}.log"
            stopped = 0
            for position, index in enumerate(chosen):
                task = tasks[index]
                budget = min(self.args.trials, len(task.config_space))
                before = count_lines(log)
                label = f"{run.method} task {position + 1}/{len(chosen)} {task.name}"
                with clock:
                    tuner_object = make_tuner(tuner.removesuffix(TRANSFER), task)
                    if tuner.endswith(TRANSFER) and before:
                        tuner_object.load_history(autotvm.record.load_from_file(str(log)))
                    tuner_object.tune(
                        n_trial=budget,
                        early_stopping=None,
                        measure_option=measure_option,
                        callbacks=[
                            autotvm.callback.log_to_file(str(log)),
                            curve_callback(Curve(run.method, task.name, 0), label),
                        ],
                    )
                stopped += count_lines(log) - before < budget
                compiled = self.compile(autotvm_log=log)
                clock.checkpoint(count_lines(log), compiled)
            if tuner == "droplet-stop":
                run.notes += f"; Droplet stopped by itself on {stopped} of {len(chosen)} tasks"
            yield run, compiled

    def ansor_tasks(self, count: int) -> Tuple[list, List[int], List[float], List[int]]:
        """The network's Ansor tasks, their occurrences, their weights (FLOPs x occurrences)
        and the indices of the ``count`` heaviest, heaviest first."""
        tasks, counts = auto_scheduler.extract_tasks(self.mod["main"], self.params, self.target)
        weights = [task.compute_dag.flop_ct * occurrences for task, occurrences in zip(tasks, counts)]
        chosen = sorted(range(len(tasks)), key=lambda index: -weights[index])[:count]
        return tasks, counts, weights, chosen

    def _ansor(self) -> Iterator[Tuple[MethodRun, Compiled]]:
        args = self.args
        tasks, counts, weights, chosen = self.ansor_tasks(args.tasks)
        note = self._selection_note(weights, chosen, "Ansor")
        tasks, counts = [tasks[index] for index in chosen], [counts[index] for index in chosen]
        runner = ansor_runner(args.quick)

        search_params = None
        if args.population:
            search_params = {
                "evolutionary_search_population": args.population,
                "sample_init_min_population": max(1, args.population // 4),
            }

        def options(log: Path, trials: int) -> auto_scheduler.TuningOptions:
            return auto_scheduler.TuningOptions(
                num_measure_trials=trials,
                num_measures_per_round=min(args.explore, 16),
                runner=runner,
                measure_callbacks=[auto_scheduler.RecordToFile(str(log))],
                verbose=0,
            )

        def explore(log: Path, resume: bool) -> None:
            scheduler = auto_scheduler.TaskScheduler(
                tasks,
                counts,
                load_log_file=str(log) if resume else None,
                # Not the default callbacks: they write total_latency.tsv into the working directory.
                callbacks=[auto_scheduler.task_scheduler.LogEstimatedLatency(str(self.workdir / "latency.tsv"))],
            )
            scheduler.tune(options(log, args.explore * len(tasks)), search_policy_params=search_params)

        def task_ms(log: Path) -> List[float]:
            records = list(auto_scheduler.load_records(str(log)))
            return [1e3 * best_cost_of_workload(records, task.workload_key, task.target) for task in tasks]

        verdicts = StateVerdicts()
        tuned = {task.workload_key: task for task in tasks}

        def checked(log: Path, method: str) -> Tuple[Path, str]:
            """The log whose best records are built, ``log`` or a copy with the wrong fastest
            states of the tuned tasks marked (so that every method is built from right kernels),
            and a note for the method saying how many were marked (empty when none)."""
            copy = log.with_name(f"{log.stem}-checked.json")
            try:
                found = mark_wrong(log, copy, tuned, verdicts)
            finally:
                verdicts.close()
            for line in found:
                print(f"  {self.spec.label}: {method}: wrong state marked: {line}", flush=True)
            if not found:
                copy.unlink(missing_ok=True)  # an earlier checkpoint's copy is not this build's
                return log, ""
            count = len(found)
            return copy, (
                f"; built from a copy of the log with {count} wrong fastest state{'s' * (count > 1)} "
                "marked (their kernels compute other values than the task)"
            )

        long_run = MethodRun(self.spec.label, f"ansor-{args.factor}K", notes=note)
        clock = Clock(long_run)
        log = self.workdir / "ansor.json"
        with clock:
            explore(log, resume=False)
        built, marked = checked(log, "ansor-K")
        compiled = self.compile(ansor_log=built)
        clock.checkpoint(count_lines(log), compiled, label="ansor-K")
        short = long_run.branch("ansor-K", f"{note}; K={args.explore} per task{marked}")
        short.task_ms = task_ms(built)
        yield short, compiled

        def exploit_copy(
            method: str, description: str, trials: int, **kwargs
        ) -> Tuple[MethodRun, Compiled]:
            """``droplet_exploit`` on a copy of the K log, as the method ``method``."""
            copy = self.workdir / f"{method}.json"
            shutil.copy(log, copy)
            run = short.branch(method)
            run_clock = Clock(run)
            with run_clock:
                results = auto_scheduler.droplet_exploit(
                    str(copy), self.target, options(copy, trials),
                    exploitation_trials=trials, tasks=tasks, **kwargs,
                )
            if kwargs.get("transfer", True):
                columns = "measured, taken over"
                per_task = [f"{r.speedup:.2f}x ({r.exploitation_trials}, {r.transferred})" for r in results]
            else:
                columns = "measured"
                per_task = [f"{r.speedup:.2f}x ({r.exploitation_trials})" for r in results]
            built, marked = checked(copy, method)
            run.notes = f"{description}; Droplet over its start per task ({columns}): " + ", ".join(per_task) + marked
            run_compiled = self.compile(ansor_log=built)
            run_clock.checkpoint(count_lines(copy), run_compiled)
            run.task_ms = task_ms(built)
            return run, run_compiled

        yield exploit_copy("ansor-K+droplet", f"{args.exploit} per task", args.exploit)
        if args.exploit_no_transfer:
            yield exploit_copy(
                "ansor-K+droplet-no-transfer", "without other tasks' states", args.exploit, transfer=False
            )
        for total, cap in args.exploit_shared:
            yield exploit_copy(
                f"ansor-K+droplet-{total}x{cap}",
                f"{total} Droplet measurements shared, at most {cap} per task: every task first, "
                "then the heaviest weighted cost after that",
                cap, task_weights=counts, max_trials_global=total,
            )

        if args.skip_fk:
            return
        for _ in range(args.factor - 1):
            with clock:
                explore(log, resume=True)
            built, marked = checked(log, long_run.method)
            compiled = self.compile(ansor_log=built)
            clock.checkpoint(count_lines(log), compiled)
        long_run.notes += (
            f"; {args.factor}K={args.factor * args.explore} per task, resumed from the log every K"
            + marked
        )
        long_run.task_ms = task_ms(built)
        yield long_run, compiled
