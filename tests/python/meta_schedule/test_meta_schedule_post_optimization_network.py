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
"""tune_relax with post-optimization on an ONNX network, on this CPU, with tiny budgets.

Candidates are built in the test process (:class:`InProcessBuilder`): a
LocalBuilder starts new worker processes for every batch, whose start-up would
dominate a network of small tasks tuned with one trial each.
"""
import json

import numpy as np
import pytest

import tvm
import tvm.meta_schedule as ms
import tvm.testing
from tvm import relax
from tvm.meta_schedule import relax_integration
from tvm.meta_schedule.builder.local_builder import default_build, default_export
from tvm.meta_schedule.post_optimization import post_optimize
from tvm.meta_schedule.utils import derived_object
from tvm.testing import onnx_networks

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
from tvm.relax.frontend.onnx import from_onnx  # pylint: disable=wrong-import-position

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
TUNING_TRIALS = 1
POST_TRIALS = 3


@derived_object
class InProcessBuilder(ms.builder.PyBuilder):
    """Builds and exports each candidate in this process, as LocalBuilder's workers would."""

    def build(self, build_inputs):
        results = []
        for build_input in build_inputs:
            try:
                module = default_build(build_input.mod, build_input.target, None)
                results.append(ms.builder.BuilderResult(default_export(module), None))
            except Exception as err:  # pylint: disable=broad-except
                results.append(ms.builder.BuilderResult(None, f"{type(err).__name__}: {err}"))
        return results


def fused_network(model, input_shape):
    """The Relax module of an ONNX model, legalized and fused as the tuning pipelines do."""
    mod = from_onnx(model, shape_dict={onnx_networks.INPUT_NAME: input_shape})
    with TARGET:
        return tvm.transform.Sequential(
            [
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.get_pipeline("zero"),
            ]
        )(mod)


def records(work_dir):
    with open(work_dir / "database_tuning_record.json", encoding="utf-8") as lines:
        return lines.read().splitlines()


def committed(work_dir, entry):
    """The records of a JSON database's workload ``entry``, in commit order, as JSON:
    ``[trace, run_secs, target, args_info]``."""
    with open(work_dir / "database_workload.json", encoding="utf-8") as lines:
        shashes = [json.loads(line)[0] for line in lines if line.strip()]
    index = shashes.index(str(entry.as_json()[0]))
    lines = [json.loads(line) for line in records(work_dir) if line.strip()]
    return [line[1] for line in lines if line[0] == index]


def computes_like(workload: tvm.IRModule, scheduled: tvm.IRModule) -> bool:
    """Whether ``scheduled`` writes what the unscheduled ``workload`` does, on random inputs."""
    rng = np.random.default_rng(0)
    arrays = [
        rng.uniform(-1, 1, [int(extent) for extent in arg.shape]).astype(str(arg.dtype))
        for arg in ms.arg_info.ArgInfo.from_prim_func(workload["main"])
    ]
    written = []
    for mod in (workload, scheduled):
        args = [tvm.nd.array(array.copy()) for array in arrays]
        tvm.build(mod, target=TARGET)(*args)
        written.append([arg.numpy() for arg in args])
    return all(
        np.allclose(mine, theirs, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(theirs).max()))
        for mine, theirs in zip(written[1], written[0])
    )


@pytest.fixture(scope="module", name="tuned")
def fixture_tuned(tmp_path_factory):
    """ResNet-18 (reduced) tuned with post-optimization: spec, module, tasks, work_dir, database."""
    spec = onnx_networks.reduced("resnet18")
    mod = fused_network(onnx_networks.make_model(spec), spec.input_shape)
    tasks = relax_integration.extract_tasks(mod, TARGET)
    work_dir = tmp_path_factory.mktemp("tune_relax")
    database = relax_integration.tune_relax(
        mod,
        {},
        TARGET,
        str(work_dir),
        max_trials_global=TUNING_TRIALS * len(tasks),
        max_trials_per_task=TUNING_TRIALS,
        num_trials_per_iter=TUNING_TRIALS,
        builder=InProcessBuilder(),
        runner=ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=5)
        ),
        strategy=ms.search_strategy.EvolutionarySearch(population_size=16, init_min_unmeasured=4),
        cost_model="random",  # tuning quality does not matter here, only the records
        post_optimization=POST_TRIALS,
    )
    return spec, mod, tasks, work_dir, database


