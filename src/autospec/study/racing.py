"""Racing: stop measuring a configuration once more precision cannot change the front (pure).

The precision loop (`autospec.bench.adaptive`) keeps a level measuring until its figures
are within target; `Race.verdict` is its `should_stop` hook (through
`ChainHooks.stop_level`, consulted at most once a second past the level's floor). It
compares the 95% intervals of the running level, and of the trial's finished levels,
with those of the front as it stood when the trial started (relaunches pooled, the
between-launch spread included: `autospec.records.launches`). It answers a reason to
stop when:

    slo          an SLO measured at this level is surely broken: the interval of its
                 figure lies wholly beyond the bound (the trial is infeasible whatever
                 more requests say)
    dominated    every objective is measured (this is the last level holding one) and
                 one front configuration is better on every objective beyond both
                 intervals
    outclassed   some objective is not measured yet (a later level): on every objective
                 of this level, every front configuration is better beyond both
                 intervals, so whether the trial enters the front depends on the others
                 only

Otherwise None (go on). Time saved this way ends the trial sooner, so it goes to the
next configuration. The rule looks many times at a growing sample, so a stop is a
little likelier than 5% per look suggests; only clear gaps stop a level, and its floor
is always measured.

Where both the running level and a front configuration have per-position figures (the same
requests or waves, `autospec.metrics.series`), "better beyond both intervals" means the
paired ratio of the front configuration over the trial, over the positions both measured so
far (never over different counts: NGRAM's rate climbs over a launch), excludes 1 in the
front configuration's favour (`autospec.metrics.paired`, the between-launch spread
included); at least `RACE_MIN_MATCHED` positions must match. A front configuration measured
on another machine than this run's (`autospec.records.machines`) is compared only so, through
the controls' factor between the two machines, and never where no control joins them: a
machine's few percent must not stop a level. Otherwise:

Only intervals that can carry such a decision are compared (`comparable_interval`): a
figure without an interval is unknown, never exact, on either side, and the steady
aggregate's interval counts only when batch means over at least 10 whole waves (or
repeat runs) formed it. A stop is checked again on the drained level (`level_done`):
its summary's `precision["race"]` records the stop's kind, the reason the final figures
give (None: none) and `check`: "confirmed" (they give a stop of the same kind),
"contradicted" (they give none, or another kind; "dominated" and "outclassed" count as
one, both say it cannot enter the front) or "unchecked" (they carry no comparable
interval). Only a confirmed stop says the configuration was beaten.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.config import SearchSpace
from autospec.metrics import LevelSummary
from autospec.metrics.paired import LogSpread, Side, SpreadHistory
from autospec.records import StorageUnavailable, StoredTrial, TrialStore, pareto_front
from autospec.records.launches import ObjectiveRef, comparable_interval, level_series, per_objective, pool_study
from autospec.records.machines import MachineFactor, compare_on_machines, study_factors

__all__ = ["Race", "RaceObjective"]

Interval = tuple[float, float]
RACE_MIN_MATCHED = 8  # positions both must have measured before a paired comparison may stop a level


@dataclass(frozen=True)
class RaceObjective:
    index: int
    metric: str
    concurrency: int
    maximize: bool

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"


@dataclass(frozen=True)
class _Bound:
    metric: str
    concurrency: int
    low: float | None
    high: float | None


#: the kinds of stop a verdict's text starts with
STOP_KINDS = ("slo", "dominated", "outclassed")


def _interval(summary: LevelSummary, metric: str) -> Interval | None:
    """The summary's interval of `metric` where it can carry a race decision."""
    stored = {"cis": summary.cis, "agg_ci_method": summary.agg_ci_method, "steady_slices": summary.steady_slices}
    return comparable_interval(stored, metric)


def _one_sided(summary: LevelSummary, metric: str) -> Interval | None:
    """Like `_interval`, but an interval with one side unknown counts, that side open: the
    p99 of 64 requests has a lower bound and no upper one, which can still show an SLO's
    max surely broken."""
    found = summary.cis.get(metric)
    if found is None or all(math.isnan(x) for x in found):
        return None
    if any(math.isnan(x) for x in found):
        return (-math.inf if math.isnan(found[0]) else float(found[0]), math.inf if math.isnan(found[1]) else float(found[1]))
    return _interval(summary, metric)


def _kind(reason: str | None) -> str | None:
    head = (reason or "").split(":", 1)[0]
    return head if head in STOP_KINDS else None


