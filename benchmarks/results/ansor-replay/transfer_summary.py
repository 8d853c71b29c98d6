"""Side by side, per replay of `ansor_replay.py --variants A,B` (offline, no TVM):

    python3 benchmarks/results/ansor-replay/transfer_summary.py OUT [OUT ...]
    python3 benchmarks/results/ansor-replay/transfer_summary.py --a closing --b today OUT [OUT ...]

speed vs 5K of each variant (median of the rounds' ratios), A over B (median of the rounds'
paired ratios, and their range), the geometric mean over tasks of the best ms of B over A's,
the tasks more than 1% faster / slower with A, and Droplet's seconds (A / B). By default A is
`today` and B `no-transfer`.
"""
import argparse, json, statistics, math
from pathlib import Path
parser = argparse.ArgumentParser()
parser.add_argument("--a", default="today"); parser.add_argument("--b", default="no-transfer")
parser.add_argument("outs", nargs="+")
args = parser.parse_args()
ka, kb = f"ansor-K+droplet-{args.a}", f"ansor-K+droplet-{args.b}"
rows=[]
for d in args.outs:
    p=Path(d)/"replay.json"
    if not p.exists(): continue
    j=json.load(open(p)); L=j["latency_ms"]
    t=L[ka]; n=L[kb]; f=L["ansor-5K"]
    paired=statistics.median(b/a for a,b in zip(t,n))  # speed of A over B
    sv=lambda x: statistics.median(c/a for a,c in zip(x,f))
    tm=j["task_ms"]; tt=tm[ka]; tn=tm[kb]
    geo=math.exp(statistics.fmean(math.log(b/a) for a,b in zip(tt,tn)))
    wins=sum(a<b*0.99 for a,b in zip(tt,tn)); losses=sum(a>b*1.01 for a,b in zip(tt,tn))
    sec=[j["notes"][k].split(" s;")[0] for k in (ka, kb)]
    print(f"{Path(d).name}: vs 5K {args.a} {sv(t):.3f} {args.b} {sv(n):.3f}; {args.a}/{args.b} {paired:.3f} (rounds {min(b/a for a,b in zip(t,n)):.3f}-{max(b/a for a,b in zip(t,n)):.3f}); per task geo {geo:.3f}, faster/slower by >1%: {wins}/{losses}; Droplet s {sec[0]}/{sec[1]}")
    rows.append(paired)
if rows: print(f"median {args.a}/{args.b}", statistics.median(rows), "n", len(rows))
