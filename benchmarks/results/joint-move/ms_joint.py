"""MetaSchedule N + post-optimization with and without the joint move, side by side."""
import random, shutil, statistics, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from benchmarks import meta_schedule_post_opt as bench
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.post_optimization import default_builder, post_optimize
from tvm.contrib.droplet_search.search import DropletSearch

N, POST, REPEATS, SHAPE = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), (512, 512, 512)
args = type("A", (), {"number": 3, "min_repeat_ms": 50})()
target = bench.host_target()
mod = bench.matmul_module(*SHAPE)
builder = default_builder(max_workers=1)
runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=50))
joint = DropletSearch._joint
timers = {"N": [], "nojoint": [], "joint": []}
with tempfile.TemporaryDirectory() as scratch:
    for repeat in range(REPEATS):
        short = Path(scratch) / f"short-{repeat}"
        t = time.time()
        ms.tune_tir(mod, target, str(short), max_trials_global=N, num_trials_per_iter=min(64, N), builder=builder, runner=runner, seed=repeat)
        print(f"[r{repeat}] N: {time.time()-t:.0f} s", flush=True)
        timers["N"].append(bench.kernel_timer(short, mod, target, SHAPE, args)[1])
        order = ["nojoint", "joint"]; random.Random(repeat).shuffle(order)
        for which in order:
            copy = Path(scratch) / f"{which}-{repeat}"
            shutil.copytree(short, copy)
            DropletSearch._joint = joint if which == "joint" else (lambda self, accepted, steps: None)
            t = time.time()
            (result,) = post_optimize(ms.database.JSONDatabase(work_dir=str(copy), allow_missing=False), POST, builder=builder, runner=runner)
            print(f"[r{repeat}] {which}: {time.time()-t:.0f} s, {result.trials} trials, speedup {result.speedup:.3f}x ({result.stop_reason})", flush=True)
            correct, timer = bench.kernel_timer(copy, mod, target, SHAPE, args)
            timers[which].append(timer)
    DropletSearch._joint = joint
    secs = {k: [[] for _ in v] for k, v in timers.items()}
    for _ in range(7):
        for k, v in timers.items():
            for i, timer in enumerate(v):
                secs[k][i].append(timer())
for k, v in secs.items():
    print(k, " ".join(f"{statistics.median(x)*1e3:.3f}" for x in v), "ms (median of 7 per repeat)")
for i in range(REPEATS):
    print(f"repeat {i}: joint/nojoint speed {statistics.median(secs['nojoint'][i])/statistics.median(secs['joint'][i]):.3f}x, nojoint/N {statistics.median(secs['N'][i])/statistics.median(secs['nojoint'][i]):.3f}x, joint/N {statistics.median(secs['N'][i])/statistics.median(secs['joint'][i]):.3f}x")
