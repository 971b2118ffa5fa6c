"""Objective figures of measured configurations, pooled over their launches (pure).

The one place that turns stored trials into per-objective intervals: each launch's
figure is its measured value with the 95% interval stored in its bench summary
(`level_interval`); relaunches (`autospec optimize --confirm K`) are pooled into the
trial they confirm, and per objective, configurations that ran the same server at its
concurrency pool together (`autospec.records.front.objective_groups`: they differ only in
the KV pool's size, which that level did not reach); the study's between-launch spread
(`autospec.metrics.relaunch`) is measured over those pools and widens every
configuration's interval once relaunches measured it. The report and the study's racing
both read intervals from here.

Each configuration is also a paired side (`PooledStudy.side`,
`autospec.metrics.paired.Side`: its pooled figure and each launch's per-position figures,
`level_series`), and the study's between-launch spread of a launch's log figure is pooled
over the same launches (`launch_spread`), with what relaunches in other studies measured of it
where the caller has that (`autospec.records.history`). Launches pool only within a machine;
its sides on other machines are kept apart (`PooledStudy.away_from_home`). Two configurations
are compared, wherever they ran, by `autospec.records.machines.compare_pooled`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from autospec.metrics import BATCH_MEANS, PRECISE_SLICES, REPEATS
from autospec.metrics.paired import LogSpread, Side, SpreadHistory, launch_spread, with_history
from autospec.metrics.relaunch import LaunchFigure, Pooled, Spread, between_launch_spread, pool_launches
from autospec.records.servers import launch_groups, launches_elsewhere, objective_groups
from autospec.records.stored import StoredTrial

__all__ = [
    "ObjectiveRef",
    "PooledStudy",
    "comparable_interval",
    "level_interval",
    "launch_figure",
    "level_series",
    "level_settled",
    "pool_study",
    "pool_levels",
    "per_objective",
    "race_check",
    "RACE_CHECKS",
]

#: `precision["race"]["check"]` of a level the race stopped, once the drained level is known
RACE_CHECKS = ("confirmed", "contradicted", "unchecked")


@dataclass(frozen=True)
class ObjectiveRef:
    """Where objective `index` of a study is stored: `metric` of the level at `concurrency`
    (None: no level, e.g. an imported value without a bench summary)."""

    index: int
    metric: str
    concurrency: int | None

    @classmethod
    def each(cls, objectives: Sequence[Any]) -> list[ObjectiveRef]:
        """A ref per objective, in order (anything with `metric` and `concurrency`: a space's
        objectives, the report's)."""
        return [cls(i, o.metric, o.concurrency) for i, o in enumerate(objectives)]


def level_interval(level: Mapping[str, object] | None, metric: str) -> tuple[float, float] | None:
    """The 95% interval of `metric` in a stored level summary (`LevelSummary.as_dict`),
    also from summaries written before `cis` existed; None when absent or not finite."""
    if not level:
        return None
    cis = level.get("cis")
    interval = cis.get(metric) if isinstance(cis, Mapping) else None
    if interval is None and metric in ("output_tok_s", "agg_output_tok_s"):
        interval = level.get(f"{metric}_ci")
    if not isinstance(interval, (list, tuple)) or len(interval) != 2:
        return None
    try:
        lo, hi = float(interval[0]), float(interval[1])
    except (TypeError, ValueError):
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None


def comparable_interval(level: Mapping[str, object] | None, metric: str) -> tuple[float, float] | None:
    """`level_interval`, where it rests on enough data to decide between configurations
    (the race): the steady aggregate's only when formed by batch means over at least
    PRECISE_SLICES whole waves (what a precision target needs too: over a few slices a
    narrow interval can be luck; in a quick start one said +-1.1% while its level ran and
    +-13.5% once it drained), or over repeat runs (a short window's interval is blind to
    how waves differ). Summaries written before `agg_ci_method` existed count as they
    are."""
    interval = level_interval(level, metric)
    if interval is None or metric != "agg_output_tok_s" or level is None or "agg_ci_method" not in level:
        return interval
    method, slices = level.get("agg_ci_method"), level.get("steady_slices")
    if method == REPEATS or (method == BATCH_MEANS and isinstance(slices, int) and slices >= PRECISE_SLICES):
        return interval
    return None


def race_check(level: Mapping[str, object] | None) -> str | None:
    """How the drained level judged the race's stop of this level (one of RACE_CHECKS;
    None: the race did not stop it). Only a "confirmed" stop says the configuration was
    beaten; a "contradicted" one says the final figures do not show it."""
    precision = level.get("precision") if level else None
    race = precision.get("race") if isinstance(precision, Mapping) else None
    check = race.get("check") if isinstance(race, Mapping) else None
    return str(check) if check in RACE_CHECKS else None


#: the wave left out of comparisons by wave: its C requests are sent at once, prefilled together
#: and then decoded with no prefill between, so it reads above the steady rate, by an amount the
#: configuration sets (SGLang 0.5.16 on an H100, fixture real_8b_standalone_topk_1_2c_h100:
#: +17-26% for top-k 1 against +7-11% for top-k 2 over the level's steady aggregate, in all 5
#: launches; the simulator shows it too)
RAMP_WAVE = "0"


def level_series(level: Mapping[str, object] | None, metric: str, unit: str | None = None) -> tuple[dict[str, float], str] | None:
    """A stored level's per-position figures behind `metric` (`autospec.metrics.series`) and
    their unit (`unit`, else the one comparisons use): "requests" at C = 1 (output_tok_s, and
    the aggregate, which at C = 1 is one request's speed), "waves" for the aggregate at C > 1;
    None where the level has none (older levels, other metrics).

    Long C > 1 levels keep request speeds too, and on an H100 they repeat between launches
    far better than waves (docs/validation/2026-12-06-h100-default-study.md), but a study
    holds long and short levels, and a comparison must not mix the two units (their figures
    differ by a factor C); until comparisons choose their unit pair by pair, C > 1 pairs by
    wave and request speeds there serve analysis (`unit="requests"`). Wave `RAMP_WAVE` is left
    out, as request speeds leave out a level's first C positions."""
    if not level:
        return None
    if unit is None:
        unit = "waves" if _concurrency(level) > 1 else "requests"
    requests, waves = level.get("request_speeds"), level.get("wave_speeds")
    if unit == "requests" and metric in ("output_tok_s", "agg_output_tok_s") and isinstance(requests, Mapping) and requests:
        return {str(k): float(v) for k, v in requests.items()}, "requests"
    if unit == "waves" and metric == "agg_output_tok_s" and isinstance(waves, Mapping) and waves:
        steady = {str(k): float(v) for k, v in waves.items() if str(k) != RAMP_WAVE}
        return (steady, "waves") if steady else None
    return None


def _concurrency(level: Mapping[str, object]) -> int:
    """The level's concurrency; a level stored without it is C > 1 where it holds waves."""
    c = level.get("concurrency")
    if isinstance(c, int):
        return c
    return 2 if level.get("wave_speeds") else 1


def level_settled(level: Mapping[str, object] | None) -> bool:
    """False only where the level says its rate never settled (`autospec.metrics.warmup`)."""
    return not level or level.get("warmup_settled") is not False


def _level(trial: StoredTrial, ref: ObjectiveRef) -> Mapping[str, object] | None:
    record = trial.record
    return record.bench.get(ref.concurrency) if record is not None and ref.concurrency is not None else None


def launch_figure(trial: StoredTrial, ref: ObjectiveRef) -> LaunchFigure | None:
    """One launch's figure for an objective: its measured value and interval half-width."""
    record = trial.record
    values = record.values if record is not None and record.values is not None else trial.values
    if values is None or ref.index >= len(values):
        return None
    level = record.bench.get(ref.concurrency) if record is not None and ref.concurrency is not None else None
    interval = level_interval(level, ref.metric)
    return LaunchFigure(float(values[ref.index]), None if interval is None else (interval[1] - interval[0]) / 2)


@dataclass(frozen=True)
class PooledStudy:
    """`spread[i]`: objective i's between-launch spread (absent: not measured);
    `configurations[n]`: per objective, measured trial n pooled with its relaunches and the
    launches of the same server at that objective's concurrency; `launches[n]`: per
    objective, those launches; `pooled_with[n]`: per objective, the other measured trials
    whose launches are in that figure."""

    spread: dict[int, Spread]
    configurations: dict[int, list[Pooled | None]]
    pooled_with: dict[int, list[tuple[int, ...]]] = field(default_factory=dict)
    launches: dict[int, list[list[StoredTrial]]] = field(default_factory=dict)
    # per objective: the between-launch spread of a launch's log figure over shared requests
    # (`autospec.metrics.paired`), and each configuration's paired sides
    log_spread: dict[int, LogSpread] = field(default_factory=dict)
    sides: dict[int, list[Side | None]] = field(default_factory=dict)
    # per configuration, per objective: its sides on machines other than its own (machine -> side)
    away: dict[int, list[dict[str, Side]]] = field(default_factory=dict)

    def side(self, number: int, index: int) -> Side | None:
        """Configuration `number` on objective `index` as one side of a comparison: its pooled
        figure, with per-position figures where its launches kept them."""
        found = per_objective(self.sides, number, index, None)
        if found is not None:
            return found
        p = per_objective(self.configurations, number, index, None)
        return None if p is None else Side(p.value, p.half, p.launches)

    def ran_on(self, number: int, index: int) -> frozenset[str]:
        """The machines configuration `number`'s pooled launches on objective `index` ran on
        (empty where none is known)."""
        launches = per_objective(self.launches, number, index, [])
        return frozenset(t.machine for t in launches if t.machine)

    def away_from_home(self, number: int, index: int) -> dict[str, Side]:
        """Configuration `number`'s sides on objective `index` on the other machines it ran on."""
        return per_objective(self.away, number, index, {})

    def sharing(self, number: int, index: int) -> tuple[int, ...]:
        """The other measured trials whose launches are in trial `number`'s figure of objective `index`."""
        return per_objective(self.pooled_with, number, index, ())


T = TypeVar("T")


def per_objective(table: Mapping[int, Sequence[T]], number: int, index: int, empty: T) -> T:
    """`table[number][index]`: configuration `number`'s entry for objective `index`, `empty` where it has none."""
    per = table.get(number, ())
    return per[index] if index < len(per) else empty


def _launches_away(
    trials: Sequence[StoredTrial], groups: dict[int, list[StoredTrial]]
) -> dict[int, dict[str, list[StoredTrial]]]:
    """Per configuration, its launches on other machines (`launches_elsewhere`), by machine."""
    by_number = {t.number: t for t in trials}
    away: dict[int, dict[str, list[StoredTrial]]] = {}
    for number, name in launches_elsewhere(trials, groups).items():
        t = by_number[number]
        away.setdefault(name, {}).setdefault(t.machine or "", []).append(t)
    return away


def _away_sides(
    away: Mapping[int, Mapping[str, list[StoredTrial]]], ref: ObjectiveRef, spread: Spread | None
) -> dict[int, dict[str, Side]]:
    """Per configuration, each other machine's launches of it (`_launches_away`) as one side:
    pooled figure and per-position figures at `ref`."""
    out: dict[int, dict[str, Side]] = {}
    for name, machines in away.items():
        for machine, launches in machines.items():
            figures = [f for f in (launch_figure(t, ref) for t in launches) if f is not None]
            found = [level_series(_level(t, ref), ref.metric) for t in launches]
            if not figures or not any(found):
                continue
            pooled = pool_launches(figures, spread)
            unit = next(f[1] for f in found if f is not None)
            series = tuple(f[0] if f is not None else {} for f in found)
            unsettled = sum(1 for t in launches if not level_settled(_level(t, ref)))
            out.setdefault(name, {})[machine] = Side(pooled.value, pooled.half, len(launches), series, unsettled, unit)
    return out


def _sides(
    classes: Mapping[int, list[StoredTrial]], ref: ObjectiveRef, figures: Mapping[int, Pooled | None]
) -> tuple[dict[int, Side | None], LogSpread | None]:
    """Per configuration its paired side on `ref`, and the study's log spread."""
    units: set[str] = set()
    series: dict[int, tuple[dict[str, float], ...]] = {}
    unsettled: dict[int, int] = {}
    for n, launches in classes.items():
        found = [level_series(_level(t, ref), ref.metric) for t in launches]
        units.update(f[1] for f in found if f is not None)
        series[n] = tuple(f[0] if f is not None else {} for f in found)
        unsettled[n] = sum(1 for t in launches if not level_settled(_level(t, ref)))
    unit = units.pop() if len(units) == 1 else "requests"
    roots = {launches[0].number: n for n, launches in classes.items()}  # one group per pool
    spread = launch_spread([series[n] for n in roots.values() if len(series[n]) > 1])
    sides: dict[int, Side | None] = {}
    for n, p in figures.items():
        sides[n] = None if p is None else Side(p.value, p.half, p.launches, series[n], unsettled[n], unit)
    return sides, spread


def pool_study(
    trials: Sequence[StoredTrial], refs: Sequence[ObjectiveRef], history: Mapping[int, SpreadHistory] | None = None
) -> PooledStudy:
    """Pool every measured configuration of `trials` (see the module docstring); `history`, per
    objective index, the launch spread relaunches outside the study measured (`autospec.records.history`)."""
    groups = launch_groups(trials)
    spread: dict[int, Spread] = {}
    configurations: dict[int, list[Pooled | None]] = {n: [] for n in groups}
    pooled_with: dict[int, list[tuple[int, ...]]] = {n: [] for n in groups}
    behind: dict[int, list[list[StoredTrial]]] = {n: [] for n in groups}
    sides: dict[int, list[Side | None]] = {n: [] for n in groups}
    away: dict[int, list[dict[str, Side]]] = {n: [] for n in groups}
    launches_away = _launches_away(trials, groups)
    log_spread: dict[int, LogSpread] = {}
    for ref in refs:
        classes = objective_groups(trials, ref.concurrency, groups)
        figures = {n: [f for f in (launch_figure(t, ref) for t in launches) if f is not None] for n, launches in classes.items()}
        pools: dict[int, list[int]] = {}  # a pool's first launch -> the measured trials it pools, in number order
        for n, launches in classes.items():
            pools.setdefault(launches[0].number, []).append(n)
        found = between_launch_spread([figures[roots[0]] for roots in pools.values() if len(classes[roots[0]]) > 1])
        if found is not None:
            spread[ref.index] = found
        for n, launches in classes.items():
            configurations[n].append(pool_launches(figures[n], spread.get(ref.index)) if figures[n] else None)
            pooled_with[n].append(tuple(sorted(m for m in pools[launches[0].number] if m != n)))
            behind[n].append(launches)
        found_sides, found_log = _sides(classes, ref, {n: configurations[n][-1] for n in classes})
        found_log = with_history(found_log, (history or {}).get(ref.index))
        if found_log is not None:
            log_spread[ref.index] = found_log
        found_away = _away_sides(launches_away, ref, spread.get(ref.index))
        for n in groups:
            sides[n].append(found_sides.get(n))
            away[n].append(found_away.get(n, {}))
    return PooledStudy(spread, configurations, pooled_with, behind, log_spread, sides, away)


def _level_launch(trial: StoredTrial, metric: str, concurrency: int) -> LaunchFigure | None:
    """One launch's `metric` at `concurrency` from its stored level summary (None when the
    level is missing, failed, or has no finite value)."""
    level = trial.record.bench.get(concurrency) if trial.record is not None else None
    value = level.get(metric) if level and not level.get("failed_reason") else None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    interval = level_interval(level, metric)
    return LaunchFigure(float(value), None if interval is None else (interval[1] - interval[0]) / 2)


def pool_levels(trials: Sequence[StoredTrial], metrics: Sequence[str]) -> dict[int, dict[tuple[str, int], Pooled]]:
    """Configuration -> (metric, concurrency) -> that figure pooled over every launch of the
    same server at that concurrency (`objective_groups`), for the levels that are not
    objectives (the concurrency plot, the adaptive ladder): so they agree with the table.
    No between-launch spread is added (it is measured on the objectives only)."""
    groups = launch_groups(trials)
    levels = sorted({c for group in groups.values() for t in group if t.record is not None for c in t.record.bench})
    out: dict[int, dict[tuple[str, int], Pooled]] = {n: {} for n in groups}
    for c in levels:
        classes = objective_groups(trials, c, groups)
        for metric in metrics:
            for n, launches in classes.items():
                figures = [f for f in (_level_launch(t, metric, c) for t in launches) if f is not None]
                if figures:
                    out[n][(metric, c)] = pool_launches(figures, None)
    return out
