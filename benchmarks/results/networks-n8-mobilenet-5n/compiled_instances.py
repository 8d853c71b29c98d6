"""The same tuning databases compiled several times: how much do compiled instances differ?

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-n8-mobilenet-5n/compiled_instances.py \
        mobilenet_v2 4 /tmp/s43/inst DB_256 DB_384

Each database (a folder of MetaSchedule JSON records, here the two post-optimized databases of
the seed-9 run, kept with --keep-logs) is applied to NETWORK and compiled COPIES times, as
networks.py compiles a method's network; every instance is then timed in 7 interleaved rounds
(networks.py's timer) and the median of each printed.  Usage: compiled_instances.py NETWORK COPIES OUT DB...
"""
import statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks import network_modern as nm  # noqa: E402

NET, COPIES, OUT, DBS = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
OUT.mkdir(parents=True, exist_ok=True)
net = nm.full_network(NET, OUT)
instances = {}
for copy in range(COPIES):
    for db in DBS:
        instances[(Path(db).name, copy)] = net.compile(Path(db))
        print("compiled", db, copy, flush=True)
times = {key: [] for key in instances}
for _ in range(7):
    for key, compiled in instances.items():
        times[key].append(compiled.time_once() * 1e3)
for db in DBS:
    name = Path(db).name
    medians = [statistics.median(times[(name, copy)]) for copy in range(COPIES)]
    print(f"{name}: instances {', '.join(f'{m:.2f}' for m in medians)} ms; spread {max(medians) / min(medians):.3f}", flush=True)
