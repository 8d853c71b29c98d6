"""Post-optimization in one pass against two passes, the first only other workloads' schedules:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-two-pass/two_pass.py \
        NETWORK BUDGET DRAWS OUT VARIANTS LOGS...

Hypothesis: the first round of a workload's search (its start and up to 8 schedules of other
workloads taken over) gives most of what its 32 measurements give, so a first pass of that round
over more tasks, then the rest of the budget on the heaviest tasks, should beat one pass of 32 per
task.  `one-pass`: networks.py's ms-N+droplet-by-time-BUDGET (the library's order, at most 32 per
task, BUDGET in all).  `two-pass`: `post_optimize` with at most 9 per task (2 taken over, a quarter of
that budget: the version session 45 ran also patched `transfer.transfer_limit` to take 8, but
`WorkloadSearch` calls the name it imported, so the patch never reached it; removed in session
47, which changed nothing) and half of BUDGET, then again with
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
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from ms_side_by_side import library, library_order, main, patched, within  # noqa: E402
from tvm.contrib.droplet_search import transfer  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import post_optimizer  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization.search import WorkloadSearch  # noqa: E402


def first_pass_bound(fraction, budget):
    """The library's first pass bounded by ``fraction`` of ``budget``."""
    return patched(post_optimizer, "FirstPass", lambda first_pass: lambda *args, max_trials: first_pass(
        *args, max_trials=max(1, round(budget * fraction))))


def with_transfer(continued):
    """``WorkloadSearch.continued`` whose second-pass search keeps transfer."""

    def continued_with_transfer(self):
        search = continued(self)
        search.transfer = self.transfer
        return search

    return continued_with_transfer


def joined(first, later):
    """One task's result over both passes."""
    if first is None or later is None or not later.measured:
        return first if first is not None else later
    return SimpleNamespace(measured=first.measured + later.measured,
                           trials=first.trials + later.trials,
                           speedup=first.before / later.after)


def two_pass(budget):
    def variant(net, database, **measure):
        firsts = library_order(net, database, budget=budget // 2, cap=1 + transfer.TRANSFER_SAMPLE,
                               first_pass_trials=0, **measure)
        left = budget - sum(result.measured for result in firsts)
        if left <= 0:
            return firsts
        laters = library_order(net, database, budget=left, cap=24, transfer=False, first_pass_trials=0,
                               **measure)
        return [joined(first, later) for first, later in zip(firsts, laters)]

    return variant


main(lambda budget: {
    "one-pass": lambda net, database, **measure: library_order(
        net, database, budget=budget, first_pass_trials=0, **measure),
    "two-pass": two_pass(budget),
    "library": library(budget),
    "half": within(lambda: first_pass_bound(1 / 2, budget), budget),
    "third": within(lambda: first_pass_bound(1 / 3, budget), budget),
    "second-transfer": within(lambda: patched(WorkloadSearch, "continued", with_transfer), budget),
})
