"""The capacity of one configuration under latency bounds, on one warm server.

`measure_capacity` starts the server once (through the `Launcher`, as a trial does),
measures closed-loop levels that `CapacitySearch` chooses (doubling, then bisection;
`autospec.metrics.capacity`) with the study's workload, and stops the server whatever
happens. Each level sends `waves` x C requests (at least `min_requests`) after
`warmup_waves` x C warmup requests, so that the first batch at a new size (kernel
compilation, graph capture) does not count. The result is plain JSON-ready data, which
`autospec capacity` saves and `autospec.report.capacity` plots.

A search may end early (`CapacityCurve.stopped`): at the `CapacityStop` deadline (the
level in flight is cancelled, not counted) or when `CapacityStop.request` is called (from
a signal handler: the level in flight is cancelled). The levels finished until then are
kept, and `on_level` has seen each of them with the curve as it stood.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.bench import BenchClient, LevelPlan, Workload, run_level_with
from autospec.launcher import Launcher, LaunchRequest
from autospec.metrics import summarize
from autospec.metrics.capacity import CapacitySearch, SloBound, broken_bounds

__all__ = ["CapacityPlan", "CapacityPoint", "CapacityCurve", "CapacityStop", "measure_capacity"]


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
    stopped: str | None = None  # why the search ended before its last level ("timeout", "SIGTERM", ...)

    def as_dict(self) -> dict[str, Any]:
        return {
            "bounds": [{"metric": b.metric, "max": b.max} for b in self.bounds],
            "capacity": self.capacity,
            "first_broken": self.first_broken,
            "stopped": self.stopped,
            "points": [p.as_dict() for p in sorted(self.points, key=lambda p: p.concurrency)],
            "server": self.server,
        }


class CapacityStop:
    """When a search stops early: a `deadline` (`time.monotonic()` seconds; None: none) and a
    stop request, which `request` makes (safe from a signal handler on the main thread: it
    only schedules the cancellation of the level in flight on the search's event loop)."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.reason: str | None = None
        self._cancel: Callable[[], None] | None = None

    @property
    def searching(self) -> bool:
        """A search is running: `request` cancels its level in flight."""
        return self._cancel is not None

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason
        if self._cancel is not None:
            self._cancel()

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


async def _search(
    url: str,
    workload: Workload,
    plan: CapacityPlan,
    on_level: Callable[[CapacityPoint, CapacityCurve], None],
    check_alive: Callable[[], None],
    stop: CapacityStop,
) -> CapacityCurve:
    """The search on a warm server at `url`; a stop request or the deadline ends it early
    with the levels finished so far (`CapacityCurve.stopped` says why)."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        loop.call_soon_threadsafe(task.cancel)

    stop._cancel = cancel
    curve = CapacityCurve(plan.bounds)
    try:
        await _levels(url, workload, plan, on_level, check_alive, stop, curve)
    except asyncio.CancelledError:
        curve.stopped = stop.reason or "cancelled"
    finally:
        stop._cancel = None
    return curve


async def _levels(
    url: str,
    workload: Workload,
    plan: CapacityPlan,
    on_level: Callable[[CapacityPoint, CapacityCurve], None],
    check_alive: Callable[[], None],
    stop: CapacityStop,
    curve: CapacityCurve,
) -> None:
    search = CapacitySearch(plan.start, plan.limit)
    async with BenchClient(url, workload, timeout_s=plan.request_timeout_s) as client:
        await client.resolve_model()
        level = search.next()
        while level is not None:
            if stop.reason is not None:  # asked before the search could be cancelled
                curve.stopped = stop.reason
                return
            remaining = stop.remaining_s()
            if remaining is not None and remaining <= 0:
                curve.stopped = "timeout"
                return
            try:
                result = await asyncio.wait_for(run_level_with(client, plan.level(level)), timeout=remaining)
            except asyncio.TimeoutError:
                curve.stopped = "timeout"
                return
            summary = summarize(result, max_error_rate=plan.max_error_rate).as_dict()
            point = CapacityPoint(level, summary, tuple(broken_bounds(summary, plan.bounds)))
            curve.points.append(point)
            search.record(level, point.holds)
            curve.capacity, curve.first_broken = search.capacity, search.first_broken
            on_level(point, curve)
            check_alive()  # a server that died under load raises its LaunchError here
            level = search.next()


def measure_capacity(
    launcher: Launcher,
    request: LaunchRequest,
    workload: Workload,
    plan: CapacityPlan,
    on_level: Callable[[CapacityPoint, CapacityCurve], None] = lambda point, curve: None,
    on_ready: Callable[[Sequence[str]], None] = lambda argv: None,
    stop: CapacityStop | None = None,
) -> CapacityCurve:
    """Start `request`'s server once, search its capacity (see the module docstring),
    stop it. A server that does not start raises the launcher's `LaunchError`; a stop
    requested while it starts skips the search (`CapacityCurve.stopped`)."""
    stop = stop or CapacityStop()
    server = launcher.start(request)
    try:
        on_ready(list(server.argv))
        if stop.reason is not None:
            curve = CapacityCurve(plan.bounds, stopped=stop.reason)
        else:
            curve = asyncio.run(_search(server.url, workload, plan, on_level, server.check_alive, stop))
        curve.server = {"argv": list(server.argv), "startup": server.startup.as_dict(), "log_path": str(request.log_path)}
        return curve
    finally:
        server.stop()
