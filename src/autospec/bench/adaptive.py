"""Measuring a level until its figures are precise enough.

Two ways, one rule of thumb (stop when the 95% intervals are narrow enough, or when a
cap says measuring more is not worth it):

**The precision loop** (`run_level_precise_with`, what a study does for every level
that feeds an objective or a constraint): one closed-loop run that keeps sending past
its floor (the plan's request count) while `stop_rule` says continue. `stop_rule` is a
pure function of the summary of the records so far, the goal (figures with their
target relative half-widths, floor and ceiling in requests, a time cap) and the
elapsed time; it answers None (continue) or a `Stop` with one of the reasons

    target    every figure's interval is within its target (a constraint's figure
              also counts once its interval lies wholly on one side of the bound; the
              steady aggregate only once its window holds `PRECISE_SLICES` whole waves)
    cap       measuring one more slice (`check_every_s`) and draining the requests in
              flight (about one median request latency) would pass the time cap
    ceiling   the level sent `max_requests`
    failed    the level failed its error threshold
    external  the caller's hook (`should_stop(summary) -> str | None`) said stop,
              e.g. a study racing configurations; its text is kept as the detail

One continuous run has one ramp-up and one drain however long it goes, so the
steady-state aggregate (`autospec.metrics.steady`) gains from every request. The rule
is consulted before each send beyond the floor, at most once per `check_every_s`,
and less often when a look is slow: each look summarises every record so far on the
client's event loop, which reads no streamed output meanwhile, so the records show a
pause the server never made; the next look waits until that blind time is at most
`MAX_BLIND_SHARE` of the level (a loaded host, thousands of records). A slice is never
started past the cap, so with less than a slice of budget left a level stops at its
floor. The result's summary carries `stop_reason`
and `precision` (targets, relative half-widths, cap, elapsed, the hook's text).

**Repeat runs** (`run_level_adaptive_with`, `autospec bench --adaptive`): each repeat
is one closed-loop run of the level's plan (warmup only before the first). After
every repeat from `min_repeats` on, the runs are summarised together
(`autospec.metrics.summarize_repeats`: Student-t intervals across runs) and the
loop stops when, for every metric in `metrics`, the interval's half-width is at
most `target_rel_half_width` of the value, or when `max_repeats` runs were made,
or when the level failed (error share above the threshold).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from autospec.bench.client import BenchClient
from autospec.bench.runner import LevelPlan, ProgressCallback, run_level_with
from autospec.bench.workloads import Workload
from autospec.errors import ConfigError
from autospec.metrics import (
    BATCH_MEANS,
    DEFAULT_MAX_ERROR_RATE,
    METRICS,
    PRECISE_SLICES,
    REPEATS,
    LevelSummary,
    metric_uncertainty,
    metric_value,
    stats,
    summarize,
    summarize_repeats,
)
from autospec.request_records import LevelResult, RequestRecord

#: figures without an interval (pooled ITL, error share): the rule cannot target them
NO_INTERVAL = frozenset({"itl_ms_p50", "itl_ms_p90", "itl_ms_p99", "error_rate"})
STOP_REASONS = ("target", "cap", "ceiling", "failed", "external")
DEFAULT_TARGET_REL_CI = 0.02
DEFAULT_CHECK_EVERY_S = 1.0

StopHook = Callable[[LevelSummary], "str | None"]


@dataclass(frozen=True)
class Figure:
    """One figure a level must measure precisely: its metric, the target half-width
    of its 95% interval relative to its value, and for a constraint its bounds (the
    figure is also settled once its interval lies wholly on one side of them)."""

    metric: str
    target_rel_ci: float = DEFAULT_TARGET_REL_CI
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ConfigError(f"unknown metric {self.metric!r}; use names from METRICS")
        if not 0 < self.target_rel_ci < 1:
            raise ConfigError(f"target_rel_ci must be in (0, 1), got {self.target_rel_ci}; e.g. 0.02 for +-2%")


# The precision loop's looks may keep the client from reading streamed output for at most
# this share of a level (a look's own duration / this = the wait until the next one).
MAX_BLIND_SHARE = 0.05


@dataclass(frozen=True)
class PrecisionGoal:
    """When a level may stop: its figures, the floor and ceiling in requests sent,
    and the time cap (seconds on the caller's clock, see `run_level_precise_with`).
    `stream_requests`: how far the study's earlier launches measured this level's request
    stream (`autospec.records.stream`); the level does not stop for its target before it
    sent that many, so that it pairs with them over all their positions. Its cap, the
    ceiling, a failure or the caller's hook still stop it: a level never takes the time of
    the levels after it (on an H200, 2026-12-06, a C=1 level that ran on to a fresh launch's
    stream took the C=32 level's time and left it two waves)."""

    figures: tuple[Figure, ...]
    min_requests: int
    max_requests: int
    cap_s: float
    check_every_s: float = DEFAULT_CHECK_EVERY_S
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    stream_requests: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.min_requests <= self.max_requests:
            raise ConfigError(
                f"need 1 <= min_requests ({self.min_requests}) <= max_requests ({self.max_requests}); fix the bounds"
            )
        if self.cap_s < 0 or self.check_every_s <= 0:
            raise ConfigError("cap_s must be >= 0 and check_every_s > 0")

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.metric for f in self.figures))


