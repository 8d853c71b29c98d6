"""Which other workloads' schedules a search takes over first: database order or throughput.

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-transfer-order/transfer_order.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis (issue 13, cause 4): a search takes over at most 8 schedules of other workloads,
every workload's fastest before any second (``transfer.take_over``), the workloads in the
database's order (``Journal.related``).  In a network the 8 run out before the compatible
workloads do (ResNet-18: 8 taken over in most first-pass searches), so the order decides which
workloads give schedules.  `throughput`: the workloads ordered by their fastest record's
throughput (the workload's FLOPs over its run time), so that the best-scheduled kernels of the
network (those post-optimized already, the well-tuned ones) come first.  `library`: the
library's database order.  VARIANTS: comma-separated, the first the reference.  See
``benchmarks/ms_side_by_side.py``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import library, main, patched, within  # noqa: E402
from tvm.s_tir.analysis import estimate_tir_flops  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization.journal import Journal  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization.workloads import mean_run_secs  # noqa: E402
from tvm.s_tir.meta_schedule.utils import shash2hex  # noqa: E402


def throughput_first(related):
    """``Journal.related`` with the workloads by their fastest record's FLOPs per second."""
    flops = {}

    def throughput(records):
        mod = records[0].workload.mod
        key = shash2hex(mod)
        if key not in flops:
            flops[key] = float(estimate_tir_flops(mod))
        return flops[key] / mean_run_secs(records[0])

    return lambda journal: sorted(related(journal), key=throughput, reverse=True)


main(lambda budget: {
    "library": library(budget),
    "throughput": within(lambda: patched(Journal, "related", throughput_first), budget),
})
