"""Issue 37's GPU check: launches of two configurations alternating on one request stream.

Reads a study that launched configuration A and configuration B in alternation
(``tools/gpu/paired_study.sh``; fixture ``tests/fixtures/real_8b_paired_two_machines.db.gz``:
two H100s) and, per objective level (C=32 twice: by wave, as the study's comparisons pair
there, and by request, where long levels kept request speeds), prints:

- the between-launch spread s (sd of a launch's mean log figure over the shared positions,
  pooled over both configurations, launches pooling only within one machine as the study's
  do) and the per-position noise e (`autospec.metrics.paired.launch_spread`), and the floor
  1.96 x sqrt(2) x s;
- per machine, A's i-th launch over B's i-th: the paired ratio with its 95% interval as the
  study reports it (the prior on s included), each launch's measuring share (seconds
  benchmarking over the launch's seconds in all), whether it lies inside the first pair's
  interval, and its log half-width over the floor, as reported and with s and e known;
- per configuration and later machine, its launches there over those on the first machine
  (the machine factor, paired);
- with `--beside FIXTURE:STUDY` (studies that would share the storage), each pair as a study
  holding only those two launches would report it: on the prior alone, and with the launch
  spread the other studies measured on the same hardware and target (`autospec.records.history`);
  with `--history-depth DF`, with a history of DF degrees of freedom at the launches' own tau;
- with `--prior-sd X`, every interval as it would read were the ratios' prior on a launch's
  own shift (`autospec.metrics.paired.PRIOR_SD`, 2%) X instead: a what-if, since that prior
  decides the reading "as reported" while relaunches have measured the spread over few df.

    .venv/bin/python benchmarks/paired_launches.py [--fixture real_8b_paired_two_machines.db.gz]
    .venv/bin/python benchmarks/paired_launches.py --storage sqlite:///x.db --study NAME
    .venv/bin/python benchmarks/paired_launches.py --study real-8b-standalone-default \
        --fixture real_8b_standalone_default_first_h100.db.gz --fixture real_8b_standalone_default_h100.db.gz --pair 0 1
    .venv/bin/python benchmarks/paired_launches.py --fixture real_8b_standalone_topk_1_2c_h100.db.gz --study topk-1-2c \
        --beside real_8b_paired_steps56.db.gz:steps-5-6 --beside real_8b_standalone_grid_h100.db.gz:real-8b-standalone-grid

With more than two configurations in the studies, `--pair A B` names a trial of each
configuration to compare; without it, the two launched more than once are compared.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import math
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import optuna

from autospec.metrics import paired
from autospec.metrics.paired import (
    Comparison,
    LogSpread,
    SpreadHistory,
    launch_spread,
    paired_ratio,
    unpaired_ratio,
    with_history,
)
from autospec.records import StoredTrial, read_trials
from autospec.records.history import served, spread_history
from autospec.records.launches import ObjectiveRef, level_interval, level_series

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
_Z95 = 1.959963984540054
LEVELS = ((1, "output_tok_s"), (32, "agg_output_tok_s"))


@dataclass(frozen=True)
class Pair:
    """A's and B's i-th launches on one machine (trial numbers `a`, `b`) and their paired ratio;
    `known_half`: its log half-width with s and e taken as known (z, no prior); `alone`: as a
    study of only these two launches reports it, on the prior and with the history (if any);
    `in_study`: as this study reports it with the history added to its own relaunches."""

    machine: str
    a: int
    b: int
    comparison: Comparison
    known_half: float
    alone: tuple[Comparison | None, Comparison | None] = (None, None)
    in_study: Comparison | None = None


@dataclass(frozen=True)
class LevelCheck:
    """What one level shows (module docstring). `pairs`: per machine in the order first
    used, A's and B's launches paired in order; `factors`: per configuration and later
    machine, its launches there over those on the first machine (paired)."""

    concurrency: int
    spread: LogSpread
    pairs: tuple[Pair, ...]
    unpaired: Comparison | None  # the two first launches' own figures and intervals, as if measured alone
    factors: tuple[tuple[str, str, Comparison], ...]  # (configuration, machine, A or B there over the first machine)

    @property
    def first(self) -> Comparison:
        return self.pairs[0].comparison

    @property
    def later(self) -> tuple[tuple[float, bool], ...]:
        """Each later pair's ratio, and whether it lies inside the first pair's interval."""
        return tuple((p.comparison.ratio, self.first.lo <= p.comparison.ratio <= self.first.hi) for p in self.pairs[1:])

    @property
    def floor(self) -> float:
        return _Z95 * math.sqrt(2) * self.spread.sd

    def over_floor(self, pair: Pair) -> float:
        """The pair's log half-width as reported over the floor."""
        c = pair.comparison
        return math.log(c.hi / c.ratio) / self.floor if self.floor > 0 else math.inf

    def known_over_floor(self, pair: Pair) -> float:
        return pair.known_half / self.floor if self.floor > 0 else math.inf

    def one_each_over_floor(self, pair: Pair) -> list[float | None]:
        """`over_floor` of the pair of one launch each: as a study of only these two launches
        reports it [on the prior, with the history], then as this study does with the history."""
        return [
            None if c is None or self.floor <= 0 else math.log(c.hi / c.ratio) / self.floor for c in (*pair.alone, pair.in_study)
        ]


