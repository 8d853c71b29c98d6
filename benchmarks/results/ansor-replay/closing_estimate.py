"""A closing transfer round, estimated on a finished replay's log: each task's final best
measured again with the other tasks' final bests taken over (those it never measured), in one
batch per task (offline; the output of the seven transfer replays is `closing-estimate.txt`).

    python3 ci/tvm_env.py run legacy python benchmarks/results/ansor-replay/closing_estimate.py \
        REPLAY_OUT/ansor-K+droplet-today.json --network mobilenet_v2 --tasks 12
"""
import statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from tvm import auto_scheduler
from tvm.auto_scheduler.measure import MeasureInput
from tvm.auto_scheduler.droplet_log import costs_of, steps_of, state_key
from tvm.auto_scheduler.droplet_space import StateSpace
from benchmarks.ansor_states import fastest
from benchmarks.network_legacy import ansor_runner
sys.path.insert(0, str(Path(__file__).resolve().parent))
from transfer_sources import read_replay

def ms(costs): return statistics.fmean(costs) * 1e3
tasks, recs, n, order = read_replay()
finals = {k: fastest(recs, k) for k in order}
builder, runner = auto_scheduler.LocalBuilder(), ansor_runner()
before_sum = after_sum = 0.0
for number, key in enumerate(order, 1):
    task, weight = tasks[key]
    best = finals[key]
    space = StateSpace(task, best[0].state)
    seen = {state_key(r[0]) for r in recs if r[0].task.workload_key == key}  # and taken
    cands = []
    for k2 in order:
        if k2 == key: continue
        pt = space.point_like(steps_of(finals[k2][0]))
        if pt is None or not space.is_valid(pt): continue
        mi = MeasureInput(task, space.state(pt))
        if state_key(mi) in seen: continue
        seen.add(state_key(mi))
        cands.append((mi, order.index(k2) + 1))
    if not cands:
        print(f"task {number}: nothing new"); b = ms(costs_of(best[1])); before_sum += weight * b; after_sum += weight * b; continue
    inputs = [MeasureInput(task, best[0].state)] + [c for c, _ in cands]
    results = runner.run(inputs, builder.build(inputs))
    costs = [ms([float(x) for x in r.costs]) if r.error_no == 0 else float("inf") for r in results]
    b = costs[0]; nb = min(costs)
    before_sum += weight * b; after_sum += weight * nb
    print(f"task {number} (x{weight}): best again {b:.4f} (log {ms(costs_of(best[1])):.4f}); new: " +
          ", ".join(f"t{src} {b/c:.2f}x" for (_, src), c in zip(cands, costs[1:])) + f" -> {b/nb:.3f}x", flush=True)
print(f"weighted sum {before_sum:.3f} -> {after_sum:.3f} ms: {before_sum/after_sum:.3f}x")
