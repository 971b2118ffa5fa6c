"""A steady window too short for batch means still has an honest interval.

The records come from a small step-level model of a closed-loop server (seeded): each
step either prefills every waiting request (its first token) or decodes one step of
every running request (1-4 accepted tokens, the same for the whole batch), with a
per-step duration jitter; so the requests of a wave stay in lockstep and share all of
their noise, which the per-request bootstrap cannot see."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autospec.bench.records import LevelResult, RequestRecord
from autospec.metrics import steady_window, summarize
from autospec.metrics.steady import PRECISE_SLICES

CONCURRENCY = 8
OUTPUT_LEN = 64
STEP_S = 0.02
PREFILL_S = 0.05


def closed_loop(requests: int, seed: int, step_sigma: float = 0.15) -> list[RequestRecord]:
    """`requests` requests of OUTPUT_LEN tokens at CONCURRENCY, sent as others finish."""
    rng = random.Random(seed)
    t, sent = 0.0, 0
    waiting: list[float] = []  # send times
    running: list[dict] = []
    done: list[RequestRecord] = []
    while sent < CONCURRENCY:
        waiting.append(t)
        sent += 1
    while waiting or running:
        if waiting:
            t += PREFILL_S * math.exp(rng.gauss(0.0, step_sigma))
            running += [{"sent": s, "times": [t], "tokens": [1]} for s in waiting]
            waiting = []
            continue
        t += STEP_S * math.exp(rng.gauss(0.0, step_sigma))
        accepted = rng.randint(1, 4)
        for r in list(running):
            k = min(accepted, OUTPUT_LEN - sum(r["tokens"]))
            r["times"].append(t)
            r["tokens"].append(k)
            if sum(r["tokens"]) >= OUTPUT_LEN:
                running.remove(r)
                done.append(_record(r))
                if sent < requests:
                    waiting.append(t)
                    sent += 1
    return done


def _record(r: dict) -> RequestRecord:
    return RequestRecord(
        ok=True,
        error_kind=None,
        t_sent=r["sent"],
        t_first=r["times"][0],
        t_done=r["times"][-1],
        chunk_times=tuple(r["times"]),
        chunk_tokens=tuple(r["tokens"]),
        completion_tokens=sum(r["tokens"]),
    )


def _level(records: list[RequestRecord]) -> LevelResult:
    return LevelResult(records=tuple(records), wall_s=0.0, concurrency=CONCURRENCY)


@pytest.fixture(scope="module")
def long_run_rate() -> float:
    """The steady rate of many long runs (what a short window estimates)."""
    rates = [steady_window(closed_loop(CONCURRENCY * 80, seed=1000 + s), CONCURRENCY).rate for s in range(4)]
    return float(np.mean(rates))


def test_two_waves_give_a_short_window_interval_that_covers_the_steady_rate(long_run_rate: float) -> None:
    covered, estimates, halves = 0, [], []
    runs = 40
    for seed in range(runs):
        s = summarize(_level(closed_loop(2 * CONCURRENCY, seed)))
        lo, hi = s.agg_output_tok_s_ci
        assert math.isfinite(lo) and math.isfinite(hi) and lo < s.agg_output_tok_s < hi
        assert s.agg_ci_method == "short-window" and s.steady_slices < 3
        covered += lo <= long_run_rate <= hi
        estimates.append(s.agg_output_tok_s)
        halves.append((hi - lo) / 2)
    assert covered >= 0.9 * runs  # a 95% interval, erring wide rather than narrow
    # ... but not uselessly wide: within a few times the actual scatter of two-wave figures
    assert np.mean(halves) < 4 * 1.96 * np.std(estimates)


def test_the_per_request_bootstrap_alone_would_be_too_narrow(long_run_rate: float) -> None:
    """What the short-window interval adds: the jitter every request shares."""
    from autospec.metrics.steady import _relative_interval, _TokenCurves

    covered = 0
    runs = 40
    for seed in range(runs):
        records = closed_loop(2 * CONCURRENCY, seed)
        w = steady_window(records, CONCURRENCY)
        curves = _TokenCurves(records)
        tokens = curves.between(w.start, w.end)
        streamed = np.array([max(0.0, min(r.t_done, w.end) - max(r.t_first, w.start)) for r in records])
        inside = streamed > 0
        lo, hi = _relative_interval(tokens[inside], streamed[inside], w.rate)
        covered += lo <= long_run_rate <= hi
    assert covered < 0.8 * runs


def test_a_long_window_uses_batch_means_and_only_it_may_count_as_precise() -> None:
    long = summarize(_level(closed_loop(CONCURRENCY * 40, seed=7)))
    assert long.agg_ci_method == "batch-means" and long.steady_slices >= PRECISE_SLICES
    short = summarize(_level(closed_loop(CONCURRENCY * 6, seed=7)))
    assert short.agg_ci_method == "batch-means" and 3 <= short.steady_slices < PRECISE_SLICES
