"""The model against the seed's hand measurements, every pair of steps values:
fit `autospec.model.SpecModel` on the launches of two `speculative_num_steps` values of
tests/sim/data/seed_speculation.csv and print its error on every other steps value, C=1
per-request speed and C=32 aggregate (bounds: 10% and 15%).

    .venv/bin/python benchmarks/seed_predictions.py

tests/model/test_seed_rows.py holds the pairs whose launches reported start-up facts and
whose predictions reach at most two steps beyond them; this prints all of them.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "model"))

from test_seed_rows import BASE, BOUNDS, OBSERVATIONS, TARGETS

from autospec.model import SpecModel


def main() -> int:
    print("| fitted on steps | " + " | ".join(f"steps {s}: C=1 / C=32" for s in OBSERVATIONS) + " | within bounds |")
    print("|---|" + "---|" * (len(OBSERVATIONS) + 1))
    for pair in itertools.combinations(sorted(OBSERVATIONS), 2):
        model = SpecModel.fit([OBSERVATIONS[s] for s in pair], TARGETS, base_flags=BASE)
        predicted = dict(zip(OBSERVATIONS, model.predict([o.flags for o in OBSERVATIONS.values()]).point))
        cells, ok = [], True
        for steps, obs in OBSERVATIONS.items():
            if steps in pair:
                cells.append("fitted")
                continue
            errors = [predicted[steps][i] / obs.value(t.metric, t.concurrency) - 1.0 for i, t in enumerate(TARGETS)]
            ok &= all(abs(e) <= BOUNDS[t.concurrency] for e, t in zip(errors, TARGETS))
            cells.append(" / ".join(f"{e:+.0%}" for e in errors))
        print(f"| {pair[0]}, {pair[1]} | " + " | ".join(cells) + f" | {'yes' if ok else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
