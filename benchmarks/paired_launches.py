"""Issue 37's GPU check: launches of two configurations alternating on one request stream.

Reads a study that launched configuration A and configuration B in alternation
(``tools/gpu/paired_study.sh``; fixture ``tests/fixtures/real_8b_paired_steps56.db.gz``) and,
per objective level, prints:

- the between-launch spread s (sd of a launch's mean log figure over the shared positions,
  pooled over both configurations) and the per-position noise e, as the study pools them
  (`autospec.metrics.paired.launch_spread`), and the floor 1.96 x sqrt(2) x s;
- the paired ratio of A's first launch over B's first launch, with its 95% interval as the
  study reports it once relaunches measured s and e (the prior on s included), and that
  interval's half-width (log scale) over the floor, also with s taken as known (z, no prior);
- each later pair of launches (A's i-th over B's i-th): its paired ratio, and whether it lies
  inside the first interval;
- each launch's measuring share: seconds benchmarking over the launch's seconds in all.

    .venv/bin/python benchmarks/paired_launches.py [--fixture real_8b_paired_steps56.db.gz]
    .venv/bin/python benchmarks/paired_launches.py --storage sqlite:///x.db --study NAME
"""

from __future__ import annotations

import argparse
import gzip
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import optuna

from autospec.metrics.paired import Comparison, LogSpread, launch_spread, paired_ratio, unpaired_ratio
from autospec.records import StoredTrial, read_trials
from autospec.records.launches import level_interval, level_series

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
_Z95 = 1.959963984540054
LEVELS = ((1, "output_tok_s"), (32, "agg_output_tok_s"))


@dataclass(frozen=True)
class LevelCheck:
    """What one level shows (module docstring); `later` holds (ratio, inside the first interval)."""

    concurrency: int
    spread: LogSpread
    first: Comparison
    known_half: float  # log half-width with s taken as known (z, no prior)
    later: tuple[tuple[float, bool], ...]
    unpaired: Comparison | None  # the two first launches' own figures and intervals, as if measured alone

    @property
    def floor(self) -> float:
        return _Z95 * math.sqrt(2) * self.spread.sd

    @property
    def over_floor(self) -> float:
        return math.log(self.first.hi / self.first.ratio) / self.floor if self.floor > 0 else math.inf

    @property
    def known_over_floor(self) -> float:
        return self.known_half / self.floor if self.floor > 0 else math.inf


def launches_by_config(trials: list[StoredTrial]) -> list[list[StoredTrial]]:
    """The measured launches of each configuration (by parameters), oldest first, in the
    order the configurations were first launched."""
    groups: dict[tuple, list[StoredTrial]] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.record is not None and t.record.launched and t.record.values is not None:
            groups.setdefault(tuple(sorted(t.params.items())), []).append(t)
    return list(groups.values())


def _series(trial: StoredTrial, concurrency: int, metric: str) -> dict[str, float]:
    found = level_series(trial.record.bench.get(concurrency) if trial.record else None, metric)
    return found[0] if found else {}


def check_level(a: list[StoredTrial], b: list[StoredTrial], concurrency: int, metric: str) -> LevelCheck | None:
    """The level's check (module docstring); None where a side lacks per-position figures."""
    sa = [_series(t, concurrency, metric) for t in a]
    sb = [_series(t, concurrency, metric) for t in b]
    unit = "waves" if concurrency > 1 else "requests"  # what `level_series` keys them by
    spread = launch_spread([sa, sb])
    first = paired_ratio(sa[:1], sb[:1], spread, unit=unit)
    if spread is None or first is None:
        return None
    # one launch each, s and e taken as known: 1.96 sqrt(2 e^2 / n + 2 tau^2) (`autospec.metrics.paired`)
    noise = spread.noise_sd if spread.noise_sd is not None else 0.0
    known_half = _Z95 * math.sqrt(2 * noise**2 / first.matched + 2 * spread.launch_sd() ** 2)
    later = []
    for x, y in zip(sa[1:], sb[1:], strict=False):
        pair = paired_ratio([x], [y], spread)
        if pair is not None:
            later.append((pair.ratio, first.lo <= pair.ratio <= first.hi))
    return LevelCheck(concurrency, spread, first, known_half, tuple(later), _unpaired(a[0], b[0], concurrency, metric))


