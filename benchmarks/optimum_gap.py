"""How close does a 20-trial study get to the best configuration there is? (issue 3)

For each seed, runs `autospec optimize --trials 20 --sim` on the default search space
and default simulator profile, then compares the best configuration *on the study's
Pareto front* for each objective with the exhaustive optimum of that objective over
the whole space, both computed with the simulator's noiseless `predict()` (so noise in
the measurement does not flatter or punish a seed). Also prints the best *measured*
value, scaled back by the time scale.

    python benchmarks/optimum_gap.py --seeds 1 2 3 4 5 [--time-scale 0.5] [--output-len 256]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _studies import full_flags, run_study

from autospec.cli.common import load_space
from autospec.report import snapshot
from autospec.sim import load_profile, predict
from autospec.space import grid


def workload_for(space) -> dict:
    w = space.workload
    return {"input_len": w.input_len, "output_len": w.output_len, "temperature": w.temperature}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sampler", default="tpe")
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--space", default="default")
    ap.add_argument("--output-len", type=int, default=None, help="override the space's [workload] output_len")
    args = ap.parse_args()

    space = load_space(args.space)
    extra: list[str] = []
    if args.output_len:
        space = space.with_overrides(output_len=args.output_len)
        extra = ["--output-len", str(args.output_len)]
    profile = load_profile()
    wl = workload_for(space)
    objectives = space.objectives
    metric_of = {"output_tok_s": "per_request_tok_s", "agg_output_tok_s": "aggregate_tok_s", "decode_tok_s": "decode_tok_s"}

    def true_value(flags, obj):
        n = space.bench.num_requests(obj.concurrency)
        p = predict(profile, flags, obj.concurrency, "synthetic", num_requests=n, **wl)
        return getattr(p, metric_of[obj.metric]) if p.ok else 0.0

    t0 = time.monotonic()
    optimum = []
    points = list(grid(space))
    for obj in objectives:
        best = max(points, key=lambda c: true_value(full_flags(args.space, c), obj))
        optimum.append((best, true_value(full_flags(args.space, best), obj)))
    print(f"exhaustive optimum over {len(points)} configurations ({time.monotonic() - t0:.1f}s):")
    for obj, (cfg, value) in zip(objectives, optimum):
        print(f"  {obj.name}: {value:.1f} at {cfg}")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            study, wall = run_study(Path(tmp), f"gap-{seed}", trials=args.trials, seed=seed, sampler=args.sampler,
                                    space=args.space, time_scale=args.time_scale, extra=extra)
            rows_front = snapshot(study).front
            ratios, measured = [], []
            for i, obj in enumerate(objectives):
                best_true = max((true_value(full_flags(args.space, r.flags), obj) for r in rows_front), default=0.0)
                ratios.append(best_true / optimum[i][1])
                measured.append(max((r.values[i] for r in rows_front), default=0.0) * args.time_scale)
            launched = sum(1 for t in study.trials if t.user_attrs.get("launched"))
            rows.append((seed, ratios, measured, len(rows_front), launched, len(study.trials), wall))
            print(f"seed {seed}: front {len(rows_front)} configs; best/optimum = "
                  + ", ".join(f"{o.name} {r:.3f}" for o, r in zip(objectives, ratios))
                  + "; measured best = " + ", ".join(f"{m:.1f}" for m in measured)
                  + f"; {launched} launched of {len(study.trials)} trials; {wall:.0f}s", flush=True)

    print()
    print("| objective | optimum (predicted) | median best/optimum | worst best/optimum | seeds within 5% |")
    print("|---|---|---|---|---|")
    for i, obj in enumerate(objectives):
        r = [row[1][i] for row in rows]
        print(f"| {obj.name} | {optimum[i][1]:.1f} | {statistics.median(r):.3f} | {min(r):.3f} | "
              f"{sum(x >= 0.95 for x in r)}/{len(r)} |")


if __name__ == "__main__":
    main()
