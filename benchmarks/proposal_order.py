"""Which configurations does a study propose, in which order? Runs the product's study
loop and trial chain with the simulated launcher and bench (`_simulated`), so two code
versions can be compared trial by trial, deterministically and in seconds.

    # the old checkout's script with its own code, then the current one, then compare
    (cd /tmp/old && PYTHONPATH=src .venv/bin/python benchmarks/proposal_order.py --out /tmp/old.json)
    .venv/bin/python benchmarks/proposal_order.py --out new.json
    .venv/bin/python benchmarks/proposal_order.py --compare /tmp/old.json new.json

Options: --seeds 1 2 3 (default), --sampler tpe, --trials 20 (launched trials), --space
default, --noise 0. The JSON holds, per seed, ``[trial number, Optuna params, outcome,
launched]`` for every trial of the study (rejected, skipped and duplicate ones too), in
trial-number order; it carries no timing, so equal code and seeds give identical files.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any


def trial_rows(study: Any) -> list[list[Any]]:
    """``[number, params, outcome, launched]`` per trial, in number order."""
    return [
        [t.number, dict(sorted(t.params.items())), t.user_attrs.get("outcome"), bool(t.user_attrs.get("launched"))]
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    ]


def run(args: argparse.Namespace) -> int:
    """Run one study per seed and write the JSON to ``args.out``."""
    import optuna
    from _simulated import run_study

    import autospec

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

    from autospec.cli.common import load_space
    from autospec.sim.profile import load_profile

    space, profile = load_space(args.space), load_profile()
    payload: dict[str, Any] = {
        "autospec": str(Path(autospec.__file__).resolve().parent),
        "space": args.space,
        "profile": profile.name,
        "sampler": args.sampler,
        "trials": args.trials,
        "noise": args.noise,
        "seeds": {},
    }
    for seed in args.seeds:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="proposal-order-") as folder:
            study = run_study(
                space,
                seed=seed,
                sampler=args.sampler,
                n_trials=args.trials,
                profile=profile,
                noise=args.noise,
                studies_dir=Path(folder),
            )
            rows = trial_rows(study)
            gpu_s = sum(float((t.user_attrs.get("seconds") or {}).get("total", 0.0)) for t in study.trials)
        payload["seeds"][str(seed)] = rows
        launched = sum(1 for r in rows if r[3])
        print(
            f"seed {seed}: {len(rows)} trials ({launched} launched) in {time.perf_counter() - t0:.2f} s; "
            f"simulated GPU time {gpu_s / 3600:.2f} h"
        )
    Path(args.out).write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out} (autospec from {payload['autospec']})")
    return 0


def leading_agreement(a: list[list[Any]], b: list[list[Any]]) -> tuple[int, tuple[Any, Any] | None]:
    """How many leading rows are equal, and the first pair that differs (None if none;
    a missing row is None)."""
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    if n == len(a) == len(b):
        return n, None
    return n, (a[n] if n < len(a) else None, b[n] if n < len(b) else None)


def compare(path_a: str, path_b: str) -> int:
    """Print, per seed, the leading agreement of two JSON files; exit 1 if any differ."""
    a, b = (json.loads(Path(p).read_text()) for p in (path_a, path_b))
    print(f"A = {path_a} ({a.get('autospec')})\nB = {path_b} ({b.get('autospec')})")
    differ = False
    for seed in sorted(set(a["seeds"]) | set(b["seeds"]), key=int):
        rows_a, rows_b = a["seeds"].get(seed), b["seeds"].get(seed)
        if rows_a is None or rows_b is None:
            print(f"seed {seed}: only in {'B' if rows_a is None else 'A'}")
            differ = True
            continue
        n, first = leading_agreement(rows_a, rows_b)
        print(f"seed {seed}: {n} leading trials agree (A has {len(rows_a)}, B has {len(rows_b)})")
        if first is not None:
            differ = True
            print(f"  first difference: A {json.dumps(first[0])}\n                    B {json.dumps(first[1])}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--sampler", default="tpe")
    ap.add_argument("--trials", type=int, default=20, help="launched trials per study (default 20)")
    ap.add_argument("--space", default="default")
    ap.add_argument("--noise", type=float, default=0.0, help="relative noise on measured values (default 0)")
    ap.add_argument("--out", help="JSON file to write")
    ap.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two files instead")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if not args.out:
        ap.error("--out is required (or use --compare A.json B.json)")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
