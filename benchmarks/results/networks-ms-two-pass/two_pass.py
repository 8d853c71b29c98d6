"""Post-optimization in one pass against two passes, the first only other workloads' schedules:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-two-pass/two_pass.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis: the first round of a workload's search (its start and up to 8 schedules of other
workloads taken over) gives most of what its 32 measurements give, so a first pass of that round
over more tasks, then the rest of the budget on the heaviest tasks, should beat one pass of 32 per
task.  `one-pass`: networks.py's ms-N+droplet-by-time-BUDGET (the library's order, at most 32 per
task, BUDGET in all).  `two-pass`: `post_optimize` with at most 9 per task (8 taken over whatever
that budget, the library otherwise takes a quarter of it) and half of BUDGET, then again with
transfer off, at most 24 per task and the rest of BUDGET, each workload from its best record so
far (measured again), in the order of its share then.  `library`: the library's two passes
(`post_optimize`'s default `first_pass_trials` since session 45, which does what `two-pass` does
in one call).  VARIANTS: comma-separated, the first the reference (session 45 ran
`one-pass,two-pass` before the library had the passes, then `one-pass,library`).  See
``benchmarks/ms_side_by_side.py``.
"""
import contextlib
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import compare, library_order  # noqa: E402
from tvm.contrib.droplet_search import transfer  # noqa: E402

NET, BUDGET, DRAWS, OUT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
VARIANTS, LOGS = sys.argv[5].split(","), [Path(path) for path in sys.argv[6:]]


@contextlib.contextmanager
def full_transfer():
    """Take over TRANSFER_SAMPLE schedules whatever the workload's budget."""
    limit = transfer.transfer_limit
    transfer.transfer_limit = lambda budget: transfer.TRANSFER_SAMPLE
    try:
        yield
    finally:
        transfer.transfer_limit = limit


def joined(first, later):
    """One task's result over both passes."""
    if first is None or later is None or not later.measured:
        return first if first is not None else later
    return SimpleNamespace(measured=first.measured + later.measured,
                           trials=first.trials + later.trials,
                           speedup=first.before / later.after)


def two_pass(net, database, **measure):
    with full_transfer():
        firsts = library_order(net, database, budget=BUDGET // 2, cap=1 + transfer.TRANSFER_SAMPLE,
                               first_pass_trials=0, **measure)
    left = BUDGET - sum(result.measured for result in firsts)
    if left <= 0:
        return firsts
    laters = library_order(net, database, budget=left, cap=24, transfer=False, first_pass_trials=0, **measure)
    return [joined(first, later) for first, later in zip(firsts, laters)]


VARIANTS_BY_NAME = {
    "one-pass": lambda net, database, **measure: library_order(
        net, database, budget=BUDGET, first_pass_trials=0, **measure),
    "two-pass": two_pass,
    "library": lambda net, database, **measure: library_order(net, database, budget=BUDGET, **measure),
}
compare(NET, OUT, LOGS, {name: VARIANTS_BY_NAME[name] for name in VARIANTS}, draws=DRAWS)
