"""benchmarks/ansor_replay.py with one more variant: ``nojoint``, the engine without the joint move."""
import contextlib, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from benchmarks import ansor_replay
from tvm.contrib.droplet_search.search import DropletSearch

ansor_replay.VARIANTS = ("today", "no-structure", "nojoint")
original = ansor_replay.space_variant

@contextlib.contextmanager
def space_variant(name):
    if name != "nojoint":
        with original(name):
            yield
        return
    saved = DropletSearch._joint
    DropletSearch._joint = lambda self, accepted, steps: None
    try:
        yield
    finally:
        DropletSearch._joint = saved

ansor_replay.space_variant = space_variant
sys.argv[0] = "benchmarks/ansor_replay.py"
sys.exit(ansor_replay.main())
