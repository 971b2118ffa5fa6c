"""The capacity of one configuration under latency bounds (pure).

`autospec capacity` steps the concurrency of one warm server up and asks, at each level,
whether the user's bounds hold (`broken_bounds` on the level's summary); `CapacitySearch`
chooses the levels: doubling from ``start`` until a level breaks a bound or ``limit`` is
reached, then bisection between the highest level that held and the lowest that broke,
until they are neighbours. The capacity is the highest level that held; when a level
broke, capacity + 1 is a measured level that broke (the bisection ends only there).

The search assumes a bound that breaks at C keeps breaking above C (latency percentiles
grow with the load); levels are never measured twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SloBound", "broken_bounds", "CapacitySearch"]


@dataclass(frozen=True)
class SloBound:
    """`metric` (a field of a level summary, e.g. ``ttft_ms_p99``) must not exceed `max`."""

    metric: str
    max: float

    def describe(self) -> str:
        return f"{self.metric} <= {self.max:g}"

    def problem(self, summary: Mapping[str, Any]) -> str | None:
        """Why `summary` (`LevelSummary.as_dict`) breaks this bound, or None when it holds."""
        value = summary.get(self.metric)
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{self.metric} not measured"
        if value > self.max:
            return f"{self.metric} {value:.1f} > {self.max:g}"
        return None


def broken_bounds(summary: Mapping[str, Any], bounds: Sequence[SloBound]) -> list[str]:
    """Every reason the level in `summary` does not hold: a failed level (too many request
    errors), then each bound it breaks; empty when every bound holds."""
    reasons = []
    failed = summary.get("failed_reason")
    if failed:
        reasons.append(f"level failed: {failed}")
    reasons += [p for p in (b.problem(summary) for b in bounds) if p is not None]
    return reasons


@dataclass
class CapacitySearch:
    """The levels to measure (see the module docstring). Call `next()` for the next level
    (None: done), measure it, then `record(level, holds)`."""

    start: int = 1
    limit: int = 256
    results: dict[int, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 1 <= self.start <= self.limit:
            raise ValueError(f"start {self.start} must be within 1..limit {self.limit}")

    def record(self, level: int, holds: bool) -> None:
        self.results[level] = holds

    @property
    def capacity(self) -> int | None:
        """The highest level that held below the lowest that broke; None when none held."""
        broke = self.first_broken
        held = [c for c, ok in self.results.items() if ok and (broke is None or c < broke)]
        return max(held) if held else None

    @property
    def first_broken(self) -> int | None:
        broken = [c for c, ok in self.results.items() if not ok]
        return min(broken) if broken else None

    def next(self) -> int | None:
        if not self.results:
            return self.start
        held, broke = self.capacity, self.first_broken
        if broke is None:
            assert held is not None
            return None if held >= self.limit else min(2 * held, self.limit)
        low = held if held is not None else 0
        return None if broke - low <= 1 else (low + broke) // 2