def launches_by_config(trials: list[StoredTrial]) -> list[list[StoredTrial]]:
    """The measured launches of each configuration (by parameters), oldest first, in the
    order the configurations were first launched."""
    groups: dict[tuple, list[StoredTrial]] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.record is not None and t.record.launched and t.record.values is not None:
            groups.setdefault(tuple(sorted(t.params.items())), []).append(t)
    return list(groups.values())


def machines_of(trials: list[StoredTrial]) -> list[str]:
    """The machine keys in the order the launches first used them ("" where unrecorded)."""
    return list(dict.fromkeys(t.machine or "" for t in sorted(trials, key=lambda t: t.number)))


def _series(trial: StoredTrial, concurrency: int, metric: str, unit: str | None) -> dict[str, float]:
    found = level_series(trial.record.bench.get(concurrency) if trial.record else None, metric, unit)
    return found[0] if found else {}


def check_level(
    a: list[StoredTrial],
    b: list[StoredTrial],
    concurrency: int,
    metric: str,
    unit: str | None = None,
    history: SpreadHistory | None = None,
) -> LevelCheck | None:
    """The level's check (module docstring) over `unit`'s figures ("requests" or "waves"; None:
    the unit the study's comparisons use, `level_series`); None where a side lacks them.
    Launches pool, and pair, only within one machine, as the study's own comparisons do.
    `history`: the launch spread other studies measured at this level."""
    unit = unit or ("waves" if concurrency > 1 else "requests")
    machines = machines_of([*a, *b])

    def on(side: list[StoredTrial], machine: str) -> list[StoredTrial]:
        return [t for t in side if (t.machine or "") == machine]

    series = {t.number: _series(t, concurrency, metric, unit) for t in [*a, *b]}
    spread = launch_spread([[series[t.number] for t in on(side, m)] for side in (a, b) for m in machines])
    if spread is None:
        return None
    noise = spread.noise_sd if spread.noise_sd is not None else 0.0
    pairs = []
    for m in machines:
        for x, y in zip(on(a, m), on(b, m), strict=False):
            c = paired_ratio([series[x.number]], [series[y.number]], spread, unit=unit)
            if c is not None:
                # one launch each, s and e taken as known: 1.96 sqrt(2 e^2 / n + 2 tau^2) (`autospec.metrics.paired`)
                known = _Z95 * math.sqrt(2 * noise**2 / c.matched + 2 * spread.launch_sd() ** 2)
                alone: tuple[Comparison | None, Comparison | None] = (None, None)
                in_study = None
                if history is not None:  # as a study of only these two launches would report it, and this one
                    one_each = [series[x.number]], [series[y.number]]
                    on_prior = paired_ratio(*one_each, None, unit=unit)
                    alone = (on_prior, paired_ratio(*one_each, with_history(None, history), unit=unit))
                    in_study = paired_ratio(*one_each, with_history(spread, history), unit=unit)
                pairs.append(Pair(m, x.number, y.number, c, known, alone, in_study))
    if not pairs:
        return None
    factors = []
    for name, side in (("A", a), ("B", b)):
        home = [series[t.number] for t in on(side, machines[0])]
        for m in machines[1:]:
            there = [series[t.number] for t in on(side, m)]
            factor = paired_ratio(there, home, spread, unit=unit) if there and home else None
            if factor is not None:
                factors.append((name, m, factor))
    unpaired = _unpaired(a[0], b[0], concurrency, metric)
    return LevelCheck(concurrency, spread, tuple(pairs), unpaired, tuple(factors))


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


