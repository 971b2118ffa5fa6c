"""How close does a 20-trial study get to the best configuration there is? (issues 3, 15)

For each simulator profile (with the search space the efficiency harness pairs it with),
each seed and each way of measuring, runs `autospec optimize --trials 20 --sim` (noise
on: the profile's own), then compares the best configuration *on the study's Pareto
front* for each objective with the exhaustive optimum of that objective over the grid,
both valued with the simulator's noiseless `predict()` (aggregate objectives in steady
state: a 40-wave level), so noise in the measurement neither flatters nor punishes a
seed. Ways of measuring:

    precise  the study's default: the precision loop, racing
    fixed    `[bench] precision = false`: the fixed request counts of before, the baseline

    python benchmarks/optimum_gap.py --output-len 256 --time-scale 0.25   # every profile, 5 seeds, both ways
    python benchmarks/optimum_gap.py --profiles seed-qwen35-122b-4x-rtxpro6000 --seeds 1 2 --modes precise
    python benchmarks/optimum_gap.py --chain simulated --modes precise --launch-noise 0.1 --noise 0.01 --confirm 0

Columns per objective: the best configuration on the study's front (as before), the
best of every configuration the study launched (`launched`: what the search reached;
the gap between the two is what deciding from noisy measurements lost) and the study's
own pick for that objective (`pick`: `autospec pareto`'s latency pick for the
lowest-concurrency objective, its throughput pick for the highest), all valued without
noise. ``--chain simulated`` runs the product's study and trial chain with the simulated
launcher and bench (`_simulated.run_study`: deterministic, seconds per study) instead of
simulator servers, with ``--noise`` (each request's relative spread: the per-request records
the product's metrics summarise, intervals and racing included) and ``--launch-noise``
(the spread of a launch's speed, the between-launch spread); ``--confirm K`` is passed to
the study (default: the tool's default).

Studies that run at once share the machine's cores with their simulators and clients, and a
starved client reads fast configurations (many small streamed chunks) as slower than they are:
on the 2-core machine `--jobs 4` gave llama31-8b a C=32 median of 0.861 and `--jobs 1` 0.980
(docs/tuning-quality.md). Keep `--jobs` at most half the cores; the script warns above that.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _simulated import PredictedOracle
from _studies import run_study

sys.path.insert(0, str(Path(__file__).parent))
from efficiency import CASES, load_case

from autospec.report import recommend, snapshot
from autospec.sim import predict
from autospec.space import grid

STEADY_WAVES = 40
MODES = ("precise", "fixed")


def space_file(case_space: str, mode: str, folder: Path) -> str:
    """The case's space file, with `[bench] precision = false` for the fixed mode."""
    from autospec.cli.common import load_space

    path = Path(load_space(case_space).source)
    if mode == "precise":
        return str(path)
    text = path.read_text()
    if "\n[bench]\n" in text:
        text = text.replace("\n[bench]\n", "\n[bench]\nprecision = false\n", 1)
    else:
        text += "\n[bench]\nprecision = false\n"
    out = folder / f"{path.stem}-fixed.toml"
    out.write_text(text)
    return str(out)


def noiseless_truth(space: Any, profile: Any, output_len: int | None = None) -> tuple[Callable[..., float], str]:
    """(truth(flags, objective): a configuration's noiseless `predict()` figure for that
    objective (aggregates in steady state: a 40-wave level; 0 where it fails), the prompts'
    kind), valued on the prompts the study sends, classified as the simulator's API does."""
    wl = space.workload
    kind, prompt_tokens = PredictedOracle(profile, space).prompt_workload(space.bench.num_requests(1))
    kw = {"input_len": prompt_tokens, "output_len": output_len or wl.output_len, "temperature": wl.temperature}

    def truth(flags: Mapping[str, Any], objective: Any) -> float:
        waves = STEADY_WAVES if objective.metric == "agg_output_tok_s" else 2
        p = predict(
            profile,
            {**space.server.flags, **flags},
            objective.concurrency,
            kind,
            num_requests=max(space.bench.num_requests(objective.concurrency), waves * objective.concurrency),
            **kw,
        )
        value = {"output_tok_s": p.per_request_tok_s, "agg_output_tok_s": p.aggregate_tok_s, "decode_tok_s": p.decode_tok_s}[
            objective.metric
        ]
        return value if p.ok else 0.0

    return truth, kind


def _pick_of(data: Any) -> dict[int, str]:
    """Objective index -> the pick chosen on it (latency: lowest concurrency, throughput: highest)."""
    lat, thr = data.latency_objective, data.throughput_objective
    return {lat: "latency"} if lat == thr else {lat: "latency", thr: "throughput"}


def _run(
    args: argparse.Namespace,
    folder: Path,
    study_name: str,
    name: str,
    mode: str,
    seed: int,
    space: Any,
    profile: Any,
    extra: list[str],
) -> tuple[Any, float]:
    """One study, as a user runs it (simulator servers) or with the in-process chain."""
    if args.chain == "simulated":
        from _simulated import run_study_as_asked

        if args.output_len:
            space = space.with_overrides(output_len=args.output_len)
        t0 = time.monotonic()
        study = run_study_as_asked(args, space, profile, seed, folder / study_name, study_name)
        return study, time.monotonic() - t0
    confirm = ["--confirm", str(args.confirm)] if args.confirm is not None else []
    return run_study(  # a folder each: studies that run at once must not share the simulated GPU
        folder / study_name,
        study_name,
        trials=args.trials,
        seed=seed,
        sampler=args.sampler,
        space=space_file(CASES[name].space, mode, folder),
        time_scale=args.time_scale,
        extra=["--sim-profile", name, *extra, *confirm],
    )


