"""The capacity of one configuration under latency bounds, on one warm server.

`measure_capacity` starts the server once (through the `Launcher`, as a trial does),
measures closed-loop levels that `CapacitySearch` chooses (doubling, then bisection;
`autospec.metrics.capacity`) with the study's workload, and stops the server whatever
happens. Each level sends `waves` x C requests (at least `min_requests`) after
`warmup_waves` x C warmup requests, so that the first batch at a new size (kernel
compilation, graph capture) does not count. The result is plain JSON-ready data, which
`autospec capacity` saves and `autospec.report.capacity` plots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.bench import BenchClient, LevelPlan, Workload, run_level_with
from autospec.launcher import Launcher, LaunchRequest
from autospec.metrics import summarize
from autospec.metrics.capacity import CapacitySearch, SloBound, broken_bounds

__all__ = ["CapacityPlan", "CapacityPoint", "CapacityCurve", "measure_capacity"]


@dataclass(frozen=True)
class CapacityPlan:
    """What to search: the bounds, the levels' range, and how long each level runs."""

    bounds: tuple[SloBound, ...]
    start: int = 1
    limit: int = 256
    waves: int = 4
    min_requests: int = 16
    warmup_waves: int = 1
    max_error_rate: float = 0.05
    request_timeout_s: float = 600.0

    def level(self, concurrency: int) -> LevelPlan:
        return LevelPlan(
            concurrency=concurrency,
            num_requests=max(self.min_requests, self.waves * concurrency),
            warmup_requests=self.warmup_waves * concurrency,
        )


@dataclass(frozen=True)
class CapacityPoint:
    """One measured level: its summary (`LevelSummary.as_dict`) and what it broke."""

    concurrency: int
    summary: dict[str, Any]
    broken: tuple[str, ...]

    @property
    def holds(self) -> bool:
        return not self.broken

    def as_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "holds": self.holds, "broken": list(self.broken), "summary": self.summary}


@dataclass
class CapacityCurve:
    """Every measured level in concurrency order, the capacity (highest level that held
    below the first that broke; None when none held) and the first level that broke
    (None: every level up to the limit held)."""

    bounds: tuple[SloBound, ...]
    points: list[CapacityPoint] = field(default_factory=list)
    capacity: int | None = None
    first_broken: int | None = None
    server: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "bounds": [{"metric": b.metric, "max": b.max} for b in self.bounds],
            "capacity": self.capacity,
            "first_broken": self.first_broken,
            "points": [p.as_dict() for p in sorted(self.points, key=lambda p: p.concurrency)],
            "server": self.server,
        }


async def _search(
    url: str,
    workload: Workload,
    plan: CapacityPlan,
    on_level: Callable[[CapacityPoint], None],
    check_alive: Callable[[], None],
) -> CapacityCurve:
    search = CapacitySearch(plan.start, plan.limit)
    curve = CapacityCurve(plan.bounds)
    async with BenchClient(url, workload, timeout_s=plan.request_timeout_s) as client:
        await client.resolve_model()
        level = search.next()
        while level is not None:
            result = await run_level_with(client, plan.level(level))
            summary = summarize(result, max_error_rate=plan.max_error_rate).as_dict()
            point = CapacityPoint(level, summary, tuple(broken_bounds(summary, plan.bounds)))
            curve.points.append(point)
            search.record(level, point.holds)
            on_level(point)
            check_alive()  # a server that died under load raises its LaunchError here
            level = search.next()
    curve.capacity, curve.first_broken = search.capacity, search.first_broken
    return curve


def measure_capacity(
    launcher: Launcher,
    request: LaunchRequest,
    workload: Workload,
    plan: CapacityPlan,
    on_level: Callable[[CapacityPoint], None] = lambda point: None,
    on_ready: Callable[[Sequence[str]], None] = lambda argv: None,
) -> CapacityCurve:
    """Start `request`'s server once, search its capacity (see the module docstring),
    stop it. A server that does not start raises the launcher's `LaunchError`."""
    server = launcher.start(request)
    try:
        on_ready(list(server.argv))
        curve = asyncio.run(_search(server.url, workload, plan, on_level, server.check_alive))
        curve.server = {"argv": list(server.argv), "startup": server.startup.as_dict(), "log_path": str(request.log_path)}
        return curve
    finally:
        server.stop()
