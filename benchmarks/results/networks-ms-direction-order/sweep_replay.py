"""The sweep order of ``direction_order.py`` on AutoTVM's recorded landscapes (section 5).

    TVM_NUM_THREADS=1 python3 ci/tvm_env.py run legacy python \
        benchmarks/results/networks-ms-direction-order/sweep_replay.py TUNER_REPLAY_ARGUMENTS...

Runs ``tuner_replay.py`` with the given arguments twice in one process: with the library's
direction order (axis by axis, up before down), then with every axis up first, then every axis
down (``DirectionScores.natural`` re-sorted as in ``direction_order.py``).  The replays read
recorded costs, so the two see the same costs seed by seed.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuner_replay  # noqa: E402
from benchmarks.patching import patched  # noqa: E402
from sweep import up_then_down  # noqa: E402
from tvm.contrib.droplet_search.neighbourhood import DirectionScores  # noqa: E402

print("== library: axis by axis, up before down", flush=True)
tuner_replay.main()
with patched(DirectionScores, "__init__", up_then_down):
    print("\n== sweep: every axis up, then every axis down", flush=True)
    tuner_replay.main()