def _unpaired(a: StoredTrial, b: StoredTrial, concurrency: int, metric: str) -> Comparison | None:
    def figure(t: StoredTrial) -> tuple[float, float | None]:
        level = t.record.bench.get(concurrency) if t.record else None
        interval = level_interval(level, metric)
        value = float(level.get(metric, math.nan)) if level else math.nan
        return value, None if interval is None else (interval[1] - interval[0]) / 2

    return unpaired_ratio(*figure(a), *figure(b))


def measuring_shares(trials: list[StoredTrial]) -> list[tuple[int, float]]:
    """(trial, benchmark seconds over the launch's total seconds) per launch."""
    out = []
    for t in trials:
        seconds = t.record.seconds if t.record else {}
        if seconds.get("total"):
            out.append((t.number, seconds.get("bench", 0.0) / seconds["total"]))
    return out


def study_trials(storage: str, study: str) -> list[StoredTrial]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return read_trials(optuna.load_study(study_name=study, storage=storage))


def fixture_storage(name: str, folder: Path) -> str:
    path = folder / "study.db"
    path.write_bytes(gzip.decompress((FIXTURES / name).read_bytes()))
    return f"sqlite:///{path}"


def report(trials: list[StoredTrial]) -> list[str]:
    groups = launches_by_config(trials)
    if len(groups) != 2:
        raise SystemExit(f"paired_launches: the study measured {len(groups)} configurations; it needs exactly two")
    a, b = groups
    lines = [
        f"A = {dict(a[0].params)} (trials {[t.number for t in a]}); B = {dict(b[0].params)} (trials {[t.number for t in b]})"
    ]
    for concurrency, metric in LEVELS:
        c = check_level(a, b, concurrency, metric)
        if c is None:
            lines.append(f"C={concurrency}: no per-position figures on both sides")
            continue
        f = c.first
        noise = f"{c.spread.noise_sd:.2%} ({c.spread.noise_df} df)" if c.spread.noise_sd is not None else "unmeasured"
        lines += [
            f"C={concurrency} {metric}: spread s {c.spread.sd:.2%} ({c.spread.df} df), per-position noise e {noise}, "
            f"floor 1.96 x sqrt(2) x s = +-{c.floor:.2%}",
            f"  first pair: x{f.ratio:.4f} (95% {f.lo:.4f}-{f.hi:.4f}, {f.matched} {f.unit} matched, {f.dropped} dropped): "
            f"{c.over_floor:.2f} x the floor as reported (prior on s), {c.known_over_floor:.2f} x with s known",
            "  the same two launches unpaired (each one's own interval): "
            + (f"x{c.unpaired.ratio:.4f} (95% {c.unpaired.lo:.4f}-{c.unpaired.hi:.4f})" if c.unpaired else "none"),
            "  later pairs: " + (", ".join(f"x{r:.4f} {'inside' if ok else 'OUTSIDE'}" for r, ok in c.later) or "none"),
        ]
    shares = measuring_shares([*a, *b])
    lines.append("measuring share per launch: " + ", ".join(f"trial {n} {s:.0%}" for n, s in shares))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", default="real_8b_paired_steps56.db.gz", help="a gzipped study under tests/fixtures")
    p.add_argument("--storage", help="a study's storage URL instead of the fixture")
    p.add_argument("--study", default="steps-5-6")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        storage = args.storage or fixture_storage(args.fixture, Path(tmp))
        for line in report(study_trials(storage, args.study)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