@dataclass(frozen=True)
class Stop:
    reason: str  # one of STOP_REASONS
    detail: str


def thin_interval(summary: LevelSummary, metric: str) -> bool:
    """The aggregate's interval rests on too few whole waves to meet a target: fewer than
    `PRECISE_SLICES` (a window under 3 waves has a short-window interval, erring wide but
    blind to how waves differ; batch means over a few slices estimate their spread from
    a few degrees of freedom, so a narrow one can be luck)."""
    if metric != "agg_output_tok_s" or summary.agg_ci_method == REPEATS:
        return False
    return summary.agg_ci_method != BATCH_MEANS or summary.steady_slices < PRECISE_SLICES


def figure_state(summary: LevelSummary, figure: Figure) -> tuple[str, float | None]:
    """(state, relative half-width) of one figure in `summary`. States: "precise"
    (within target), "settled" (a constraint's interval lies on one side of a bound),
    "wide", "thin" (within target or beyond a bound, but on too few waves to trust:
    `thin_interval`),
    "unknown" (no interval yet), "steady-short" (the aggregate's steady window is under
    half the run), "unmeasurable" (no value: measuring more cannot help, or a figure
    without intervals)."""
    value = metric_value(summary, figure.metric)
    if figure.metric in NO_INTERVAL or math.isnan(value):
        return "unmeasurable", None
    interval = summary.cis.get(figure.metric)
    half = metric_uncertainty(summary, figure.metric)
    relative = None if half is None or value == 0 else half / abs(value)
    thin = thin_interval(summary, figure.metric)
    if interval is not None and _settled(interval, figure) and not thin:
        return "settled", relative
    if figure.metric == "agg_output_tok_s" and summary.steady_short:
        return "steady-short", relative
    if relative is None:
        return "unknown", None
    if relative > figure.target_rel_ci:
        return "wide", relative
    return ("thin" if thin else "precise"), relative


def _settled(interval: tuple[float, float], figure: Figure) -> bool:
    """A constraint's figure whose interval lies wholly outside its bounds (surely
    violated) or wholly inside them (surely met)."""
    if figure.low is None and figure.high is None:
        return False
    lo, hi = (-math.inf if math.isnan(interval[0]) else interval[0], math.inf if math.isnan(interval[1]) else interval[1])
    violated = (figure.high is not None and lo > figure.high) or (figure.low is not None and hi < figure.low)
    met = (figure.high is None or hi <= figure.high) and (figure.low is None or lo >= figure.low)
    return violated or met


def _describe(summary: LevelSummary, goal: PrecisionGoal) -> str:
    parts = []
    for figure in goal.figures:
        state, relative = figure_state(summary, figure)
        shown = f"+-{relative:.2%}" if relative is not None else "+-?"
        parts.append(f"{figure.metric} {shown} ({state}, target +-{figure.target_rel_ci:.2%})")
    return ", ".join(parts) or "no figure"


def stop_rule(
    summary: LevelSummary,
    goal: PrecisionGoal,
    elapsed_s: float,
    sent: int,
    should_stop: StopHook | None = None,
    next_look_s: float | None = None,
) -> Stop | None:
    """Continue (None) or stop, with the reason (module docstring), for a level whose
    records so far give `summary`, after `sent` requests and `elapsed_s` seconds on the
    clock of `goal.cap_s`; `next_look_s` is how long until the next look (default
    `goal.check_every_s`). Pure, apart from calling `should_stop`."""
    if sent < goal.min_requests:
        return None
    if summary.failed_reason:
        return Stop("failed", summary.failed_reason)
    if should_stop is not None:
        why = should_stop(summary)
        if why:
            return Stop("external", str(why))
    states = [figure_state(summary, f)[0] for f in goal.figures]
    if sent >= goal.stream_requests and all(state in ("precise", "settled", "unmeasurable") for state in states):
        return Stop("target", _describe(summary, goal))
    if sent >= goal.max_requests:
        return Stop("ceiling", f"{sent} requests sent (ceiling {goal.max_requests}): {_describe(summary, goal)}")
    look = next_look_s if next_look_s is not None else goal.check_every_s
    if elapsed_s + look + drain_seconds(summary) > goal.cap_s:
        return Stop("cap", f"{elapsed_s:.1f} s of {goal.cap_s:.1f} s measured: {_describe(summary, goal)}")
    return None


