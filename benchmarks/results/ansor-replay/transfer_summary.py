"""Side by side, per replay of `ansor_replay.py --variants today,no-transfer` (offline, no TVM):

    python3 benchmarks/results/ansor-replay/transfer_summary.py OUT [OUT ...]

speed vs 5K of each variant (median of the rounds' ratios), today over no-transfer (median of
the rounds' paired ratios, and their range), the geometric mean over tasks of the best ms without
over with, the tasks more than 1% faster / slower with, and Droplet's seconds (with / without).
"""
import json, statistics, sys, math
from pathlib import Path
rows=[]
for d in sys.argv[1:]:
    p=Path(d)/"replay.json"
    if not p.exists(): continue
    j=json.load(open(p)); L=j["latency_ms"]
    t=L["ansor-K+droplet-today"]; n=L["ansor-K+droplet-no-transfer"]; f=L["ansor-5K"]
    paired=statistics.median(b/a for a,b in zip(t,n))  # speed today over no-transfer
    sv=lambda x: statistics.median(c/a for a,c in zip(x,f))
    tm=j["task_ms"]; tt=tm["ansor-K+droplet-today"]; tn=tm["ansor-K+droplet-no-transfer"]
    geo=math.exp(statistics.fmean(math.log(b/a) for a,b in zip(tt,tn)))
    wins=sum(a<b*0.99 for a,b in zip(tt,tn)); losses=sum(a>b*1.01 for a,b in zip(tt,tn))
    sec=[j["notes"][k].split(" s;")[0] for k in ("ansor-K+droplet-today","ansor-K+droplet-no-transfer")]
    print(f"{Path(d).name}: vs 5K today {sv(t):.3f} no-transfer {sv(n):.3f}; today/no-transfer {paired:.3f} (rounds {min(b/a for a,b in zip(t,n)):.3f}-{max(b/a for a,b in zip(t,n)):.3f}); per task geo {geo:.3f}, faster/slower by >1%: {wins}/{losses}; Droplet s {sec[0]}/{sec[1]}")
    rows.append(paired)
if rows: print("median today/no-transfer", statistics.median(rows), "n", len(rows))
