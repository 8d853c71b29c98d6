"""One build worker or two, side by side, for MetaSchedule's N, N + post-optimization and 5N:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-n8-build-workers/build_workers.py \
        resnet18 4 3 /tmp/s43/workers-r18

As networks.py does it, on the TASKS heaviest tasks (by FLOPs) of NETWORK: tune N = 8 per task,
post-optimize a copy of that database (32 measurements per task), then tune the database on
with 5N per task, as networks.py's 5N does (these tasks never run out: 40 more trials each).
Each round runs both worker counts (alternating which goes first), each with its own
default_builder kept for the whole run.  Prints one JSON row per round and worker
count, then the medians.  Usage: build_workers.py NETWORK TASKS ROUNDS OUT
"""
import json, shutil, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks import network_modern as nm  # noqa: E402
from benchmarks.network_runs import count_lines  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule import relax_integration  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import default_builder, post_optimize  # noqa: E402

NET, TASKS, ROUNDS, OUT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
N, POST, FACTOR = 8, 32, 5
OUT.mkdir(parents=True, exist_ok=True)
net = nm.full_network(NET, OUT)
target = net.target
order = sorted(range(len(net.tasks)), key=lambda i: -net.weights[i])[:TASKS]
extracted = [net.tasks[i] for i in order]
print("tasks", [t.task_name for t in extracted], flush=True)
runner = ms.runner.LocalRunner(
    evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=50)
)
builders = {1: default_builder(max_workers=1), 2: default_builder(max_workers=2)}


def tune(work_dir: Path, trials: int, builder, seed: int) -> float:
    start = time.time()
    contexts, weights = relax_integration.extracted_tasks_to_tune_contexts(
        extracted, str(work_dir), seed=seed
    )
    ms.tune_tasks(
        tasks=contexts, task_weights=weights, work_dir=str(work_dir),
        max_trials_global=trials * len(contexts), max_trials_per_task=trials,
        num_trials_per_iter=min(trials, 64), builder=builder, runner=runner,
    )
    return time.time() - start


rows = []
for round_index in range(ROUNDS):
    for workers in ([1, 2] if round_index % 2 == 0 else [2, 1]):
        short = OUT / f"n-{round_index}-{workers}"
        post_dir = OUT / f"post-{round_index}-{workers}"
        for stale in (short, post_dir):
            if stale.exists():
                shutil.rmtree(stale)
        n_secs = tune(short, N, builders[workers], seed=round_index)
        n_trials = count_lines(short / nm.RECORDS)
        shutil.copytree(short, post_dir)
        start = time.time()
        results = post_optimize(
            ms.database.JSONDatabase(work_dir=str(post_dir), allow_missing=False), POST,
            target=target, builder=builders[workers], runner=runner,
            tasks=[t.dispatched[0] for t in extracted],
        )
        post_secs = time.time() - start
        measured = sum(r.measured for r in results)
        rest_secs = tune(short, FACTOR * N, builders[workers], seed=round_index)
        row = dict(
            round=round_index, workers=workers, n_secs=n_secs, n_trials=n_trials,
            post_secs=post_secs, post_measured=measured,
            speedups=[round(r.speedup, 3) for r in results],
            rest_secs=rest_secs, rest_trials=count_lines(short / nm.RECORDS) - n_trials,
            ratio=(n_secs + post_secs) / (n_secs + rest_secs),
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
(OUT / "rows.json").write_text(json.dumps(rows, indent=1))
for workers in (1, 2):
    mine = [r for r in rows if r["workers"] == workers]

    def med(key_secs, key_count):
        return statistics.median(r[key_secs] / r[key_count] for r in mine)

    print(
        f"workers {workers}: N {med('n_secs', 'n_trials'):.3f} s/trial, post-opt "
        f"{med('post_secs', 'post_measured'):.3f} s/measurement, 4N {med('rest_secs', 'rest_trials'):.3f} s/trial, "
        f"(N + post) / 5N {statistics.median(r['ratio'] for r in mine):.3f} "
        + "(" + ", ".join(format(r["ratio"], ".3f") for r in mine) + ")"
    )
