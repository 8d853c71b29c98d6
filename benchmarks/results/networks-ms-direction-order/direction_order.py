"""A radius walked up on every axis first, then down: a cut round covers every axis.

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-direction-order/direction_order.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis (issue 13, cause 1): a search's round is one radius-1 neighbourhood, 2 x dims
candidates (ResNet-18's convolutions: 16 dimensions, up to 32 moves, fewer at the box's edges),
walked axis by axis, up before down (``DirectionScores.natural``).  A second-pass search of the
library's two passes has about 23 measurements, so its one round is cut before the last axes
(the trace's later decisions) are tried at all.  `sweep`: the directions up on every axis first,
then down on every axis, so that a cut round tries each axis at least once.  `library`: axis by
axis.  VARIANTS: comma-separated, the first the reference.  See ``benchmarks/ms_side_by_side.py``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import library, main, patched, within  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import up_then_down  # noqa: E402
from tvm.contrib.droplet_search.neighbourhood import DirectionScores  # noqa: E402


if __name__ == "__main__":
    main(lambda budget: {
        "library": library(budget),
        "sweep": within(lambda: patched(DirectionScores, "__init__", up_then_down), budget),
    })
