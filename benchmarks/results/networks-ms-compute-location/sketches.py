"""Where 5N's best schedule of each workload lies, seen from N's best:

    python3 ci/tvm_env.py run modern python benchmarks/results/networks-ms-compute-location/sketches.py \
        /tmp/s44/ms-mnv2-seed11/logs-mobilenet_v2 [--without-locations]

LOGS is a `networks.py --keep-logs` folder: ms/ holds 5N's database, whose first records are N's
(those its post-optimized copies, the other folders, start with).  Per workload, slowest N best
first: N's best, 5N's and each post-optimized copy's speedup over it, and where 5N's best lies: a
point of the trace space of N's best (how many coordinates away), a schedule with the same
instructions and inputs that is no point of it (with the decisions that differ, and whether each
is a dimension), another sketch N also sampled, or a sketch N never measured.  (Until session 45 a
sketch was its instruction kinds only, so a record whose cache-write block is computed at another
loop counted as the same sketch; the outputs `sketches-mnv2-seed11-*.txt` are of that version.)  With
--without-locations, in the space as it was before compute locations were dimensions.
"""
import contextlib, re, shutil, sys, tempfile
from pathlib import Path

from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.post_optimization.programs import structural_equal
from tvm.s_tir.meta_schedule.post_optimization import trace_space
from tvm.s_tir.meta_schedule.post_optimization.trace_space import TraceSpace, _decision_value, _instructions
from tvm.s_tir.meta_schedule.post_optimization.workloads import _postprocs_for, mean_run_secs, records_by_workload

RECORDS = "database_tuning_record.json"


with_locations = trace_space.TraceSpace._dimensions_of


@contextlib.contextmanager
def without_locations():
    """TraceSpace as before compute locations were dimensions."""
    def dimensions_of(space, index, inst, *rest):
        if inst.kind.name == trace_space.SAMPLE_COMPUTE_LOCATION:
            return []
        return with_locations(space, index, inst, *rest)
    trace_space.TraceSpace._dimensions_of = dimensions_of
    try:
        yield
    finally:
        trace_space.TraceSpace._dimensions_of = with_locations


def n_database(logs: Path, into: Path) -> int:
    """Write N's database into ``into``: the records 5N's database shares with a post-optimized
    copy of N's (all of ms/ when there is no copy); returns their number."""
    lines = (logs / "ms" / RECORDS).read_text().splitlines(keepends=True)
    posts = sorted(d for d in logs.iterdir() if d.is_dir() and d.name != "ms" and (d / RECORDS).is_file())
    if posts:
        other = (posts[0] / RECORDS).read_text().splitlines(keepends=True)
        lines = lines[: next((i for i, (a, b) in enumerate(zip(lines, other)) if a != b), min(len(lines), len(other)))]
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy(logs / "ms" / "database_workload.json", into)
    (into / RECORDS).write_text("".join(lines))
    return len(lines)


def groups(folder: Path):
    return records_by_workload(ms.database.JSONDatabase(work_dir=str(folder), allow_missing=False).get_all_tuning_records())


def best(records):
    timed = [(mean_run_secs(r), r) for r in records if mean_run_secs(r) is not None]
    return min(timed, key=lambda item: item[0]) if timed else (None, None)


def sketch(trace):
    """The trace's program up to its decisions and annotation values: its instructions with their
    inputs (e.g. the loop a cache-write block is computed at), as text."""
    return tuple(
        re.sub(r"ann_val=-?\d+", "ann_val=_", re.sub(r", decision=.*\)$", ")", line))
        for line in trace.as_python(remove_postproc=True)
    )


def of_workload(grouped, workload):
    return next((records for other, records in grouped if structural_equal(other.mod, workload.mod)), [])


def differences(start, other, space) -> str:
    """The instructions whose decisions or annotation values differ, and whether each is a dimension."""
    dimensions = {dimension.instruction for dimension in space.dimensions}
    notes = []
    for index, (a, b) in enumerate(zip(_instructions(start), _instructions(other))):
        da, db = start.get_decision(a), other.get_decision(b)
        va = None if da is None else _decision_value(da)
        vb = None if db is None else _decision_value(db)
        if a.kind.name == "Annotate":
            va, vb = str(a.inputs[1]), str(b.inputs[1])
        if va != vb:
            notes.append(f"{a.kind.name}[{index}] {va}->{vb} ({'dim' if index in dimensions else 'NOT a dim'})")
    return "; ".join(notes) or "same decisions (text differs)"


def where(workload, n_group, n_best, f_best) -> str:
    """Where 5N's best ``f_best`` lies, seen from N's best."""
    space = TraceSpace(n_best.trace, workload.mod, _postprocs_for(workload.mod, n_best.target, "task"))
    point = space.point_of(f_best.trace)
    if point is not None:
        away = sum(a != b for a, b in zip(point, space.start))
        return f"in N-best's space, {away} of {len(space.dims)} coords away"
    if sketch(f_best.trace) == sketch(n_best.trace):
        return "N-best's sketch, not a point: " + differences(n_best.trace, f_best.trace, space)
    same = [(mean_run_secs(r), r) for r in n_group if sketch(r.trace) == sketch(f_best.trace) and mean_run_secs(r)]
    if not same:
        return "a sketch N never measured"
    s_secs, s_rec = min(same, key=lambda item: item[0])
    sub = TraceSpace(s_rec.trace, workload.mod, space.postprocs).point_of(f_best.trace)
    n_secs = mean_run_secs(n_best)
    return (f"another sketch N sampled ({len(same)} records, its best {n_secs / s_secs:.2f}x N-best's speed"
            + ("" if sub is None else "; 5N's best a point of its space") + ")")


def main(logs: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="sketches-n-") as n_dir:
        print(f"N's records: the first {n_database(logs, Path(n_dir))} lines")
        n_groups = groups(Path(n_dir))
    posts = {d.name: groups(d) for d in sorted(logs.iterdir()) if d.is_dir() and d.name != "ms" and (d / RECORDS).is_file()}
    rows = []
    for position, (workload, records) in enumerate(groups(logs / "ms")):
        n_group = of_workload(n_groups, workload)
        (n_secs, n_best), (f_secs, f_best) = best(n_group), best(records)
        if n_best is None or f_best is None:
            continue
        post = ", ".join(f"{name}: {n_secs / best(of_workload(grouped, workload))[0]:.2f}x" for name, grouped in posts.items())
        rows.append((n_secs, f"task {position}: N best {n_secs * 1e6:.1f} us, 5N {n_secs / f_secs:.2f}x, {post}; "
                     f"N sketches {len({sketch(r.trace) for r in n_group})}; 5N best: {where(workload, n_group, n_best, f_best)}"))
    for _, text in sorted(rows, key=lambda row: -row[0]):
        print(text)


if __name__ == "__main__":
    if "--without-locations" in sys.argv:
        with without_locations():
            main(Path(sys.argv[1]))
    else:
        main(Path(sys.argv[1]))
