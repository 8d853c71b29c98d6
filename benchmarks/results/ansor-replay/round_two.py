"""The second round of each task's search of 32 (offline): after the start and the states taken
over, the neighbours of the best of them; how many single-coordinate moves it measured against
the valid radius-1 axis moves, and where in its order the best neighbour came
(`round-two-transfer-replays.txt`, on the seven `today` logs of the transfer replays):

    python3 ci/tvm_env.py run legacy python benchmarks/results/ansor-replay/round_two.py \
        OUT1/ansor-K+droplet-today.json ... --network mobilenet_v2 --tasks 12

A task whose second-round centre it cannot tell (the first round ends at the first record that is
neither the start nor a state of another task) shows 0 axis moves.
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
from tvm.auto_scheduler.droplet_space import StateSpace
from benchmarks.ansor_states import register_tasks
sys.path.insert(0, str(Path(__file__).resolve().parent))
from transfer_sources import ms, replay_arguments, searches, sources_in

a = replay_arguments(many=True)
tasks = register_tasks(a.network)
for log in a.logs:
    recs, n, order = searches(log, a.tasks, a.k)
    num = {k: i + 1 for i, k in enumerate(order)}
    out = []
    for key in order:
        task, _ = tasks[key]
        pos = [i for i in range(n, len(recs)) if recs[i][0].task.workload_key == key]
        start = recs[pos[0]]
        space0 = StateSpace(task, start[0].state)
        others = sources_in(space0, recs, key, pos[0], n, num)
        first = [pos[0]]
        for i in pos[1:]:
            if space0.point_of(recs[i][0].state) in others and len(first) < 9: first.append(i)
            else: break
        centre = min((recs[i] for i in first), key=ms)
        second = [recs[i] for i in pos[len(first):]]
        if not second: continue
        space = StateSpace(task, centre[0].state)
        c = ms(centre)
        kinds = []
        for r in second:
            pt = space.point_of(r[0].state)
            ch = [j for j, (x, o) in enumerate(zip(pt, space.origin)) if x != o] if pt else None
            kinds.append("axis" if ch and len(ch) == 1 else ("pair" if ch and len(ch) == 2 else "other"))
        best_i = min(range(len(second)), key=lambda i: ms(second[i]))
        gains = [c / ms(r) for r in second]
        valid_axis = sum(1 for j, prm in enumerate(space.parameters) for s in (1, -1)
                         if 0 <= space.origin[j] + s < len(prm.values)
                         and space.is_valid(tuple(space.origin[k] + (s if k == j else 0) for k in range(len(space.origin)))))
        out.append((len(second), best_i + 1, gains[best_i], kinds.count("axis"), kinds.count("pair"), valid_axis,
                     [i + 1 for i, g in enumerate(gains) if g > 1.03]))
    print(Path(log).parent.name)
    for t, (L, bi, g, ax, pr, va, wins) in enumerate(out, 1):
        print(f"  task {t}: round 2 measured {L} ({ax} axis of {va} valid radius-1, {pr} pairs); best at {bi}/{L}, {g:.2f}x over its centre; >3% faster at positions {wins}")
