"""The innermost tile of the last spatial split of each task's tiled stage, in the best state of
K + Droplet (D) and of 5K, read from kept logs folders of networks.py (offline, no TVM):

    python3 benchmarks/results/joint-move/innermost.py LOGS [LOGS ...]

(extent, [lengths]): the loop's extent (16, the channel block of these NCHWc layouts) and the
split's inner lengths; "full" when the innermost length is the whole extent. Then, for the tasks
where D's best is not full: how many of D's log records are full, and the fastest of them (ms).
"""
import json, sys, statistics, collections
def load(p):
    out=[]
    for line in open(p):
        d=json.loads(line); 
        if d["r"][1]!=0: continue
        out.append((d["i"][0][0], statistics.fmean(d["r"][0])*1e3, d["i"][1][1]))
    return out
def best(recs):
    b={}
    for k,ms,steps in recs:
        if k not in b or ms<b[k][0]: b[k]=(ms,steps)
    return b
def inner(steps):
    sp=[s for s in steps if s[0]=="SP" and len(s[4])==3]
    # last spatial 3-length split of the first tiled stage
    if not sp: return None
    st=sp[0][1]; sp=[s for s in sp if s[1]==st]
    s=sp[-1]; return (s[3], s[4])
tot=collections.Counter()
for d in sys.argv[1:]:
    k5=best(load(d+"/ansor.json")); kd=best(load(d+"/ansor-K+droplet.json"))
    print(d)
    for key in kd:
        a=inner(kd[key][1]); b=inner(k5[key][1]) if key in k5 else None
        print(f"  D {kd[key][0]:.3f} {a}  5K {k5[key][0]:.3f} {b}")
        if a and b:
            tot["D_full"]+= a[1][-1]==a[0]; tot["5K_full"]+= b[1][-1]==b[0]; tot["n"]+=1
            tot["D16"]+= a[1][-1]%16==0; tot["5K16"]+= b[1][-1]%16==0
print(tot)
print("---- D records with full-block innermost, tasks where D best is not full")
for d in sys.argv[1:]:
    k5=best(load(d+"/ansor.json")); recs=load(d+"/ansor-K+droplet.json"); kd=best(recs)
    for key in kd:
        a=inner(kd[key][1])
        if not a or a[1][-1]==a[0]: continue
        full=[ms for k,ms,s in recs if k==key and (lambda x: x and x[1][-1]==x[0])(inner(s))]
        n=sum(1 for k,ms,s in recs if k==key)
        print(f"{d[-20:]} D {kd[key][0]:.3f} {a[1]} 5K {k5[key][0]:.3f}  full-inner recs {len(full)}/{n} best {min(full) if full else None}")
