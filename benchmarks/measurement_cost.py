"""What precise measurement costs: the same sim study measured the old way and the new.

Runs `autospec optimize --trials 20 --sim` twice with the same seed on one profile and its
space: once with `[bench] precision = false` (the fixed request counts of before) and once
as a study runs by default (the precision loop and racing). Prints each way's wall time
and their ratio, each trial's launch and measuring seconds with the measuring share of
the launch, and how the levels stopped.

    python benchmarks/measurement_cost.py [--profile NAME] [--seed 1] [--trials 20] [--time-scale 1]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from _studies import run_study

sys.path.insert(0, str(Path(__file__).parent))
from efficiency import CASES
from optimum_gap import space_file

from autospec.report import snapshot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="seed-qwen35-122b-4x-rtxpro6000", choices=list(CASES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--load-seconds", type=float, default=2.0, help="simulated model load (the quick start's 2 s)")
    args = ap.parse_args()

    walls = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for mode in ("fixed", "precise"):
            study, wall = run_study(
                folder,
                f"cost-{mode}",
                trials=args.trials,
                seed=args.seed,
                space=space_file(CASES[args.profile].space, mode, folder),
                time_scale=args.time_scale,
                load_seconds=args.load_seconds,
                extra=["--sim-profile", args.profile],
            )
            walls[mode] = wall
            launched = [t for t in study.trials if t.user_attrs.get("launched")]
            launch = [t.user_attrs["seconds"].get("launch", 0.0) for t in launched]
            bench = [t.user_attrs["seconds"].get("bench", 0.0) for t in launched]
            stops = collections.Counter(
                f"c={c}:{level.get('stop_reason') or 'fixed'}"
                for t in launched
                for c, level in (t.user_attrs.get("bench") or {}).items()
            )
            data = snapshot(study)
            flags = collections.Counter(w.code for t in data.front for w in _warnings(data, t))
            print(f"\n## {mode}: {wall:.0f} s wall, {len(launched)} launched trials")
            print("| trial | launch s | measure s | measure / launch |")
            print("|---|---|---|---|")
            for t, lo, be in zip(launched, launch, bench):
                print(f"| {t.number} | {lo:.1f} | {be:.1f} | {be / lo:.0%} |" if lo else f"| {t.number} | - | - | - |")
            print(
                f"median measure/launch {statistics.median(b / lo for b, lo in zip(bench, launch) if lo):.0%}; "
                f"total launch {sum(launch):.0f} s, measure {sum(bench):.0f} s; level stops: {dict(stops)}; "
                f"front {len(data.front)} configurations, flags on it: {dict(flags) or 'none'}"
            )
    print(
        f"\nwall time precise / fixed: {walls['precise'] / walls['fixed']:.2f} "
        f"({walls['precise']:.0f} s / {walls['fixed']:.0f} s)"
    )


def _warnings(data: Any, trial: Any) -> list[Any]:
    from autospec.report.checks import trial_warnings

    return trial_warnings(data, trial)


if __name__ == "__main__":
    main()
