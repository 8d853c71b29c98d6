"""Where 2K's and 5K's best states lie relative to K's records: in which K record's space.

    python3 ci/tvm_env.py run legacy python benchmarks/results/joint-move/basins.py LOGS --network NET --tasks T

bI=MS(N): group I of K's records, its fastest state MS ms, N records that are points of
its space; [bI:D]: 2K's or 5K's best is a point of group I's space, D coordinates from its origin.
"""
import argparse, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from tvm.auto_scheduler.droplet_log import costs_of, read_log
from tvm.auto_scheduler.droplet_space import StateSpace
from benchmarks.ansor_states import register_tasks

def ms(r): return statistics.fmean(costs_of(r[1])) * 1e3

p = argparse.ArgumentParser()
p.add_argument("logs", type=Path); p.add_argument("--network", default="resnet18")
p.add_argument("--tasks", type=int, default=8); p.add_argument("--k", type=int, default=16)
a = p.parse_args()
tasks = register_tasks(a.network)
long_run = read_log(str(a.logs / "ansor.json"))
n = a.tasks * a.k
keys = list(dict.fromkeys(r[0].task.workload_key for r in long_run[:n]))
for number, key in enumerate(keys, 1):
    task, _ = tasks[key]
    def succ(recs):
        return sorted((r for r in recs if r[0].task.workload_key == key and costs_of(r[1])), key=ms)
    k_recs, k2, k5 = succ(long_run[:n]), succ(long_run[:2 * n]), succ(long_run)
    basins = []  # (space, origin record, members)
    for r in k_recs:
        for b in basins:
            if b[0].point_of(r[0].state) is not None:
                b[2].append(r); break
        else:
            try:
                basins.append([StateSpace(task, r[0].state), r, [r]])
            except Exception as e:
                print("space error", e); continue
    def where(rec):
        hits = []
        for i, b in enumerate(basins):
            pt = b[0].point_of(rec[0].state)
            if pt is not None:
                hits.append(f"b{i}:{sum(x != y for x, y in zip(b[0].origin, pt))}")
        return ",".join(hits) or "none"
    desc = " ".join(f"b{i}={ms(b[1]):.3f}({len(b[2])})" for i, b in enumerate(basins))
    print(f"task {number}: K {ms(k_recs[0]):.3f} 2K {ms(k2[0]):.3f} [{where(k2[0])}] 5K {ms(k5[0]):.3f} [{where(k5[0])}] | {desc}", flush=True)
