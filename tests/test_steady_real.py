"""Two C=32 levels measured on real SGLang 0.5.16 on an H200, replayed through the steady
window (tests/fixtures/real_c32_fresh_and_warm.json.gz, the fixture's "about" says how they
were measured): a new server pauses again and again while it meets batch shapes for the
first time, so nothing is left out as a one-off stall and the interval says how uneven
the level was; the same server, warm, reads higher and narrower."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import numpy as np

from autospec.bench.records import RequestRecord
from autospec.metrics.steady import STALL_SHARE, SteadyWindow, _TokenCurves, steady_window

FIXTURE = Path(__file__).parent / "fixtures" / "real_c32_fresh_and_warm.json.gz"


@cache
def records(name: str) -> tuple[RequestRecord, ...]:
    rows = json.loads(gzip.decompress(FIXTURE.read_bytes()))[name]
    return tuple(
        RequestRecord(
            ok=True, error_kind=None, t_sent=sent, t_first=first, t_done=done, chunk_times=(first, done), completion_tokens=tokens
        )
        for sent, first, done, tokens in rows
    )


def window(name: str) -> SteadyWindow:
    w = steady_window(records(name), 32)
    assert w is not None
    return w


def relative_half_width(w: SteadyWindow) -> float:
    return (w.interval[1] - w.interval[0]) / 2 / w.rate


def stalled_seconds(name: str, slice_s: float = 0.25) -> np.ndarray:
    """Where (seconds into the window) slices delivered under STALL_SHARE of the median."""
    w = window(name)
    edges = np.arange(w.start, w.end, slice_s)
    delivered = np.diff(_TokenCurves(records(name)).total_upto(edges))
    return edges[:-1][delivered < STALL_SHARE * np.median(delivered)] - w.start


def test_a_new_servers_recurring_stalls_stay_in_its_window() -> None:
    fresh = window("fresh")
    stalls = stalled_seconds("fresh")
    assert len(stalls) >= 10 and stalls.min() < 10 and stalls.max() > 50  # from the start to the end of 75 s
    assert fresh.transient_s == 0.0 and fresh.share > 0.95
    assert relative_half_width(fresh) > 0.05


def test_the_same_server_warm_reads_higher_and_narrower() -> None:
    fresh, warm = window("fresh"), window("warm")
    assert warm.rate > 1.04 * fresh.rate
    assert relative_half_width(warm) < 0.04 and relative_half_width(warm) < relative_half_width(fresh) / 2


def test_one_wave_windows_of_a_real_level_get_intervals_that_hold_its_rate() -> None:
    """Every stretch of one wave of the real levels, taken as a short window: its interval
    (sub-wave slices, their plain spread where a slice stalled, with the per-request
    bootstrap) holds the stretches' mean rate in at least 90% of them, where the
    bootstrap alone holds it in fewer than half (a fresh server stalls again and again)."""
    from autospec.metrics.steady import _cycle, _relative_interval, _short_window_interval

    for name in ("fresh", "warm"):
        recs = records(name)
        w, cycle, curves = window(name), _cycle(recs), _TokenCurves(recs)
        first = np.array([r.t_first for r in recs])
        done = np.array([r.t_done for r in recs])
        rates, intervals, boots = [], [], []
        for a in np.arange(w.start, w.end - cycle, cycle):
            b = a + cycle
            tokens = curves.between(a, b)
            streamed = np.clip(np.minimum(done, b) - np.maximum(first, a), 0.0, None)
            rate = float(tokens.sum()) / cycle
            boot = _relative_interval(tokens[streamed > 0], streamed[streamed > 0], rate)
            rates.append(rate)
            boots.append(boot)
            intervals.append(_short_window_interval(curves, a, b, boot, rate))
        mean = float(np.mean(rates))
        held = [lo <= mean <= hi for lo, hi in intervals]
        assert all(np.isfinite(x) for interval in intervals for x in interval)
        assert sum(held) >= 0.9 * len(held), name
        if name == "fresh":
            assert sum(lo <= mean <= hi for lo, hi in boots) < 0.5 * len(boots)