def drain_seconds(summary: LevelSummary) -> float:
    """How long the requests in flight take to finish once the level stops sending: about
    one median request latency (0 while none finished). The cap counts it, so a level's
    measuring, drain included, stays within its cap."""
    latency = summary.e2e_ms_p50 / 1000.0
    return latency if math.isfinite(latency) and latency > 0 else 0.0


@dataclass
class _Controller:
    """The runner's `extend` callback: consults `stop_rule`, at most every check_every_s."""

    goal: PrecisionGoal
    concurrency: int
    origin: float
    should_stop: StopHook | None = None
    stop: Stop | None = None
    checks: int = 0
    last_check: float | None = None
    elapsed_s: float = 0.0
    spacing_s: float = 0.0  # until the next look (`MAX_BLIND_SHARE`)

    def __call__(self, sent: int, records: Sequence[RequestRecord]) -> bool:
        if self.stop is not None:
            return False
        now = time.monotonic()
        if self.last_check is not None and now - self.last_check < self.spacing_s:
            return True
        self.last_check = now
        self.checks += 1
        self.elapsed_s = now - self.origin
        measured = tuple(r for r in records if not r.warmup)
        summary = summarize(
            LevelResult(measured, 0.0, self.concurrency), max_error_rate=self.goal.max_error_rate, intervals=self.goal.metrics
        )
        self.spacing_s = max(self.goal.check_every_s, (time.monotonic() - now) / MAX_BLIND_SHARE)
        self.stop = stop_rule(summary, self.goal, self.elapsed_s, sent, self.should_stop, next_look_s=self.spacing_s)
        return self.stop is None


@dataclass(frozen=True)
class PreciseResult:
    result: LevelResult
    summary: LevelSummary  # of the whole run, with stop_reason and precision filled in
    stop: Stop


def precision_info(
    summary: LevelSummary, goal: PrecisionGoal, stop: Stop, *, elapsed_s: float, checks: int, sent: int
) -> dict[str, Any]:
    """What `LevelSummary.precision` holds for a level the loop measured."""
    rel: dict[str, float | None] = {}
    states: dict[str, str] = {}
    for figure in goal.figures:
        states[figure.metric], rel[figure.metric] = figure_state(summary, figure)
    return {
        "stop": stop.reason,
        "detail": stop.detail,
        "targets": {f.metric: f.target_rel_ci for f in goal.figures},
        "rel_ci": rel,
        "states": states,
        "min_requests": goal.min_requests,
        "max_requests": goal.max_requests,
        "sent": sent,
        "cap_s": round(goal.cap_s, 3),
        "elapsed_s": round(elapsed_s, 3),
        "checks": checks,
    }


async def run_level_precise_with(
    client: BenchClient,
    plan: LevelPlan,
    goal: PrecisionGoal,
    *,
    origin: float | None = None,
    should_stop: StopHook | None = None,
    on_progress: ProgressCallback | None = None,
) -> PreciseResult:
    """Run `plan` through an open client as one open-ended level (the precision loop,
    module docstring). `goal.min_requests` replaces the plan's request count as the
    floor; `origin` is the `time.monotonic()` reading the cap counts from (default: now,
    so the cap is this level's own time)."""
    origin = time.monotonic() if origin is None else origin
    stats.preload()
    floor_plan = dataclasses.replace(plan, num_requests=goal.min_requests, duration_s=None)
    controller = _Controller(goal, plan.concurrency, origin, should_stop)
    result = await run_level_with(client, floor_plan, on_progress=on_progress, extend=controller, max_requests=goal.max_requests)
    summary = summarize(result, max_error_rate=goal.max_error_rate)
    sent = int(result.metadata.get("sent", len(result.measured)))
    stop = controller.stop
    if stop is None:
        if summary.failed_reason:
            stop = Stop("failed", summary.failed_reason)
        elif sent >= goal.max_requests:
            stop = Stop("ceiling", f"{sent} requests sent (ceiling {goal.max_requests}): {_describe(summary, goal)}")
        else:
            stop = Stop("failed", "the level stopped sending after consecutive failed requests")
    elapsed = time.monotonic() - origin
    info = precision_info(summary, goal, stop, elapsed_s=elapsed, checks=controller.checks, sent=sent)
    summary = dataclasses.replace(summary, stop_reason=stop.reason, precision=info)
    return PreciseResult(result, summary, stop)


