"""How many configurations of each recorded landscape are within 3% of its best (offline):

    python3 benchmarks/results/landscapes/near_best.py

the configurations whose mean recorded cost reaches 97% of the lowest (what `tuner_replay.py`'s
"reach 97%" asks for), and the random draws without replacement that find one, on average.
"""
import json
import statistics
from pathlib import Path

for path in sorted(Path(__file__).resolve().parent.glob("*.json")):
    landscape = json.loads(path.read_text())
    means = [statistics.fmean(costs) for costs in landscape["costs"].values() if costs]
    best = min(means)
    near = sum(1 for mean in means if best / mean >= 0.97)
    print(
        f"{path.stem}: {landscape['configs']} configs, {len(means)} recorded, {near} within 3% "
        f"of the best ({near / len(means):.2%}); random draws to find one: "
        f"{(len(means) + 1) / (near + 1):.0f}"
    )