def test_tune_relax_post_optimizes_every_workload(tuned):
    """Tune relax post optimizes every workload."""
    spec, mod, tasks, work_dir, database = tuned
    reloaded = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    assert len(reloaded) == len(records(work_dir)) == len(database)
    post_optimized = 0
    for task in tasks:
        workload = task.dispatched[0]
        assert reloaded.has_workload(workload), f"{task.task_name} has no record"
        # commit_workload returns the existing workload: nothing is written.
        measured = reloaded.get_top_k(reloaded.commit_workload(workload), 100)
        assert measured, f"{task.task_name} has no record"
        post_optimized += len(measured) > TUNING_TRIALS
    assert post_optimized >= 1, "post-optimization measured programs of the network's tasks"

    with TARGET, reloaded, tvm.transform.PassContext(opt_level=3):
        scheduled = relax.transform.MetaScheduleApplyDatabase(enable_warning=True)(mod)
    machine = relax.VirtualMachine(relax.build(scheduled, target=TARGET), tvm.cpu())
    inputs = onnx_networks.random_input(spec)
    data = tvm.nd.array(inputs[onnx_networks.INPUT_NAME], tvm.cpu())
    output = machine["main"](data).numpy()
    model = onnx_networks.make_model(spec)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    reference = session.run(None, inputs)[0]
    scale = np.abs(reference).max()
    if np.allclose(output, reference, rtol=1e-4, atol=1e-4 * scale):
        return
    # Tuning does not check outputs, and the legacy line's build miscompiles a few
    # schedules: a task's one tuning record can be wrong.  Post-optimization only
    # appends, so that record stays the task's best, but it must be that record,
    # caught when measured again as the start (committed as a failure, 1e10), and
    # no wrong candidate may have been taken.
    wrong = [
        task
        for task in tasks
        if not computes_like(
            task.dispatched[0], reloaded.query_schedule(task.dispatched[0], TARGET, "main").mod
        )
    ]
    assert wrong, "every task's best record computes right, but the network does not"
    for task in wrong:
        entry = reloaded.commit_workload(task.dispatched[0])
        tuning, *later = committed(work_dir, entry)
        best = reloaded.get_top_k(entry, 1)[0]
        best_secs = [float(getattr(secs, "value", secs)) for secs in best.run_secs]
        assert best_secs == pytest.approx(tuning[1]), f"{task.task_name}: a wrong candidate is best"
        again = [record[1] for record in later if record[0] == tuning[0]]
        assert again == [[1e10]], f"{task.task_name}: its wrong start was not caught"


def test_post_optimize_a_database_of_another_network(tuned):
    """Post optimize a database of another network."""
    work_dir = tuned[3]
    before = records(work_dir)
    spec = onnx_networks.reduced("mobilenet_v2")
    other = relax_integration.extract_tasks(
        fused_network(onnx_networks.make_model(spec), spec.input_shape), TARGET
    )
    heaviest = max(other, key=lambda task: task.weight).dispatched[0]
    database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=False)
    with pytest.raises(ValueError, match="unknown workload: the database has no workload equal to"):
        post_optimize(database, POST_TRIALS, tasks=[heaviest], target=TARGET)
    assert records(work_dir) == before, "nothing is written"


def test_tune_relax_network_without_tunable_task(tmp_path):
    mod = fused_network(onnx_networks.single_op_model("Identity"), (1, 8))
    work_dir = tmp_path / "tune"
    with pytest.raises(ValueError, match="No tasks to tune"):
        relax_integration.tune_relax(mod, {}, TARGET, str(work_dir), max_trials_global=4)
    assert not work_dir.exists() or not any(work_dir.rglob("*.json")), "no database is written"


if __name__ == "__main__":
    tvm.testing.main()
