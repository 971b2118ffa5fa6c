"""Per-position figures of one level, keyed so that two launches pair (pure).

Every launch of a study sends the same requests at a level in the same order
(`autospec.request_records.request_id`), so a figure per request, or per wave of C
requests, can be matched across launches: what a prompt or a position does to the speed
(NGRAM's cache climbs over a launch; a long prompt is slower) repeats in every launch and
cancels in a paired comparison (`autospec.metrics.paired`).

    request_speeds  each successful measured request's output tok/s (completion_tokens /
                    (t_done - t_sent)), keyed by its request id. At C > 1 it is the
                    request's speed under the closed loop's load, and only a level of at
                    least MIN_REQUEST_WAVES x C requests keeps it, without its first C
                    positions (sent at once: the ramp) and its last C (they finish as the
                    batch drains, faster: SGLang 0.5.16 on an H100, 2026-12-06, a C=32
                    level's last 32 positions read 9-16% above its other ones in 6 of 9
                    launches). What is left runs at the steady load the aggregate measures;
                    over a shorter level the ramp and the drain are most of it. Comparisons
                    pair C > 1 by wave still (`autospec.records.launches.level_series`)
    wave_speeds     C > 1: per wave (the C requests sent at positions w*C .. w*C + C - 1),
                    C x sum(completion tokens) / sum(request latency), the closed loop's
                    aggregate over that wave (Little's law), keyed by the wave's number;
                    a wave with a failed or missing request is left out

Values keep `DIGITS` significant digits (the series are stored with the trial). Records
without a request id (written before ids existed) give no series.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench sits above metrics; only its record types are read here
    from autospec.request_records import RequestRecord

__all__ = ["DIGITS", "MIN_REQUEST_WAVES", "request_speeds", "wave_speeds"]

DIGITS = 5
#: at C > 1, a level keeps request speeds only from this many waves' worth of requests on
MIN_REQUEST_WAVES = 4


def _round(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def _latency(r: RequestRecord) -> float:
    return (r.t_done if r.t_done is not None else r.t_sent) - r.t_sent


def request_speeds(records: Sequence[RequestRecord], concurrency: int = 1) -> dict[str, float]:
    """Request id -> output tok/s of each successful measured request that has an id; at
    `concurrency` > 1 only the steady positions of a long enough level (module docstring)."""
    measured = [r for r in records if not r.warmup]
    n, c = len(measured), concurrency
    if c > 1 and n < MIN_REQUEST_WAVES * c:
        return {}
    out: dict[str, float] = {}
    for r in measured:
        if not (r.ok and r.request_id is not None and r.completion_tokens > 0 and _latency(r) > 0):
            continue
        if c > 1 and (r.position is None or r.position < c or r.position >= n - c):
            continue
        out[r.request_id] = _round(r.completion_tokens / _latency(r))
    return out


def wave_speeds(records: Sequence[RequestRecord], concurrency: int) -> dict[str, float]:
    """Wave number -> the wave's aggregate tok/s (module docstring), complete waves only."""
    waves: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if not r.warmup and r.position is not None and r.request_id is not None:
            waves[r.position // concurrency].append(r)
    out: dict[str, float] = {}
    for wave, members in sorted(waves.items()):
        if len(members) != concurrency or not all(r.ok for r in members):
            continue
        latency = sum(_latency(r) for r in members)
        if latency > 0:
            out[str(wave)] = _round(concurrency * sum(r.completion_tokens for r in members) / latency)
    return out
