"""Post-optimization with and without compute locations as dimensions, side by side:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-compute-location/compute_location.py \
        NETWORK BUDGET OUT LOGS...

Each LOGS is a `networks.py --keep-logs` folder of NETWORK.  Per folder, two copies of N's
database are post-optimized as networks.py's ms-N+droplet-by-time-BUDGET is (every task, the
library's order, BUDGET measurements, at most 32 per task): one with the library's TraceSpace
(`locations`), one with its SampleComputeLocation dimensions removed (`no-locations`, the space
before they were added), alternating which goes first; N, both copies and the folder's 5N are then
compiled 3 times each and timed in 7 interleaved rounds (see ``benchmarks/ms_side_by_side.py``,
which this script used inline until session 45; the outputs here are of that version, whose
copies had no ``-0`` suffix).  Both copies are post-optimized in one pass (`first_pass_trials=0`),
as the library did then.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ms_side_by_side import compare, library_order  # noqa: E402
from sketches import without_locations  # noqa: E402

NET, BUDGET, OUT, LOGS = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), [Path(p) for p in sys.argv[4:]]


def no_locations(net, database, **measure):
    with without_locations():
        return library_order(net, database, budget=BUDGET, first_pass_trials=0, **measure)


compare(NET, OUT, LOGS, {
    "locations": lambda net, database, **measure: library_order(
        net, database, budget=BUDGET, first_pass_trials=0, **measure),
    "no-locations": no_locations,
})
