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
"""Droplet exploitation of the tasks of an ONNX network, resumed in a fresh process."""
import json
import shutil
import subprocess
import sys

import pytest

import tvm
import tvm.testing
from tvm import auto_scheduler, relay
from tvm.auto_scheduler.droplet_log import state_key
from tvm.testing import onnx_networks

onnx = pytest.importorskip("onnx")

TASKS = 2
EXPLORATION_TRIALS = 2
EXPLOITATION_TRIALS = 3
SEARCH_POLICY_PARAMS = {
    "evolutionary_search_population": 32,
    "evolutionary_search_num_iters": 1,
    "sample_init_min_population": 8,
}

# Run in a new process: register the network's workloads by extracting its
# tasks again, then exploit every workload of the log (tasks=None).
RESUME = """
import json, sys
from tvm import auto_scheduler, relay
from tvm.testing import onnx_networks
log, target, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = onnx_networks.reduced("resnet18")
mod, params = relay.frontend.from_onnx(
    onnx_networks.make_model(spec), shape={onnx_networks.INPUT_NAME: spec.input_shape}
)
auto_scheduler.extract_tasks(mod["main"], params, target)
runner = auto_scheduler.LocalRunner(number=1, repeat=2, timeout=60)
options = auto_scheduler.TuningOptions(runner=runner)
results = auto_scheduler.droplet_exploit(log, target, options, trials, batch_size=trials)
print(json.dumps({r.workload_key: [r.exploitation_trials, r.states_from_log] for r in results}))
"""


def host_target():
    """This host's CPU, named so the kernels use its vector units."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target(f"llvm -mcpu={cpu}")


def network_tasks(name, target):
    """The auto-scheduler tasks of the reduced ``name`` network, heaviest first."""
    spec = onnx_networks.reduced(name)
    mod, params = relay.frontend.from_onnx(
        onnx_networks.make_model(spec), shape={onnx_networks.INPUT_NAME: spec.input_shape}
    )
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, target)
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i].compute_dag.flop_ct * weights[i])
    return [tasks[index] for index in order]


def tuning_options(log):
    return auto_scheduler.TuningOptions(
        num_measures_per_round=EXPLORATION_TRIALS,
        runner=auto_scheduler.LocalRunner(number=1, repeat=2, timeout=60),
        measure_callbacks=[auto_scheduler.RecordToFile(str(log))],
    )


def logged_states(log):
    return [state_key(inp) for inp, _ in auto_scheduler.load_records(str(log))]


@pytest.fixture(scope="module", name="explored")
def fixture_explored(tmp_path_factory):
    """The reduced ResNet-18's heaviest tasks explored and exploited into a log: (tasks,
    results, log). Tests copy the log before they write to it."""
    target = host_target()
    tasks = network_tasks("resnet18", target)[:TASKS]
    log = tmp_path_factory.mktemp("explored") / "ansor.json"
    results = auto_scheduler.explore_and_exploit(
        tasks,
        tuning_options(log),
        str(log),
        exploration_trials=EXPLORATION_TRIALS,
        exploitation_trials=EXPLOITATION_TRIALS,
        search_policy_params=dict(SEARCH_POLICY_PARAMS),
        batch_size=EXPLOITATION_TRIALS,
    )
    return tasks, results, log


@tvm.testing.requires_llvm
def test_network_explore_exploit_then_resume(explored, tmp_path):
    """Network explore exploit then resume in a fresh process."""
    tasks, results, explored_log = explored
    target = host_target()
    log = tmp_path / "ansor.json"
    shutil.copyfile(explored_log, log)
    assert [result.workload_key for result in results] == [task.workload_key for task in tasks]
    before = logged_states(log)
    assert len(before) == sum(r.exploration_trials + r.exploitation_trials for r in results)
    starts = {
        state_key(auto_scheduler.load_best_record(str(log), task.workload_key)[0]) for task in tasks
    }

    resumed = subprocess.run(
        [sys.executable, "-c", RESUME, str(log), str(target), str(EXPLOITATION_TRIALS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    counts = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert set(counts) == {task.workload_key for task in tasks}, "every workload of the log"
    after = logged_states(log)
    assert after[: len(before)] == before, "the log is only appended to"
    grown = after[len(before) :]
    # Nothing measured before is measured again but each task's start, the log's best
    # state, once (compared with its challengers under today's conditions): the rest are
    # new states, as many as the second call says it measured, within its budget.
    assert len(grown) == sum(measured for measured, _ in counts.values())
    assert set(grown) & set(before) <= starts and len(set(grown)) == len(grown)
    for first in results:
        measured, from_log = counts[first.workload_key]
        assert from_log >= 1, "the walk restarts from the logged best state"
        assert 1 <= measured <= EXPLOITATION_TRIALS
        if "exhausted" in first.stop_reason:
            assert measured == 1, "a converged search measures only its start again"


@tvm.testing.requires_llvm
def test_network_without_tunable_task(tmp_path):
    model = onnx_networks.single_op_model("Relu")
    mod, params = relay.frontend.from_onnx(model, shape={onnx_networks.INPUT_NAME: (1, 8)})
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, host_target())
    log = tmp_path / "ansor.json"
    with pytest.raises(ValueError, match="needs at least one task"):
        auto_scheduler.explore_and_exploit(tasks, tuning_options(log), str(log), 2, 2)
    assert not log.exists()


@tvm.testing.requires_llvm
def test_log_of_another_network(explored, tmp_path):
    """Log of another network."""
    log = tmp_path / "resnet.json"
    shutil.copyfile(explored[2], log)
    content = log.read_bytes()
    target = host_target()
    mobilenet_tasks = network_tasks("mobilenet_v2", target)
    with pytest.raises(ValueError, match="holds no successful record of task"):
        auto_scheduler.droplet_exploit(
            str(log), target, tuning_options(log), EXPLOITATION_TRIALS, tasks=mobilenet_tasks
        )
    assert log.read_bytes() == content, "nothing is written"


if __name__ == "__main__":
    tvm.testing.main()
