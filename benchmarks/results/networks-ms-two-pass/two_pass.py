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
in one call; its first pass bounded by half of BUDGET until session 46, a third since).  `half`,
`third`: the library's two passes with the first pass bounded by that part of BUDGET (session 46
ran `library,third,...` when the library's bound was half).  `second-transfer`: the library's two
passes with transfer in the second pass too (session 46: a continued search also takes over the
other workloads' fastest schedules it has not measured, those the first pass and the heavier
tasks' second searches found).  VARIANTS: comma-separated, the first the reference (session 45
ran `one-pass,two-pass` before the library had the passes, then `one-pass,library`; session 46
`library,third,second-transfer` and `third,library`).  See
``benchmarks/ms_side_by_side.py``.
"""
import contextlib
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import compare, library_order  # noqa: E402
from tvm.contrib.droplet_search import transfer  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import post_optimizer  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization.search import WorkloadSearch  # noqa: E402

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


@contextlib.contextmanager
def first_pass_bound(fraction):
    """The library's first pass bounded by ``fraction`` of BUDGET."""
    first_pass = post_optimizer.FirstPass
    post_optimizer.FirstPass = lambda *args, max_trials: first_pass(
        *args, max_trials=max(1, round(BUDGET * fraction)))
    try:
        yield
    finally:
        post_optimizer.FirstPass = first_pass


def bounded(fraction):
    def variant(net, database, **measure):
        with first_pass_bound(fraction):
            return library_order(net, database, budget=BUDGET, **measure)
    return variant


@contextlib.contextmanager
def second_pass_transfer():
    """The library's second-pass searches (``WorkloadSearch.continued``) with transfer."""
    continued = WorkloadSearch.continued

    def with_transfer(self):
        search = continued(self)
        search.transfer = self.transfer
        return search

    WorkloadSearch.continued = with_transfer
    try:
        yield
    finally:
        WorkloadSearch.continued = continued


def second_transfer(net, database, **measure):
    with second_pass_transfer():
        return library_order(net, database, budget=BUDGET, **measure)


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
    "half": bounded(1 / 2),
    "third": bounded(1 / 3),
    "second-transfer": second_transfer,
}
compare(NET, OUT, LOGS, {name: VARIANTS_BY_NAME[name] for name in VARIANTS}, draws=DRAWS)