async def run_level_precise(
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    goal: PrecisionGoal,
    *,
    model: str | None = None,
    timeout_s: float = 600,
    transport: httpx.AsyncBaseTransport | None = None,
    should_stop: StopHook | None = None,
    on_progress: ProgressCallback | None = None,
) -> PreciseResult:
    """`run_level`, open-ended until `goal` says stop (the cap counts from now)."""
    async with BenchClient(base_url, workload, model=model, timeout_s=timeout_s, transport=transport) as client:
        await client.resolve_model()
        return await run_level_precise_with(client, plan, goal, should_stop=should_stop, on_progress=on_progress)


# ------------------------------------------------------------------ repeat runs


@dataclass(frozen=True)
class AdaptiveSettings:
    """When to stop repeating a level."""

    metrics: tuple[str, ...] = ("output_tok_s", "agg_output_tok_s")
    target_rel_half_width: float = 0.02
    min_repeats: int = 2
    max_repeats: int = 6
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE

    def __post_init__(self) -> None:
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise ConfigError(f"unknown metric(s) {', '.join(unknown)} for adaptive mode; use names from METRICS")
        if self.target_rel_half_width <= 0:
            raise ConfigError("target_rel_half_width must be positive; e.g. 0.02 for +-2%")
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise ConfigError(f"need 1 <= min_repeats ({self.min_repeats}) <= max_repeats ({self.max_repeats}); fix the bounds")


@dataclass(frozen=True)
class AdaptiveResult:
    results: tuple[LevelResult, ...]
    summary: LevelSummary
    converged: bool
    reason: str


def precision_verdict(summary: LevelSummary, settings: AdaptiveSettings) -> tuple[bool, str]:
    """(precise enough?, explanation) for a summary of the runs so far."""
    parts: list[str] = []
    precise = True
    for name in settings.metrics:
        value = metric_value(summary, name)
        half = metric_uncertainty(summary, name)
        if half is None or math.isnan(value) or value == 0:
            parts.append(f"{name} interval unknown")
            precise = False
            continue
        relative = half / abs(value)
        parts.append(f"{name} +-{relative:.2%}")
        precise = precise and relative <= settings.target_rel_half_width
    return precise, ", ".join(parts) + f" (target +-{settings.target_rel_half_width:.2%})"


async def run_level_adaptive_with(
    client: BenchClient,
    plan: LevelPlan,
    settings: AdaptiveSettings = AdaptiveSettings(),
    *,
    on_progress: ProgressCallback | None = None,
) -> AdaptiveResult:
    """Repeat `plan` through an open client until precise enough or capped."""
    runs: list[LevelResult] = []
    summary: LevelSummary | None = None
    for repeat in range(settings.max_repeats):
        run_plan = plan if repeat == 0 else dataclasses.replace(plan, warmup_requests=0)
        runs.append(await run_level_with(client, run_plan, on_progress=on_progress))
        summary = summarize_repeats(runs, max_error_rate=settings.max_error_rate)
        if summary.failed_reason:
            return AdaptiveResult(tuple(runs), summary, False, f"level failed: {summary.failed_reason}")
        if len(runs) >= settings.min_repeats:
            precise, why = precision_verdict(summary, settings)
            if precise:
                return AdaptiveResult(tuple(runs), summary, True, f"{len(runs)} runs: {why}")
    assert summary is not None
    _, why = precision_verdict(summary, settings)
    return AdaptiveResult(tuple(runs), summary, False, f"cap of {settings.max_repeats} runs reached: {why}")


async def run_level_adaptive(
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    settings: AdaptiveSettings = AdaptiveSettings(),
    *,
    model: str | None = None,
    timeout_s: float = 600,
    transport: httpx.AsyncBaseTransport | None = None,
    on_progress: ProgressCallback | None = None,
) -> AdaptiveResult:
    """`run_level`, repeated until the intervals of `settings.metrics` are narrow enough."""
    async with BenchClient(base_url, workload, model=model, timeout_s=timeout_s, transport=transport) as client:
        await client.resolve_model()
        return await run_level_adaptive_with(client, plan, settings, on_progress=on_progress)