def relaunched_pair(trials: list[StoredTrial], pair: tuple[int, int] | None = None) -> list[list[StoredTrial]]:
    """The two configurations to compare: those of the trial numbers `pair` (A, then B), else
    the study's only two, else the two it launched more than once (a default study whose
    confirmations relaunched them)."""
    groups = launches_by_config(trials)
    if pair is not None:
        chosen = [next((g for g in groups if any(t.number == n for t in g)), None) for n in pair]
        if None in chosen or chosen[0] is chosen[1]:
            raise SystemExit(
                f"paired_launches: --pair {pair[0]} {pair[1]} must name measured launches of two configurations; "
                f"the launches are {sorted(t.number for g in groups for t in g)}"
            )
        return [g for g in chosen if g is not None]
    if len(groups) != 2:
        groups = [g for g in groups if len(g) > 1]
    if len(groups) != 2:
        raise SystemExit(
            f"paired_launches: the studies relaunch {len(groups)} configurations; they need exactly two "
            "(or measure only two); name them with --pair A B (a trial of each)"
        )
    return groups


def fixtures_trials(names: list[str], study: str, folder: Path) -> list[StoredTrial]:
    """`study`'s trials in each gzipped fixture of `names`, the i-th fixture's renumbered from
    100 x i so that trial numbers stay apart (unpacked under `folder`)."""
    trials: list[StoredTrial] = []
    for i, name in enumerate(names):
        (folder / str(i)).mkdir()
        found = study_trials(fixture_storage(name, folder / str(i)), study)
        trials += [dataclasses.replace(t, number=100 * i + t.number) for t in found]
    return trials


