"""Longer or shorter second passes: the per-workload cap within the library's two passes.

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-cap/cap.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis (issue 13, cause 3): in the library's two passes (the first round of 9 on every
workload in share order, then the rest of the global budget by the shares after it), a second
pass gets at most ``trials - 9`` measurements, 23 with the per-workload cap of 32 that
``networks.py`` passes, less than one round of its neighbourhood (two moves per dimension: up
to 32 on ResNet-18's convolutions, which have 16).  On the kept copies of sessions 47-48, the
best of a second pass's first k neighbours was still growing at k = 20 (1.065x at 1, 1.21x at
8, 1.37x at 20 on ResNet-18, geometric means): more measurements on the heaviest workloads may
be worth more than a second pass on the eighth; or, the other way, shorter second passes on
more workloads.  `cap-C`: per-workload cap C (16, 24, 48 or 64) within the same global budget,
every first round still taking over up to 8 schedules (``transfer_limit`` would take a quarter
of a cap below 32); `library`: 32.  VARIANTS: comma-separated, the first the reference.  See
``benchmarks/ms_side_by_side.py``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import library, main, patched, within  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import search  # noqa: E402


def capped(cap: int, budget: int):
    """The library's order with ``budget`` in all and at most ``cap`` per workload, each first
    round taking over as many schedules as with a cap of 32."""
    as_with_32 = lambda limit: lambda _budget: limit(32)  # noqa: E731
    return within(lambda: patched(search, "transfer_limit", as_with_32), budget, cap=cap)


if __name__ == "__main__":
    main(lambda budget: {
        "library": library(budget),
        **{f"cap-{cap}": capped(cap, budget) for cap in (16, 24, 48, 64)},
    })
