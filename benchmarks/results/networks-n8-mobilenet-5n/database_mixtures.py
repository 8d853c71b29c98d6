"""Which post-optimized task changes MobileNetV2's time? Networks compiled from mixtures of two databases:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-n8-mobilenet-5n/database_mixtures.py \
        DB_256 DB_384 /tmp/s43/mix

BASE's records for every workload, then, one workload at a time, OTHER's records of that workload
instead (and OTHER's everywhere); each network compiled once and timed in 5 interleaved rounds.
Usage: database_mixtures.py BASE_DB OTHER_DB OUT
"""
import json, shutil, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks import network_modern as nm  # noqa: E402

BASE, OTHER, OUT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
OUT.mkdir(parents=True, exist_ok=True)
net = nm.full_network("mobilenet_v2", OUT)
RECORDS, WORKLOADS = nm.RECORDS, "database_workload.json"
assert (BASE / WORKLOADS).read_text() == (OTHER / WORKLOADS).read_text()


def by_workload(path: Path):
    rows = {}
    for line in (path / RECORDS).read_text().splitlines():
        rows.setdefault(json.loads(line)[0], []).append(line)
    return rows


base, other = by_workload(BASE), by_workload(OTHER)
changed = [w for w in sorted(set(base) | set(other)) if base.get(w) != other.get(w)]
print("workloads with other records:", changed, flush=True)


def compiled(label: str, swap):
    work = OUT / label
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    shutil.copy(BASE / WORKLOADS, work / WORKLOADS)
    lines = []
    for w in sorted(set(base) | set(other)):
        lines += (other if w in swap else base).get(w, [])
    (work / RECORDS).write_text("\n".join(lines) + "\n")
    return net.compile(work)


variants = {"base": compiled("base", set()), "other": compiled("other", set(changed))}
for w in changed:
    variants[f"w{w}"] = compiled(f"w{w}", {w})
    print("built", w, flush=True)
times = {k: [] for k in variants}
for _ in range(5):
    for k, v in variants.items():
        times[k].append(v.time_once() * 1e3)
base_ms = statistics.median(times["base"])
for k, v in times.items():
    print(f"{k}: {statistics.median(v):.2f} ms ({statistics.median(v) / base_ms:.3f} of base)", flush=True)