def report(
    trials: list[StoredTrial],
    pair: tuple[int, int] | None = None,
    history: Mapping[int, SpreadHistory] | None = None,
    depths: tuple[int, ...] = (),
) -> list[str]:
    """The printed check; `history`, per index of LEVELS, the launch spread other studies measured;
    `depths`, history sizes (df) at the pair's own measured tau to judge one launch each with."""
    a, b = relaunched_pair(trials, pair)
    machines = machines_of([*a, *b])
    shares = dict(measuring_shares([*a, *b]))
    lines = [
        f"A = {dict(a[0].params)} (trials {[t.number for t in a]}); B = {dict(b[0].params)} (trials {[t.number for t in b]})",
        *(f"machine {i + 1}: {m or 'unrecorded'}" for i, m in enumerate(machines)),
    ]
    levels = [(i, c, m, u) for i, (c, m) in enumerate(LEVELS) for u in (("requests", "waves") if c > 1 else ("requests",))]
    for index, concurrency, metric, unit in levels:
        usual = unit == ("waves" if concurrency > 1 else "requests")  # the unit other studies' spread is in
        c = check_level(a, b, concurrency, metric, unit, (history or {}).get(index) if usual else None)
        if c is None:
            lines.append(f"C={concurrency} by {unit}: no per-position figures on both sides")
            continue
        noise = f"{c.spread.noise_sd:.2%} ({c.spread.noise_df} df)" if c.spread.noise_sd is not None else "unmeasured"
        lines.append(
            f"C={concurrency} {metric} by {unit}: spread s {c.spread.sd:.2%} ({c.spread.df} df, within machines), "
            f"per-position noise e {noise}, floor 1.96 x sqrt(2) x s = +-{c.floor:.2%}"
        )
        for i, p in enumerate(c.pairs):
            f = p.comparison
            inside = "" if i == 0 else (" inside the first" if c.first.lo <= f.ratio <= c.first.hi else " OUTSIDE the first")
            lines.append(
                f"  machine {machines.index(p.machine) + 1}, trials {p.a}/{p.b} (measuring {shares.get(p.a, 0):.0%}/"
                f"{shares.get(p.b, 0):.0%}): x{f.ratio:.4f} (95% {f.lo:.4f}-{f.hi:.4f}, {f.matched} {f.unit} matched, "
                f"{f.dropped} dropped){inside}; {c.over_floor(p):.2f} x the floor as reported, "
                f"{c.known_over_floor(p):.2f} x with s and e known"
            )
            prior, past, _ = c.one_each_over_floor(p)
            if past is not None:
                lines.append(
                    f"    from these two launches alone: {prior:.2f} x the floor on the prior, {past:.2f} x with the history"
                )
        for depth in depths if usual else ():
            deep = check_level(a, b, concurrency, metric, unit, SpreadHistory(c.spread.launch_sd(), depth, 0))
            over = [deep.one_each_over_floor(p) for p in deep.pairs] if deep else []
            lines.append(
                f"  one launch each, with {depth} df of history at tau {c.spread.launch_sd():.2%}: "
                + ", ".join(f"{o[1]:.2f}" for o in over if o[1] is not None)
                + " x the floor alone, "
                + ", ".join(f"{o[2]:.2f}" for o in over if o[2] is not None)
                + " x in this study (its relaunches measured e)"
            )
        lines.append(
            "  the first two launches unpaired (each one's own interval): "
            + (f"x{c.unpaired.ratio:.4f} (95% {c.unpaired.lo:.4f}-{c.unpaired.hi:.4f})" if c.unpaired else "none")
        )
        for name, m, f in c.factors:
            lines.append(
                f"  machine {machines.index(m) + 1} over machine 1, {name}'s launches paired: x{f.ratio:.4f} "
                f"(95% {f.lo:.4f}-{f.hi:.4f}, {f.launches[0]} and {f.launches[1]} launches)"
            )
    lines.append("measuring share per launch: " + ", ".join(f"trial {n} {s:.0%}" for n, s in sorted(shares.items())))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--fixture",
        action="append",
        help="a gzipped study under tests/fixtures (default real_8b_paired_two_machines.db.gz); given again, "
        "the launches of each further one are added, renumbered from 100, 200, ...",
    )
    p.add_argument("--storage", help="a study's storage URL instead of the fixture")
    p.add_argument("--study", default="steps-5-6")
    p.add_argument(
        "--pair",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="compare the configurations of these two trials (numbers as printed: a further fixture's from 100, ...); "
        "default: the only two configurations, or the only two relaunched",
    )
    p.add_argument(
        "--beside",
        action="append",
        default=[],
        metavar="FIXTURE:STUDY",
        help="a study as if it shared the storage (a gzipped fixture under tests/fixtures): its relaunches on the "
        "same hardware and target make the history a pair of one launch each is also judged with",
    )
    p.add_argument(
        "--history-depth",
        action="append",
        type=int,
        default=[],
        metavar="DF",
        help="also judge each pair of one launch each with a history of DF degrees of freedom at the tau these "
        "launches measured: how much history elsewhere brings it how close to the floor (repeatable)",
    )
    p.add_argument(
        "--prior-sd",
        type=float,
        metavar="X",
        help="read every interval with the ratios' prior on a launch's own shift at X (default "
        f"{paired.PRIOR_SD:g}, autospec.metrics.paired.PRIOR_SD): what a prior of that size would report",
    )
    args = p.parse_args(argv)
    if args.prior_sd is not None:
        if not 0 < args.prior_sd < 1:
            p.error(f"--prior-sd {args.prior_sd:g} must lie between 0 and 1 (a relative sd, e.g. 0.01 for 1%)")
        paired.PRIOR_SD = args.prior_sd  # read at call time by LogSpread.shrunk and the prior-only case
    with tempfile.TemporaryDirectory() as tmp:
        names = args.fixture or ([] if args.storage else ["real_8b_paired_two_machines.db.gz"])
        trials = (study_trials(args.storage, args.study) if args.storage else []) + fixtures_trials(names, args.study, Path(tmp))
        others = []
        for i, beside in enumerate(args.beside):
            fixture, _, study = beside.partition(":")
            (Path(tmp) / f"beside{i}").mkdir()
            others.append(study_trials(fixture_storage(fixture, Path(tmp) / f"beside{i}"), study))
        refs = [ObjectiveRef(i, metric, c) for i, (c, metric) in enumerate(LEVELS)]
        history = spread_history(others, {k for k in map(served, trials) if k}, refs) if others else None
        pair = (args.pair[0], args.pair[1]) if args.pair else None
        for line in report(trials, pair, history, tuple(args.history_depth)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