def _member_interval(group: Sequence[StoredTrial], ref: ObjectiveRef, value: float, half: float | None) -> Interval | None:
    """A front configuration's pooled interval on one objective, where every launch of it
    has a comparable one (unknown otherwise: never taken as exact)."""
    if half is None or not math.isfinite(value):
        return None
    for t in group:
        level = t.record.bench.get(ref.concurrency) if t.record is not None and ref.concurrency is not None else None
        if comparable_interval(level, ref.metric) is None:
            return None
    return value - half, value + half


def _series_of(summary: LevelSummary) -> dict[str, object]:
    return {"concurrency": summary.concurrency, "request_speeds": summary.request_speeds, "wave_speeds": summary.wave_speeds}


def _surely_better(theirs: Interval | None, mine: Interval, maximize: bool) -> bool:
    """`theirs` beats `mine` beyond both intervals."""
    if theirs is None:
        return False
    return theirs[0] > mine[1] if maximize else theirs[1] < mine[0]


@dataclass
class Race:
    """The front a trial races against, and the trial's finished levels so far."""

    objectives: tuple[RaceObjective, ...]
    bounds: tuple[_Bound, ...]
    members: tuple[tuple[int, tuple[Interval | None, ...]], ...]  # (trial number, interval per objective)
    finished: dict[int, LevelSummary] = field(default_factory=dict)
    # per front member, its paired side per objective; per objective the study's log spread
    sides: dict[int, tuple[Side | None, ...]] = field(default_factory=dict)
    log_spread: dict[int, LogSpread] = field(default_factory=dict)
    # this run's machine key (None: not known); per front member, per objective, the machines
    # its pooled launches ran on; per objective, the factors the study's controls measured
    machine: str | None = None
    homes: dict[int, tuple[frozenset[str], ...]] = field(default_factory=dict)
    factors: dict[int, list[MachineFactor]] = field(default_factory=dict)

    @classmethod
    def against(
        cls,
        space: SearchSpace,
        trials: Sequence[StoredTrial],
        history: Mapping[int, SpreadHistory] | None = None,
        machine: str | None = None,
    ) -> Race:
        """A race against the current front of `trials` (a study measured with `space`;
        `history`: the launch spread other studies measured, `pool_study`) of a trial
        launched on `machine`."""
        objectives = tuple(
            RaceObjective(i, o.metric, o.concurrency, o.direction == "maximize") for i, o in enumerate(space.objectives)
        )
        bounds = tuple(_Bound(c.metric, c.concurrency, c.min, c.max) for c in space.constraints)
        refs = ObjectiveRef.each(space.objectives)
        pooled = pool_study(trials, refs, history)
        members = []
        sides: dict[int, tuple[Side | None, ...]] = {}
        homes: dict[int, tuple[frozenset[str], ...]] = {}
        for t in pareto_front(trials, [o.maximize for o in objectives], [o.concurrency for o in objectives]):
            sides[t.number] = tuple(pooled.sides.get(t.number, []))
            homes[t.number] = tuple(pooled.ran_on(t.number, r.index) for r in refs)
            figures = pooled.configurations.get(t.number, [])
            launches = pooled.launches[t.number]  # the front is made of the pooled configurations
            members.append(
                (
                    t.number,
                    tuple(
                        None if p is None else _member_interval(group, ref, p.value, p.half)
                        for ref, p, group in zip(refs, figures, launches)
                    ),
                )
            )
        found = study_factors(trials, refs, pooled) if machine is not None else {}
        return cls(
            objectives,
            bounds,
            tuple(members),
            sides=sides,
            log_spread=dict(pooled.log_spread),
            machine=machine,
            homes=homes,
            factors=found,
        )

    @classmethod
    def for_trial(cls, space: SearchSpace, store: TrialStore, enabled: bool = True, machine: str | None = None) -> Race | None:
        """The race of a trial starting now on `machine` against the study in `store`; None
        when racing is off (`enabled` false, or no precision loop) or the storage is away. A
        confirmation relaunch gets none: it is measured in full."""
        if not enabled or not space.bench.precision:
            return None
        try:
            return cls.against(space, store.read(), store.history, machine)
        except StorageUnavailable:
            return None

    def level_done(self, concurrency: int, summary: LevelSummary) -> LevelSummary:
        """Keep the drained level's `summary` for the later levels' verdicts; a level the
        race stopped comes back with `precision["race"]` (module docstring)."""
        stopped = _kind(summary.precision.get("detail")) if summary.precision and summary.stop_reason == "external" else None
        if stopped is not None:
            final = self.verdict(concurrency, summary)
            race: dict[str, Any] = {"stop": stopped, "final": final, "check": self._check(stopped, final, concurrency, summary)}
            summary = dataclasses.replace(summary, precision={**(summary.precision or {}), "race": race})
        self.finished[concurrency] = summary
        return summary

    def _check(self, stopped: str, final: str | None, concurrency: int, summary: LevelSummary) -> str:
        beaten = {"dominated", "outclassed"}  # either says the configuration cannot enter the front
        if _kind(final) == stopped or (stopped in beaten and _kind(final) in beaten):
            return "confirmed"
        names = [o.metric for o in self.objectives if o.concurrency == concurrency]
        names += [b.metric for b in self.bounds if b.concurrency == concurrency]
        if not any(_interval(summary, name) is not None for name in names):
            return "unchecked"
        return "contradicted"

    def verdict(self, concurrency: int, summary: LevelSummary) -> str | None:
        """A reason to stop measuring the level at `concurrency` whose records so far give
        `summary`, or None (module docstring)."""
        broken = self._broken_slo(concurrency, summary)
        if broken:
            return broken
        here = [o for o in self.objectives if o.concurrency == concurrency]
        if not here or not self.members:
            return None
        known: Mapping[int, LevelSummary] = {**self.finished, concurrency: summary}
        mine: dict[int, Interval] = {}
        for o in self.objectives:
            level = known.get(o.concurrency)
            found = _interval(level, o.metric) if level is not None else None
            if found is not None:
                mine[o.index] = found
        if any(o.index not in mine for o in here):
            return None
        if all(o.index in mine for o in self.objectives):
            for number, theirs in self.members:
                if all(self._beats(number, theirs, o, mine[o.index], known) for o in self.objectives):
                    return f"dominated: trial {number} is better on every objective beyond both 95% intervals"
            return None
        if all(self._beats(number, theirs, o, mine[o.index], known) for number, theirs in self.members for o in here):
            names = ", ".join(o.name for o in here)
            return (
                f"outclassed: every front configuration is better on {names} beyond both 95% intervals; "
                "whether it enters the front depends on the other objectives only"
            )
        return None

    def _beats(
        self,
        number: int,
        theirs: tuple[Interval | None, ...],
        o: RaceObjective,
        mine: Interval,
        known: Mapping[int, LevelSummary],
    ) -> bool:
        """Front member `number` is better than the trial on `o`: by the paired ratio over the
        positions both measured where both have them, else beyond both intervals; measured on
        another machine, only by the paired ratio through the machines' factor."""
        home = per_objective(self.homes, number, o.index, frozenset())
        here = frozenset({self.machine}) if self.machine is not None else frozenset()
        elsewhere = bool(here and home and home != here)
        if elsewhere and len(home) != 1:  # no one factor joins a member spanning several machines
            return False
        side = per_objective(self.sides, number, o.index, None)
        level = known.get(o.concurrency)
        found = None if level is None else level_series(_series_of(level), o.metric)
        if side is not None and found is not None:
            value = 0.5 * (mine[0] + mine[1])
            trial = Side(value, 0.5 * (mine[1] - mine[0]), 1, (found[0],), unit=found[1])
            spread, factors = self.log_spread.get(o.index), self.factors.get(o.index, [])
            c = compare_on_machines(side, trial, spread, (home, here), ({}, {}), factors)
            if c is not None and c.paired and c.matched >= RACE_MIN_MATCHED:
                return c.separated and (c.ratio > 1.0) == o.maximize
        return not elsewhere and _surely_better(theirs[o.index], mine, o.maximize)

    def _broken_slo(self, concurrency: int, summary: LevelSummary) -> str | None:
        for b in self.bounds:
            if b.concurrency != concurrency:
                continue
            found = _one_sided(summary, b.metric)
            if found is None:
                continue
            if b.high is not None and found[0] > b.high:
                return f"slo: {b.metric}@c{concurrency} is above its max {b.high:g} beyond its 95% interval"
            if b.low is not None and found[1] < b.low:
                return f"slo: {b.metric}@c{concurrency} is below its min {b.low:g} beyond its 95% interval"
        return None
