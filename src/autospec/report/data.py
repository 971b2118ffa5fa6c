"""A read-only snapshot of a study, in the shape the report needs.

`snapshot(study)` is the only place in `autospec.report` that reads an Optuna study;
everything else (table, recommendations, exports, plots, documents) works on the plain
`StudyData` it returns, so it can be tested with hand-made data.

Trial kinds (`TrialView.kind`) refine the one classification of `autospec.records`:
a configuration (`autospec.records.servers`: a measured trial, or a reference point within
its SLOs, with every launch of the same server) is ``front`` or ``dominated``
(`autospec.records.pareto_front` decides); a reference point keeps its name in
`TrialView.reference` (no_speculation, sglang_defaults, adaptive), and one that broke an
SLO is kind ``reference``; the other launches of a configuration are ``relaunch``; the
other classes keep their names: ``infeasible``, ``duplicate``, ``failed``,
``interrupted``, ``running``.

Relaunches (`autospec optimize --confirm K`) are pooled into the trial they confirm: its
view holds the mean over its launches (`values`, `launches`) and, per objective, an
interval that includes the study's between-launch spread once one is measured
(`autospec.metrics.relaunch`; `StudyData.spread`), also for configurations launched once.

Two configurations are compared by `StudyData.compare`: the ratio of one to the other over
the requests (C = 1) or waves (C > 1) both measured, paired across their launches
(`autospec.metrics.paired`), or from the pooled figures where either lacks per-position
figures (studies measured before them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from autospec.metrics import SHORT_WINDOW
from autospec.metrics.paired import Comparison, Side
from autospec.metrics.relaunch import Pooled, Spread
from autospec.records import StoredTrial, TrialClass, launch_groups, pareto_front, read_trials
from autospec.records import dominates as _dominates
from autospec.records.history import other_studies, served, spread_history
from autospec.records.launches import (
    ObjectiveRef,
    PooledStudy,
    level_interval,
    level_series,
    level_settled,
    per_objective,
    pool_levels,
    pool_study,
)
from autospec.records.machines import MachineFactor, compare_pooled, study_factors
from autospec.records.servers import launches_elsewhere

__all__ = [
    "counts_line",
    "Objective",
    "Measure",
    "TrialView",
    "TrialCounts",
    "StudyData",
    "snapshot",
    "parse_objective",
    "unit_of",
    "dominates",
    "front_json",
]

#: figures pooled at every measured level for the concurrency plot and the adaptive ladder
LEVEL_METRICS = ("output_tok_s", "agg_output_tok_s")
_OBJECTIVE_RE = re.compile(r"^(?P<metric>[a-z0-9_]+)@c(?P<c>\d+)$")


def unit_of(metric: str) -> str:
    if metric.endswith("tok_s"):
        return "tok/s"
    if metric.endswith("_ms") or "_ms_" in metric:
        return "ms"
    if metric == "accept_length":
        return "tokens/step"
    return ""


@dataclass(frozen=True)
class Objective:
    """One objective of the study: `metric` measured at `concurrency` (None when the
    metric name does not follow autospec's `<metric>@c<C>` form)."""

    name: str
    metric: str
    concurrency: int | None
    direction: str  # "maximize" | "minimize"

    @property
    def unit(self) -> str:
        return unit_of(self.metric)

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"

    @property
    def what(self) -> str:
        """Human name without unit, e.g. 'per-request output speed at C=1'."""
        what = {
            "output_tok_s": "per-request output speed",
            "agg_output_tok_s": "aggregate output throughput",
            "decode_tok_s": "per-request decode speed",
        }.get(self.metric, self.metric.replace("_", " "))
        where = f" at C={self.concurrency}" if self.concurrency is not None else ""
        return f"{what}{where}"

    @property
    def label(self) -> str:
        """Axis label with unit, e.g. 'per-request output speed at C=1 (tok/s)'."""
        return f"{self.what} ({self.unit})" if self.unit else self.what

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b


def parse_objective(name: str, direction: str) -> Objective:
    m = _OBJECTIVE_RE.match(name)
    if m:
        return Objective(name, m["metric"], int(m["c"]), direction)
    return Objective(name, name, None, direction)


@dataclass(frozen=True)
class Measure:
    """A figure with the half-width of its 95% interval (None when unknown), the number
    of successful requests behind it and, for the steady aggregate, how the interval was
    formed (`autospec.metrics.AGG_CI_METHODS`; "short-window" is flagged in reports)."""

    value: float
    half_width: float | None = None
    n: int | None = None
    method: str | None = None

    @property
    def relative(self) -> float | None:
        if self.half_width is None or not self.value:
            return None
        return abs(self.half_width / self.value)


def _num(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


@dataclass(frozen=True)
class TrialView:
    number: int
    state: str  # "complete" | "fail" | "pruned" | "running" | "waiting"
    kind: str  # see the module docstring
    flags: dict[str, Any]  # the configuration (candidate flags, draft tokens mapped)
    values: list[float] | None
    measured: bool  # values are real measurements (not worst-case stand-ins)
    outcome: str
    reason: str = ""
    launched: bool = False
    imported: Mapping[str, Any] | None = None
    baseline: bool = False
    bench: dict[int, dict[str, Any]] = field(default_factory=dict)
    startup: dict[str, Any] = field(default_factory=dict)
    server_args: list[str] | None = None
    resolved: dict[str, Any] = field(default_factory=dict)
    duplicate_of: int | None = None
    confirm_of: int | None = None  # a relaunch: the trial it confirms
    launches: int = 1  # measured launches of this configuration (relaunches included)
    pooled: tuple[Measure | None, ...] = ()  # per objective, over every launch (see the module docstring)
    # per objective: the launches behind that figure, and the other configurations whose launches
    # it pools (the same server at that concurrency: `autospec.records.front.objective_groups`)
    objective_launches: tuple[int, ...] = ()
    pooled_with: tuple[tuple[int, ...], ...] = ()
    between_dominates: tuple[str, ...] = ()  # objectives whose launch-to-launch spread exceeds the measuring error
    predicted: Mapping[str, Any] | None = None  # --sampler model: what it expected before the launch
    worker: Mapping[str, Any] | None = None  # who ran it: host, hardware, GPU slot (docs/distributed.md)
    reference: str | None = None  # the reference point it measured (no_speculation, sglang_defaults, adaptive)
    # (metric, concurrency) -> the figure pooled over the same server's launches there (`pool_levels`)
    level_pooled: Mapping[tuple[str, int], Measure] = field(default_factory=dict)

    @property
    def levels(self) -> list[int]:
        return sorted(self.bench)

    def level(self, concurrency: int) -> dict[str, Any] | None:
        return self.bench.get(concurrency)

    def measure(self, metric: str, concurrency: int) -> Measure | None:
        """`metric` at `concurrency` from the stored bench summary (None if absent)."""
        level = self.bench.get(concurrency)
        if not level:
            return None
        value = _num(level.get(metric))
        if value is None:
            return None
        interval = level_interval(level, metric)
        half = None if interval is None else (interval[1] - interval[0]) / 2.0
        n = level.get("n_ok")
        method = level.get("agg_ci_method") if metric == "agg_output_tok_s" else None
        return Measure(value, half, int(n) if isinstance(n, (int, float)) else None, str(method) if method else None)

    def level_figure(self, objectives: Sequence[Objective], metric: str, concurrency: int) -> Measure | None:
        """`metric` at `concurrency` as the front and the table give it: pooled over the
        configuration's launches (`objective_measure` where it is an objective, else
        `level_pooled`), this launch's summary where nothing was pooled."""
        for i, o in enumerate(objectives):
            if o.metric == metric and o.concurrency == concurrency:
                return self.objective_measure(o, i)
        return self.level_pooled.get((metric, concurrency)) or self.measure(metric, concurrency)

    def value(self, index: int) -> float:
        """Objective `index` as stored (NaN when the trial has no values)."""
        return float(self.values[index]) if self.values is not None and index < len(self.values) else math.nan

    def objective_measure(self, objective: Objective, index: int) -> Measure | None:
        """The objective's value with its uncertainty: pooled over launches where known,
        else this launch's; falls back to the stored value (without uncertainty) when the
        bench summary lacks the level."""
        if index < len(self.pooled) and self.pooled[index] is not None:
            return self.pooled[index]
        if objective.concurrency is not None:
            m = self.measure(objective.metric, objective.concurrency)
            if m is not None:
                return m
        if self.values is not None and self.measured and index < len(self.values):
            return Measure(float(self.values[index]))
        return None


@dataclass(frozen=True)
class TrialCounts:
    """How many trials of each kind a study holds (front and dominated together are
    "measured"), and how many launched a server: what ``--trials`` counts."""

    measured: int = 0
    infeasible: int = 0
    duplicate: int = 0
    relaunch: int = 0
    reference: int = 0
    failed: int = 0
    interrupted: int = 0
    running: int = 0
    launched: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class StudyData:
    name: str
    objectives: list[Objective]
    trials: list[TrialView]
    user_attrs: dict[str, Any] = field(default_factory=dict)
    spread: dict[str, Spread] = field(default_factory=dict)  # objective name -> between-launch spread
    # the pooled launches the comparisons read (`autospec.records.launches.pool_study`): each
    # configuration's paired sides, per objective the log spread, the machines each ran on
    pooled: PooledStudy = field(default_factory=lambda: PooledStudy({}, {}))
    # per objective, the machine factors its control trials measured (`autospec.records.machines`)
    machines: dict[int, list[MachineFactor]] = field(default_factory=dict)

    def side(self, t: TrialView, i: int) -> Side | None:
        """Trial `t`'s configuration on objective `i` as one side of a comparison: pooled over
        its launches where it is a measured configuration, else its own launch (a reference)."""
        pooled = per_objective(self.pooled.sides, t.number, i, None)
        if pooled is not None:
            return pooled
        o = self.objectives[i]
        m = t.objective_measure(o, i)
        if m is None:
            return None
        level = t.level(o.concurrency) if o.concurrency is not None else None
        found = level_series(level, o.metric)
        series, unit = ((found[0],), found[1]) if found else ((), "requests")
        return Side(m.value, m.half_width, t.launches, series, 0 if level_settled(level) else 1, unit)

    def compare(self, a: TrialView, b: TrialView, i: int) -> Comparison | None:
        """`a` over `b` on objective `i` (the module docstring); None without figures."""
        return compare_pooled(self.pooled, a.number, b.number, i, self.machines, (self.side(a, i), self.side(b, i)))

    @property
    def counts(self) -> TrialCounts:
        """Trials per class (front and dominated together are "measured")."""
        kinds = [t.kind for t in self.trials]
        return TrialCounts(
            measured=kinds.count("front") + kinds.count("dominated"),
            infeasible=kinds.count("infeasible"),
            duplicate=kinds.count("duplicate"),
            relaunch=kinds.count("relaunch"),
            reference=sum(1 for t in self.trials if t.reference is not None and t.kind in ("front", "dominated", "reference")),
            failed=kinds.count("failed"),
            interrupted=kinds.count("interrupted"),
            running=kinds.count("running"),
            launched=sum(1 for t in self.trials if t.state == "complete" and t.launched),
        )

    def trial(self, number: int) -> TrialView | None:
        return next((t for t in self.trials if t.number == number), None)

    def of_kind(self, *kinds: str) -> list[TrialView]:
        return [t for t in self.trials if t.kind in kinds]

    @property
    def front(self) -> list[TrialView]:
        """The front, best first on the first objective."""
        sign = 1.0 if self.objectives[0].maximize else -1.0
        return sorted(self.of_kind("front"), key=lambda t: sign * t.value(0), reverse=True)

    @property
    def measured(self) -> list[TrialView]:
        """Every feasible measured configuration (front and dominated)."""
        return self.of_kind("front", "dominated")

    @property
    def references(self) -> list[TrialView]:
        """The measured reference points, one per name (a relaunch of one is pooled into it),
        in launch order."""
        found: dict[str, TrialView] = {}
        for t in sorted(self.of_kind("front", "dominated", "reference"), key=lambda t: t.number):
            if t.reference is not None:
                found.setdefault(t.reference, t)
        return list(found.values())

    def baseline_trial(self, number: int | None = None) -> TrialView | None:
        """Trial `number`, else the measured trial marked as the baseline (enqueued by
        `autospec optimize --baseline`), else None."""
        if number is not None:
            return self.trial(number)
        marked = [t for t in self.trials if t.baseline and t.measured and t.kind in ("front", "dominated")]
        return marked[0] if marked else None

    @property
    def latency_objective(self) -> int:
        """Index of the objective measured at the lowest concurrency (ties: the first)."""
        return min(range(len(self.objectives)), key=lambda i: (self.objectives[i].concurrency or 0, i))

    @property
    def throughput_objective(self) -> int:
        """Index of the objective measured at the highest concurrency (ties: the last)."""
        return max(range(len(self.objectives)), key=lambda i: (self.objectives[i].concurrency or 0, i))


def dominates(a: Sequence[float], b: Sequence[float], objectives: Sequence[Objective]) -> bool:
    """`a` is at least as good as `b` on every objective and better on at least one."""
    return _dominates(a, b, [o.maximize for o in objectives])


def _values_of(t: StoredTrial) -> list[float] | None:
    """The measured values when there are any (an SLO violation was told worst-case ones),
    else what Optuna was told."""
    if t.has_measurement and t.record is not None and t.record.values is not None:
        return list(t.record.values)
    return list(t.values) if t.values else None


def _view(t: StoredTrial, on_front: set[int], configurations: set[int]) -> TrialView:
    r = t.record
    kind = t.trial_class.value
    if t.trial_class == TrialClass.MEASURED or t.number in configurations:
        kind = "front" if t.number in on_front else "dominated"
    return TrialView(
        confirm_of=t.markers.confirm_of,
        number=t.number,
        state=t.state.name.lower(),
        kind=kind,
        flags=t.candidate,
        values=_values_of(t),
        measured=t.has_measurement,
        outcome=t.outcome,
        reason=r.reason if r else "",
        launched=t.launched,
        imported=t.markers.imported,
        baseline=t.markers.baseline,
        bench=dict(r.bench) if r else {},
        startup=dict(r.startup or {}) if r else {},
        server_args=r.server_args if r else None,
        resolved=dict(r.resolved) if r else {},
        duplicate_of=r.duplicate_of if r else None,
        predicted=t.markers.predicted,
        worker=t.worker,
        reference=t.markers.reference,
    )


def snapshot(study: Any) -> StudyData:
    """Read every trial of `study` (an ``optuna.Study``) once into a `StudyData`."""
    names = study.metric_names or [f"objective_{i}" for i in range(len(study.directions))]
    objectives = [parse_objective(n, d.name.lower()) for n, d in zip(names, study.directions)]
    trials = read_trials(study)
    concurrencies = [o.concurrency for o in objectives]
    on_front = {t.number for t in pareto_front(trials, [o.maximize for o in objectives], concurrencies)}
    groups = launch_groups(trials)
    views = {t.number: _view(t, on_front, set(groups)) for t in trials}
    refs = ObjectiveRef.each(objectives)
    on = {key for key in map(served, trials) if key is not None}
    pooled = pool_study(trials, refs, spread_history(other_studies(study), on, refs) if on else None)
    originals = dict(views)
    for number, group in groups.items():
        for t in group:  # every other launch of the same server is a relaunch of the configuration
            if t.number != number:
                views[t.number] = replace(views[t.number], kind="relaunch", confirm_of=number)
        classes = [[originals[t.number] for t in launches] for launches in pooled.launches[number]]
        views[number] = _pooled(
            views[number], len(group), classes, objectives, pooled.configurations[number], pooled.pooled_with[number]
        )
    for elsewhere, name in launches_elsewhere(trials, groups).items():  # a configuration on another machine
        views[elsewhere] = replace(views[elsewhere], kind="relaunch", confirm_of=name)
    for number, figures in pool_levels(trials, LEVEL_METRICS).items():
        measures = {key: Measure(p.value, p.half) for key, p in figures.items() if math.isfinite(p.value)}
        views[number] = replace(views[number], level_pooled=measures)
    spread = {objectives[i].name: s for i, s in pooled.spread.items()}
    return StudyData(
        study.study_name,
        objectives,
        list(views.values()),
        dict(study.user_attrs),
        spread,
        pooled=pooled,
        machines=study_factors(trials, refs, pooled),
    )


def _pooled(
    root: TrialView,
    launches: int,
    classes: Sequence[Sequence[TrialView]],
    objectives: Sequence[Objective],
    pooled: Sequence[Pooled | None],
    pooled_with: Sequence[tuple[int, ...]],
) -> TrialView:
    """`root` with its launches pooled: per objective the mean over `classes[i]` (its
    launches and those of the same server at that objective's concurrency), the pooled
    interval and the successful requests of every launch behind it."""
    measures: list[Measure | None] = []
    values = list(root.values) if root.values is not None else None
    for i, (o, p, group) in enumerate(zip(objectives, pooled, classes)):
        figures = [m for m in (v.measure(o.metric, o.concurrency) if o.concurrency else None for v in group) if m is not None]
        counts = [m.n for m in figures if m.n is not None]
        methods = {m.method for m in figures if m.method}
        method = SHORT_WINDOW if SHORT_WINDOW in methods else (methods.pop() if len(methods) == 1 else None)
        measures.append(None if p is None else Measure(p.value, p.half, sum(counts) if counts else None, method))
        if values is not None and p is not None and len(group) > 1 and i < len(values):
            values[i] = p.value  # the mean over the launches behind it
    between = tuple(o.name for o, p in zip(objectives, pooled) if p is not None and p.between_dominates)
    return replace(
        root,
        values=values,
        launches=launches,
        pooled=tuple(measures),
        between_dominates=between,
        objective_launches=tuple(len(group) for group in classes),
        pooled_with=tuple(pooled_with),
    )


def front_json(data: StudyData) -> dict[str, Any]:
    """The machine-readable front: the core of what `autospec pareto --json` prints."""
    return {
        "study": data.name,
        "objectives": [{"name": o.name, "direction": o.direction} for o in data.objectives],
        "front": [{"number": t.number, "params": t.flags, "values": t.values, "reference": t.reference} for t in data.front],
        "counts": data.counts.as_dict(),
    }


def counts_line(data: StudyData) -> str:
    """What the study holds, in one line (the report's and `autospec pareto`'s)."""
    n = data.counts
    return (
        f"{len(data.trials)} trials: {n.launched} launched, {n.measured} measured "
        f"configurations ({len(data.front)} on the Pareto front), {n.infeasible} infeasible, "
        f"{n.duplicate} duplicates, {n.relaunch} relaunches, {n.reference} references, "
        f"{n.failed + n.interrupted} failed or interrupted"
    )
