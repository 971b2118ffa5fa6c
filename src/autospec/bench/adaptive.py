"""Adaptive measurement: repeat a level until its 95% intervals are narrow enough.

Each repeat is one closed-loop run of the level's plan (warmup only before the
first). After every repeat from `min_repeats` on, the runs are summarised together
(`autospec.metrics.summarize_repeats`: Student-t intervals across runs) and the
loop stops when, for every metric in `metrics`, the interval's half-width is at
most `target_rel_half_width` of the value, or when `max_repeats` runs were made,
or when the level failed (error share above the threshold).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import httpx

from autospec.bench.client import BenchClient
from autospec.bench.records import LevelResult
from autospec.bench.runner import LevelPlan, ProgressCallback, run_level_with
from autospec.bench.workloads import Workload
from autospec.errors import ConfigError
from autospec.metrics import (
    DEFAULT_MAX_ERROR_RATE,
    METRICS,
    LevelSummary,
    metric_uncertainty,
    metric_value,
    summarize_repeats,
)


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
            raise ConfigError(
                f"need 1 <= min_repeats ({self.min_repeats}) <= max_repeats ({self.max_repeats}); fix the bounds"
            )


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
    async with BenchClient(
        base_url, workload, model=model, timeout_s=timeout_s, transport=transport
    ) as client:
        await client.resolve_model()
        return await run_level_adaptive_with(client, plan, settings, on_progress=on_progress)
