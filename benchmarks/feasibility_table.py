"""GPU time spent on configurations that cannot run.

Runs 20-launch studies on the default search space and default simulator profile for
each sampler and seed, once with autospec's learned infeasibility and once without it
(the baseline, measured in the same run), and prints per sampler:

- launches of statically invalid configurations (launched, then rejected by the server's
  argument checks: `rejected_args`) — preflight should make this 0;
- duplicate launches (a launched configuration that resolves to an already launched
  server) — deduplication should make this 0;
- init failures per study (KV pool too small, CUDA-graph OOM, weights OOM, other launch
  failures): median and worst;
- candidates answered without a launch (rejected / skipped / duplicate), which cost
  seconds instead of a model load.

A short workload and a simulator time scale keep it quick: failure counts do not depend
on speed, and every study still launches real simulator processes through the launcher.

    python benchmarks/feasibility_table.py [--seeds 1 2 3 4 5] [--samplers tpe gp nsga2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import optuna
from _studies import run_study

from autospec.feasibility.gate import dedup_key
from autospec.launcher import LAUNCH_FAILURE_KINDS as LAUNCH_FAILURES

FAST = ["--output-len", "32"]


def tally(study: optuna.Study) -> dict:
    seen: set[str] = set()
    out = {"static_invalid": 0, "duplicates": 0, "init_failures": 0, "not_launched": 0, "launched": 0}
    for t in sorted(study.trials, key=lambda t: t.number):
        a = t.user_attrs
        if not a.get("launched"):
            if a.get("outcome") in ("rejected", "skipped", "duplicate"):
                out["not_launched"] += 1
            continue
        out["launched"] += 1
        key = dedup_key(a.get("resolved") or a.get("candidate") or {})
        if key in seen:
            out["duplicates"] += 1
        seen.add(key)
        outcome = a.get("outcome")
        if outcome == "rejected_args":
            out["static_invalid"] += 1
        elif outcome in LAUNCH_FAILURES:
            out["init_failures"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--samplers", nargs="+", default=["tpe", "gp", "nsga2"])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--time-scale", type=float, default=0.1)
    args = ap.parse_args()

    results: dict[tuple[str, bool], list[dict]] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for sampler in args.samplers:
            for learn in (True, False):
                for seed in args.seeds:
                    name = f"{sampler}-{'learn' if learn else 'nolearn'}-{seed}"
                    extra = FAST + ([] if learn else ["--no-learn"])
                    study, wall = run_study(
                        Path(tmp),
                        name,
                        trials=args.trials,
                        seed=seed,
                        sampler=sampler,
                        extra=extra,
                        time_scale=args.time_scale,
                        load_seconds=0.2,
                    )
                    row = tally(study)
                    row["wall"] = wall
                    results.setdefault((sampler, learn), []).append(row)
                    print(f"{name}: {row}", flush=True)

    print(f"\n{len(args.seeds)} seeds x {args.trials} launched trials per study; total {time.monotonic() - t0:.0f}s\n")
    print(
        "| sampler | learned infeasibility | static-invalid launches | duplicate launches "
        "| init failures median (worst) | answered without launch (median) |"
    )
    print("|---|---|---|---|---|---|")
    for (sampler, learn), rows in results.items():
        fails = [r["init_failures"] for r in rows]
        print(
            f"| {sampler} | {'on' if learn else 'off (baseline)'} | {sum(r['static_invalid'] for r in rows)} | "
            f"{sum(r['duplicates'] for r in rows)} | {statistics.median(fails):g} ({max(fails)}) | "
            f"{statistics.median(r['not_launched'] for r in rows):g} |"
        )


if __name__ == "__main__":
    main()
