"""Fewer schedules taken over in a first round of 9: the rest of it neighbours of the start.

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-transfer-count/transfer_count.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis (issue 13, cause 4): the library's first pass gives each workload 9 measurements, its
start and up to 8 schedules of other workloads taken over (``transfer_limit`` of the workload's
whole budget).  Session 45's emulated two passes took over 2 (a quarter of 9) and measured 6
neighbours of the start, and won where the library's first round did not (MobileNetV2 seeds 11
and 9: 1.098x and 1.079x over one pass, against the library's 1.054x and 0.921x).  `take-K`: at
most K schedules taken over per search, the rest of the round the search's own moves.  `library`:
up to 8.  `more-12`, the other way: up to 12 taken over, in a first round of 13.  VARIANTS:
comma-separated, the first the reference.  See ``benchmarks/ms_side_by_side.py``.
"""
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import library, main, patched, within  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import post_optimizer, search  # noqa: E402


def at_most(count: int):
    """A wrap of ``transfer_limit`` (the name ``WorkloadSearch`` calls) bounded by ``count``."""
    return lambda limit: lambda budget: min(count, limit(budget))


@contextlib.contextmanager
def more(count: int):
    """Up to ``count`` taken over, in a first pass of ``1 + count`` per workload (the name
    ``post_optimize`` reads for its default first pass)."""
    with patched(search, "transfer_limit", lambda limit: lambda budget: count):
        with patched(post_optimizer, "TRANSFER_SAMPLE", lambda sample: count):
            yield


main(lambda budget: {
    "library": library(budget),
    **{
        f"take-{count}": within(lambda count=count: patched(search, "transfer_limit", at_most(count)), budget)
        for count in (2, 4)
    },
    "more-12": within(lambda: more(12), budget),
})
