"""Scale-out on one host: the same 20-launch simulated study with 1, 2 and 4 GPU slots.

    python benchmarks/scaling.py [--trials 20] [--seed 1] [--time-scale 1] [--space default]

Each study runs `autospec optimize --sim --gpus ...` exactly as a user would (slots of
tp_size GPUs of a simulated 16-GPU host). Printed per slot count: wall seconds and the
ratio to one slot measured in the same run, launched trials (must equal --trials),
configurations launched more than once (must be 0), and the hypervolume of the study's
front valued with the simulator's noiseless `predict()` over that of the whole grid's
front (so measurement noise does not decide the comparison).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _studies import run_study

from autospec.cli.common import load_space
from autospec.model import hypervolume
from autospec.records import read_trials
from autospec.report import snapshot
from autospec.sim import predict
from autospec.sim.profile import load_profile
from autospec.space import grid
from autospec.study.slots import gpus_per_trial_of


def front_area(points: list[tuple[float, float]]) -> float:
    """2-D hypervolume of maximised points against the origin (`autospec.model.hypervolume`)."""
    return hypervolume([(-x, -y) for x, y in points], (0.0, 0.0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-scale", type=float, default=1.0, help="simulated time scale (default 1: the quick start's)")
    ap.add_argument("--space", default="default")
    ap.add_argument("--profile", default="seed-qwen35-122b-4x-rtxpro6000")
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    space, profile = load_space(args.space), load_profile(args.profile)
    per = gpus_per_trial_of(space.server.flags)
    wl = space.workload

    def truth(flags: dict) -> tuple[float, float]:
        values = []
        for o in space.objectives:
            p = predict(
                profile,
                {**space.server.flags, **flags},
                o.concurrency,
                "synthetic",
                num_requests=max(space.bench.num_requests(o.concurrency), 8 * o.concurrency),
                input_len=wl.input_len,
                output_len=wl.output_len,
                temperature=wl.temperature,
            )
            values.append((p.per_request_tok_s if o.concurrency == 1 else p.aggregate_tok_s) if p.ok else 0.0)
        return values[0], values[1]

    best = front_area([truth(c) for c in grid(space)])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for slots in args.slots:
            name = f"scaling-{slots}"
            study, wall = run_study(
                Path(tmp) / name,
                name,
                trials=args.trials,
                seed=args.seed,
                space=args.space,
                time_scale=args.time_scale,
                extra=["--sim-profile", args.profile, "--gpus", f"0-{slots * per - 1}"],
            )
            snap = snapshot(study)
            stored = [t for t in read_trials(study) if t.counts_as_launch]
            twice = sum(k - 1 for k in Counter(tuple(sorted(t.params.items())) for t in stored).values() if k > 1)
            hosts = Counter((t.worker or {}).get("slot", {}).get("index") for t in stored)
            ratio = front_area([truth(t.flags) for t in snap.front]) / best
            rows.append((slots, wall, len(stored), twice, ratio, dict(sorted(hosts.items()))))
            print(
                f"{slots} slot(s): {wall:.0f} s, {len(stored)} launched, {twice} launched twice, "
                f"HV ratio {ratio:.3f}, trials per slot {dict(sorted(hosts.items()))}",
                flush=True,
            )
    base = rows[0][1]
    print("\n| slots | wall s | wall / 1 slot | launched | launched twice | HV ratio (noiseless) | trials per slot |")
    print("|---|---|---|---|---|---|---|")
    for slots, wall, n, twice, ratio, per_slot in rows:
        print(f"| {slots} | {wall:.0f} | {wall / base:.2f} | {n} | {twice} | {ratio:.3f} | {per_slot} |")
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - t0:.0f} s)")
    sys.exit(code)