def _swap(truth: Callable[..., float], objective: Any, flags: Mapping[str, Any]) -> float:
    return truth(flags, objective)


def optimum_of(space: Any, truth: Callable[..., float]) -> tuple[list[Any], list[float]]:
    """Per objective of `space` (every one maximizes), the grid's best configuration and its
    noiseless value."""
    best = [max(grid(space), key=functools.partial(_swap, truth, o)) for o in space.objectives]
    return best, [truth(c, o) for c, o in zip(best, space.objectives)]


def _flags_truth(truth: Callable[..., float], objective: Any, trial: Any) -> float:
    return truth(trial.flags, objective)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profiles", nargs="+", default=list(CASES), choices=list(CASES), metavar="PROFILE")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sampler", default="model", help="the study's --sampler (default: the tool's default, model)")
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--jobs", type=int, default=1, help="studies run at once")
    ap.add_argument("--output-len", type=int, default=None, help="override every space's [workload] output_len")
    ap.add_argument("--chain", choices=("server", "simulated"), default="server", help="simulator servers or in-process")
    ap.add_argument("--noise", type=float, default=0.05, help="--chain simulated: each request's relative spread")
    ap.add_argument("--launch-noise", type=float, default=0.05, help="--chain simulated: the between-launch spread")
    ap.add_argument("--confirm", type=int, default=None, help="the study's --confirm K (default: the tool's default)")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    if args.jobs > max(1, cores // 2):
        print(
            f"warning: --jobs {args.jobs} on {cores} cores: studies starve each other's clients and the C=32 "
            f"ratios read low; use --jobs {max(1, cores // 2)}",
            file=sys.stderr,
        )

    results: dict[tuple[str, str], list[tuple[int, list[list[float]], float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.profiles:
            space, profile = load_case(CASES[name])
            truth, kind = noiseless_truth(space, profile, args.output_len)
            extra = ["--output-len", str(args.output_len)] if args.output_len else []

            best, optimum = optimum_of(space, truth)
            print(
                f"{name} ({kind} prompts): "
                + "; ".join(f"{o.name} optimum {v:.1f} at {c}" for o, v, c in zip(space.objectives, optimum, best)),
                flush=True,
            )

            def one(
                job: tuple[str, int],
                name: str = name,
                truth: Callable[..., float] = truth,
                optimum: list[float] = optimum,
                space: Any = space,
                extra: list[str] = extra,
                profile: Any = profile,
            ) -> tuple[str, int, list[list[float]], float]:
                mode, seed = job
                study_name = f"gap-{name}-{mode}-{seed}"
                study, wall = _run(args, folder, study_name, name, mode, seed, space, profile, extra)
                data = snapshot(study)
                front, launched = data.front, data.measured
                picks = recommend(data)
                pick_of = _pick_of(data)
                rows: list[list[float]] = []
                for i, o in enumerate(space.objectives):
                    best = max(front, key=functools.partial(_flags_truth, truth, o), default=None)
                    reached = max(launched, key=functools.partial(_flags_truth, truth, o), default=None)
                    chosen = picks[pick_of[i]].trial if pick_of.get(i) in picks else None
                    rows.append([truth(t.flags, o) / optimum[i] if t is not None else 0.0 for t in (best, reached, chosen)])
                confirmations = sum(1 for t in data.trials if t.confirm_of is not None and t.kind == "relaunch")
                print(
                    f"{name} {mode} seed {seed}: "
                    + ", ".join(
                        f"{o.name} front {r[0]:.3f} launched {r[1]:.3f} pick {r[2]:.3f}" for o, r in zip(space.objectives, rows)
                    )
                    + f"; {confirmations} confirmation(s); {wall:.0f} s",
                    flush=True,
                )
                return mode, seed, rows, wall

            jobs = [(mode, seed) for mode in args.modes for seed in args.seeds]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                for mode, seed, ratios, wall in pool.map(one, jobs):
                    results.setdefault((name, mode), []).append((seed, ratios, wall))

    print()
    print(
        "| profile | measuring | objective | median front best/optimum | worst | median launched best/optimum | "
        "median gap | median pick/optimum | worst pick | median study wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, mode), rows in results.items():
        space, _ = load_case(CASES[name])
        for i, o in enumerate(space.objectives):
            front = [row[1][i][0] for row in rows]
            reached = [row[1][i][1] for row in rows]
            pick = [row[1][i][2] for row in rows]
            gap = [b - a for a, b in zip(front, reached)]
            print(
                f"| {name} | {mode} | {o.name} | {statistics.median(front):.3f} | {min(front):.3f} | "
                f"{statistics.median(reached):.3f} | {statistics.median(gap):.3f} | {statistics.median(pick):.3f} | "
                f"{min(pick):.3f} | {statistics.median(row[2] for row in rows):.0f} |"
            )
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - t0:.0f} s)")
    sys.exit(code)
