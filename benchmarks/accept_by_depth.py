"""Acceptance by depth on a trained pair: what each configuration's verify steps accepted, and
what the performance model, fitted on the mean accept lengths of the *other* configurations'
launches, predicts.

Reads a study of `real-8b-standalone` (default: the fixture
``tests/fixtures/real_8b_standalone_grid_h100.db.gz``, real SGLang 0.5.16 on an H100;
docs/validation/2026-12-06-h100-control-and-grid.md). Per speculative launch at C=1 (`--level`
another concurrency):

- the measured accept length and the model's (median over 200 parameter draws of the model
  fitted without any launch of that configuration, `autospec.model.performance.PerformanceModel`);
- the measured share of verify steps that accepted at least d drafted tokens, d = 1..steps
  (from SGLang's ``spec_correct_drafts_histogram``, `autospec.metrics.accept.accept_by_depth`),
  and for chains (top-k 1) the model's, prod_{j<=d} a_j (`autospec.model.acceptance`). The model
  is fitted on mean accept lengths only, so its depth profile is a prediction, not a fit.

    .venv/bin/python benchmarks/accept_by_depth.py [--fixture NAME | --storage URL --study NAME] [--level 32]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
from paired_launches import fixture_storage  # the sibling script: one gzip fixture loader

from autospec.config import load_search_space
from autospec.model import Observation, observation_from_record
from autospec.model.acceptance import ACCEPTANCE, position_acceptance
from autospec.model.performance import PerformanceModel
from autospec.model.priors import LAYOUT
from autospec.records import StoredTrial, read_trials

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "src" / "autospec" / "search_spaces" / "real-8b-standalone.toml"
DRAWS = 200


@dataclass(frozen=True)
class Row:
    """One launch: its shape (steps, top-k, draft tokens), measured and predicted accept
    length, measured P(accepted >= d) and, for chains, predicted P(accepted >= d)."""

    number: int
    steps: int
    topk: int
    draft: int
    measured: float
    predicted: float
    reached: tuple[float, ...]
    predicted_reached: tuple[float, ...] | None


def reached_shares(histogram: list[int] | tuple[int, ...]) -> tuple[float, ...]:
    """From counts of verify steps that accepted k = 0..steps drafted tokens: the share that
    accepted at least d, d = 1..steps."""
    total = sum(histogram)
    return tuple(sum(histogram[d:]) / total for d in range(1, len(histogram))) if total else ()


@dataclass(frozen=True)
class Launch:
    """A measured speculative search launch: its observation, C=1 accept histogram and accept length."""

    number: int
    observation: Observation
    histogram: tuple[int, ...]
    accept: float


def launches(trials: list[StoredTrial], level: int = 1) -> list[Launch]:
    """The measured speculative search launches with an accept histogram at C=`level`
    (references left out: a reference that leaves the shape to SGLang records no steps, top-k
    or draft tokens)."""
    flags = load_search_space(str(SPACE)).server.flags
    out = []
    for t in trials:
        if not t.has_measurement or t.record is None or t.markers.reference is not None:
            continue
        histogram = (t.record.bench.get(level) or {}).get("accept_by_depth")
        o = observation_from_record(t.record, base_flags=flags)
        accept = o.value("accept_length", level) if o is not None else None
        if o is not None and histogram and accept is not None and o.shape.speculative:
            out.append(Launch(t.number, o, tuple(histogram), float(accept)))
    return out


def rows(trials: list[StoredTrial], level: int = 1) -> list[Row]:
    """Per launch, its accept length at C=`level` and the model's, fitted without any launch of
    its configuration (module docstring)."""
    found = launches(trials, level)
    out = []
    for launch in found:
        # every launch of this configuration left out: a relaunch, on another build of the pair
        # too, would otherwise hand the fit its answer
        model = PerformanceModel([other.observation for other in found if other.observation.shape != launch.observation.shape])
        thetas = model.draws(np.random.default_rng(0), DRAWS)
        s = launch.observation.shape
        predicted = float(np.median(model.accept_draws(thetas, [s])))
        chain = None
        if s.width == 1:
            a = position_acceptance(thetas[:, LAYOUT.block(ACCEPTANCE.name)], s.depth)
            chain = tuple(float(x) for x in np.median(np.cumprod(a, axis=1), axis=0))
        shares = reached_shares(launch.histogram)
        out.append(Row(launch.number, s.depth, s.width, s.draft, launch.accept, predicted, shares, chain))
    return sorted(out, key=lambda r: (r.topk, r.steps, r.draft))


def table(found: list[Row]) -> list[str]:
    lines = [
        "| steps | top-k | draft | accept measured | predicted (fitted without it) | accepted >= d, d = 1.. (measured) "
        "| (predicted, chains) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in found:
        measured = " ".join(f"{x:.2f}" for x in r.reached)
        predicted = " ".join(f"{x:.2f}" for x in r.predicted_reached) if r.predicted_reached else "-"
        lines.append(f"| {r.steps} | {r.topk} | {r.draft} | {r.measured:.2f} | {r.predicted:.2f} | {measured} | {predicted} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", default="real_8b_standalone_grid_h100.db.gz", help="a gzipped study under tests/fixtures")
    p.add_argument("--storage", help="a study's storage URL instead of the fixture")
    p.add_argument("--study", default="real-8b-standalone-grid")
    p.add_argument("--level", type=int, default=1, help="the concurrency whose levels are read (default 1)")
    args = p.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        storage = args.storage or fixture_storage(args.fixture, Path(tmp))
        found = rows(read_trials(optuna.load_study(study_name=args.study, storage=storage)), args.level)
    if len(found) < 3:
        raise SystemExit(f"accept_by_depth: {len(found)} launches with accept histograms; the model needs at least 3")
    for line in table(found):
        print(line)
    errors = [abs(np.log(r.predicted / r.measured)) for r in found]
    print(f"accept length, predicted over measured: median |log| {np.median(errors):.3f}, worst {max(errors):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
