"""Per task in search order: where the states its first batch took over came from (task, K or
Droplet record), how far its best lies from its start and from the nearest state taken over, and
which later tasks' final bests it never measured (offline; `transfer-sources-mnv2-seed11.txt`)."""
import argparse, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from tvm.auto_scheduler.droplet_log import costs_of, read_log, steps_of
from tvm.auto_scheduler.droplet_space import StateSpace
from benchmarks.ansor_states import fastest, register_tasks

def ms(r): return statistics.fmean(costs_of(r[1])) * 1e3 if costs_of(r[1]) else float("inf")


def replay_arguments(many: bool = False) -> argparse.Namespace:
    """The command line: a replay's log (``many``: one or more), ``--network``, ``--tasks``, ``--k``."""
    p = argparse.ArgumentParser()
    p.add_argument("logs" if many else "log", type=Path, nargs="+" if many else None)
    p.add_argument("--network", default="resnet18")
    p.add_argument("--tasks", type=int, default=8); p.add_argument("--k", type=int, default=16)
    return p.parse_args()


def searches(log: Path, tasks: int, k: int):
    """A replay log's records, the K part's length, and the tasks in the order Droplet searched them."""
    recs = read_log(str(log))
    n = tasks * k
    return recs, n, list(dict.fromkeys(r[0].task.workload_key for r in recs[n:]))


def read_replay():
    """The command line's replay log: the network's tasks, then what :func:`searches` gives."""
    a = replay_arguments()
    return (register_tasks(a.network),) + searches(a.log, a.tasks, a.k)


def sources_in(space, recs, key, first, n, num):
    """Every record of another task before line ``first`` whose state ``space`` takes over,
    by point: (its task's search number, "K" or "D" for a K or a Droplet record, its ms)."""
    src = {}
    for j, r in enumerate(recs[:first]):
        k = r[0].task.workload_key
        if k == key or not costs_of(r[1]): continue
        pt = space.point_like(steps_of(r[0]))
        if pt is not None:
            src.setdefault(pt, []).append((num.get(k, 0), "K" if j < n else "D", ms(r)))
    return src


def main():
    tasks, recs, n, order = read_replay()
    num = {k: i + 1 for i, k in enumerate(order)}
    final_best = {key: fastest(recs, key) for key in order}
    for key in order:
        task, _ = tasks[key]
        pos = [i for i in range(n, len(recs)) if recs[i][0].task.workload_key == key]
        first = pos[0]
        start = recs[first]
        space = StateSpace(task, start[0].state)
        src = sources_in(space, recs, key, first, n, num)
        s_ms = ms(start)
        mine = [recs[i] for i in pos]
        pts = [space.point_of(r[0].state) for r in mine]
        trans = []
        for r, pt in zip(mine[1:10], pts[1:10]):
            s = src.get(pt)
            if s:
                trans.append((ms(r), s[0]))
        best_i = min(range(len(mine)), key=lambda i: ms(mine[i]))
        bpt = pts[best_i]
        # nearest transferred or start
        def dist(x, y): return sum(u != v for u, v in zip(x, y)) if x is not None and y is not None else 99
        tr_pts = [pt for pt in pts[1:10] if pt in src]
        dstart = dist(bpt, space.origin)
        dtr = min((dist(bpt, t) for t in tr_pts), default=99)
        # later tasks' final bests mapped here
        later = []
        for k2 in order[num[key]:]:
            pt = space.point_like(steps_of(final_best[k2][0]))
            if pt is not None and space.is_valid(pt) and pt not in pts:
                later.append(num[k2])
        print(f"task {num[key]}: start {s_ms:.4f} best {ms(mine[best_i]):.4f} ({s_ms/ms(mine[best_i]):.2f}x), best is {dstart} from start, {dtr} from nearest taken over; "
              f"taken over {len(trans)}: " + ", ".join(f"{s_ms/c:.2f}x from t{t}{kd}" for c, (t, kd, _) in sorted(trans)[:8]) +
              f" | later tasks' final bests new here: {later}")


if __name__ == "__main__":
    main()
