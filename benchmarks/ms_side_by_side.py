"""Post-optimization variants side by side on kept N databases (MetaSchedule, modern line).

Used by the A/B scripts under ``results/``: each LOGS is a ``networks.py --keep-logs`` folder of
NETWORK whose ``ms/`` holds 5N's database (or N's, with ``--skip-5n``); its first records, those
its post-optimized copies start with, are N's.  Per folder, N's database is cut out, one copy per
variant and draw is post-optimized (the order of the variants alternates from draw to draw and
folder to folder), then N, every copy and the folder's 5N are compiled ``compiles`` times each and
timed in ``rounds`` interleaved rounds (each round, the median of a network's instances).  Prints
per folder each copy's measurements and seconds, the end-to-end ms, every variant's paired ratio
over the first variant, and per task the speedup over its start in each copy.
"""
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, ContextManager, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "results" / "networks-ms-compute-location"))
from sketches import n_database  # noqa: E402
from benchmarks import network_modern as nm  # noqa: E402
from benchmarks.networks import paired_ratio  # noqa: E402
# patched: imported for the A/B scripts, which take it from here with library, within, main.
from benchmarks.patching import patched  # noqa: E402,F401
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import default_builder  # noqa: E402

Variant = Callable[..., List]
"""Post-optimizes ``database`` of ``net`` with ``builder`` and ``runner`` (keyword arguments) and
returns one result per task (``None`` for a task a pass did not reach)."""


def library_order(net, database, builder, runner, *, budget: int, cap: int = 32, **options):
    """networks.py's ms-N+droplet-by-time-BUDGET: every task, the library's order, at most
    ``cap`` measurements per task, ``budget`` in all."""
    return net.post_optimize(
        database, list(range(len(net.tasks))), cap, builder, runner,
        task_weights=[task.weight for task in net.tasks], max_trials_global=budget, **options,
    )


def library(budget: int) -> Variant:
    """The library's order with ``budget`` measurements in all (see :func:`library_order`)."""
    return lambda net, database, **measure: library_order(net, database, budget=budget, **measure)


def within(context: Callable[[], ContextManager], budget: int, cap: int = 32) -> Variant:
    """The library's order with ``budget`` (at most ``cap`` per task), run inside ``context()``
    (e.g. :func:`patched`)."""

    def variant(net, database, **measure):
        with context():
            return library_order(net, database, budget=budget, cap=cap, **measure)

    return variant


def main(variants: Callable[[int], Dict[str, Variant]]) -> None:
    """The A/B scripts' command line, ``NETWORK BUDGET DRAWS OUT VARIANTS LOGS...``: VARIANTS
    are comma-separated names of ``variants(BUDGET)``, the first the reference."""
    network, budget, draws, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    by_name = variants(budget)
    chosen = {name: by_name[name] for name in sys.argv[5].split(",")}
    compare(network, out, [Path(path) for path in sys.argv[6:]], chosen, draws=draws)


def compare(network: str, out: Path, logs: Sequence[Path], variants: Dict[str, Variant],
            draws: int = 1, compiles: int = 3, rounds: int = 7) -> None:
    """Run ``variants`` (name -> post-optimization of a copy of N's database) ``draws`` times on
    each of ``logs`` and time the networks side by side; the first variant is the reference."""
    out.mkdir(parents=True, exist_ok=True)
    net = nm.full_network(network, out)
    net.args.compiles = compiles
    builder = default_builder()
    runner = ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=50)
    )
    names = list(variants)
    for position, folder in enumerate(logs):
        base = out / f"{position}-{folder.parent.name}"
        if base.exists():
            shutil.rmtree(base)
        print(f"{folder}: N's database has {n_database(folder, base / 'n')} records", flush=True)
        copies, results, seconds = [], {}, {}
        for draw in range(draws):
            order = names if (position + draw) % 2 == 0 else names[::-1]
            for name in order:
                copy = f"{name}-{draw}"
                shutil.copytree(base / "n", base / copy)
                database = ms.database.JSONDatabase(work_dir=str(base / copy), allow_missing=False)
                started = time.time()
                results[copy] = variants[name](net, database, builder=builder, runner=runner)
                seconds[copy] = time.time() - started
                measured = sum(result.measured for result in results[copy] if result is not None)
                print(f"  {copy}: {measured} measurements in {seconds[copy]:.0f} s", flush=True)
                copies.append(copy)
        compiled = {name: net.compile(base / name) for name in ["n"] + sorted(copies)}
        if nm.count_lines(folder / "ms" / nm.RECORDS) > nm.count_lines(base / "n" / nm.RECORDS):
            compiled["5n"] = net.compile(folder / "ms")  # the run's 5N, as a reference
        times = {name: [] for name in compiled}
        for _ in range(rounds):
            for name, network_ in compiled.items():
                times[name].append(network_.time_once() * 1e3)
        for name in compiled:
            rounds_ms = ", ".join(f"{value:.2f}" for value in times[name])
            print(f"  {name}: {statistics.median(times[name]):.2f} ms (rounds {rounds_ms})")
        for draw in range(draws):
            reference = f"{names[0]}-{draw}"
            for name in names[1:]:
                copy = f"{name}-{draw}"
                print(f"  draw {draw}: {name} over {names[0]}: "
                      f"{paired_ratio(times[reference], times[copy]):.3f}x (paired per round); time "
                      f"{seconds[copy] / seconds[reference]:.2f}x", flush=True)
            if "5n" in times:
                for name in names:
                    versus = paired_ratio(times["5n"], times[f"{name}-{draw}"])
                    print(f"  draw {draw}: {name}: {versus:.3f}x of 5N's speed (paired per round)")
        for task in range(len(net.tasks)):
            line = [(copy, results[copy][task]) for copy in sorted(copies)]
            if any(result is not None and result.measured for _, result in line):
                print(f"    task {task + 1}: " + ", ".join(
                    f"{copy} {result.speedup:.2f}x ({result.trials})" if result is not None
                    else f"{copy} -" for copy, result in line), flush=True)
