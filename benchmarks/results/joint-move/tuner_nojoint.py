"""benchmarks/tuner_replay.py with the engine's joint move turned off (run after applying joint-move.diff)."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from tvm.contrib.droplet_search.search import DropletSearch
DropletSearch._joint = lambda self, accepted, steps: None
from benchmarks import tuner_replay
sys.argv[0] = "benchmarks/tuner_replay.py"
sys.exit(tuner_replay.main())
