"""Post-optimization with and without compute locations as dimensions, side by side:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-compute-location/compute_location.py \
        NETWORK BUDGET OUT LOGS...

Each LOGS is a `networks.py --keep-logs` folder of NETWORK: `ms/` holds 5N's database (or N's,
with --skip-5n), whose first records, those its post-optimized copies start with, are N's.  Per
folder, N's database is cut out and two copies are post-optimized as networks.py's
ms-N+droplet-by-time-BUDGET is (every task, the library's order, BUDGET measurements, at most 32
per task): one with the library's TraceSpace, one with its SampleComputeLocation dimensions
removed (the space before they were added), alternating which goes first.  N and both networks
are then compiled 3 times each and timed in 7 interleaved rounds (each round, the median of a
network's 3 instances), with the folder's 5N when it has one.  Prints per folder the seconds, the end-to-end ms, the paired ratios and
each task's speedup over its start in both.
"""
import contextlib, shutil, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from sketches import n_database, without_locations  # noqa: E402
from benchmarks import network_modern as nm  # noqa: E402
from benchmarks.networks import paired_ratio  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.post_optimization import default_builder  # noqa: E402

NET, BUDGET, OUT, LOGS = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), [Path(p) for p in sys.argv[4:]]
OUT.mkdir(parents=True, exist_ok=True)
net = nm.full_network(NET, OUT)
net.args.compiles = 3
builder = default_builder()
runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=50))
weights = [task.weight for task in net.tasks]
for position, logs in enumerate(LOGS):
    base = OUT / f"{position}-{logs.parent.name}"
    if base.exists():
        shutil.rmtree(base)
    print(f"{logs}: N's database has {n_database(logs, base / 'n')} records", flush=True)
    variants = ["locations", "no-locations"] if position % 2 == 0 else ["no-locations", "locations"]
    results, seconds = {}, {}
    for variant in variants:
        folder = base / variant
        shutil.copytree(base / "n", folder)
        database = ms.database.JSONDatabase(work_dir=str(folder), allow_missing=False)
        started = time.time()
        with without_locations() if variant == "no-locations" else contextlib.nullcontext():
            results[variant] = net.post_optimize(
                database, list(range(len(net.tasks))), 32, builder, runner,
                task_weights=weights, max_trials_global=BUDGET,
            )
        seconds[variant] = time.time() - started
        measured = sum(result.measured for result in results[variant])
        print(f"  {variant}: {measured} measurements in {seconds[variant]:.0f} s", flush=True)
    compiled = {name: net.compile(base / name) for name in ["n"] + variants}
    if nm.count_lines(logs / "ms" / nm.RECORDS) > nm.count_lines(base / "n" / nm.RECORDS):
        compiled["5n"] = net.compile(logs / "ms")  # the run's 5N, as a reference
    times = {name: [] for name in compiled}
    for _ in range(7):
        for name, network in compiled.items():
            times[name].append(network.time_once() * 1e3)
    for name in compiled:
        print(f"  {name}: {statistics.median(times[name]):.2f} ms (rounds {', '.join(f'{t:.2f}' for t in times[name])})")
    paired = paired_ratio(times["no-locations"], times["locations"])
    print(f"  locations over no-locations: {paired:.3f}x (paired per round); time "
          f"{seconds['locations'] / seconds['no-locations']:.2f}x", flush=True)
    if "5n" in times:
        for variant in variants:
            versus = paired_ratio(times["5n"], times[variant])
            print(f"  {variant}: {versus:.3f}x of 5N's speed (paired per round)", flush=True)
    for index, (new, old) in enumerate(zip(results["locations"], results["no-locations"])):
        if new.measured or old.measured:
            print(f"    task {index + 1}: locations {new.speedup:.2f}x ({new.trials}), "
                  f"no-locations {old.speedup:.2f}x ({old.trials})", flush=True)
