"""The transform steps in which each task's best state of 5K differs from K's best (a JSON log, no TVM).

    python3 benchmarks/results/joint-move/diffsteps.py LOGS/ansor.json TASKS
"""
import json, sys, statistics
from collections import defaultdict, Counter
path, ntasks, k = sys.argv[1], int(sys.argv[2]), 16
lines = [json.loads(l) for l in open(path)]
def cost(r):
    res = r["r"]
    if res[1] != 0: return None
    return statistics.fmean(res[0])
def key(r): return r["i"][0][0]
def steps(r): return r["i"][1][1]
n = ntasks * k
order = list(dict.fromkeys(key(r) for r in lines[:n]))
kinds = Counter()
for t, wk in enumerate(order, 1):
    def best(rs):
        c = [r for r in rs if key(r) == wk and cost(r) is not None]
        return min(c, key=cost)
    a, b = best(lines[:n]), best(lines)
    sa, sb = steps(a), steps(b)
    if [s[0] for s in sa] != [s[0] for s in sb]:
        print(f"task {t}: {cost(a)*1e3:.3f} -> {cost(b)*1e3:.3f}: other sketch"); continue
    diffs = []
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x != y:
            diffs.append(f"{i}:{x[0]} {x[1:]}->{y[1:]}" if x[0] not in ("SP",) else f"{i}:SP {x[4]}->{y[4]}")
            kinds[x[0]] += 1
    print(f"task {t}: {cost(a)*1e3:.3f} -> {cost(b)*1e3:.3f}: " + "; ".join(diffs))
print(kinds)
