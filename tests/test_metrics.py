from __future__ import annotations

import json
import math

import pytest

from autospec.bench.records import LevelResult, RequestRecord
from autospec.metrics import (
    METRIC_DIRECTIONS,
    METRICS,
    metric_direction,
    metric_uncertainty,
    metric_value,
    steady_window,
    summarize,
    summarize_repeats,
    with_accept_length,
)
from autospec.metrics.stats import bootstrap_ratio_ci, half_width, quantile_interval, t_interval, t_quantile
from autospec.metrics.steady import tokens_between


def ok(t_sent, chunks, *, verify=None, warmup=False, prompt_tokens=10, counts=True) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    tokens = tuple(n for _, n in chunks)
    return RequestRecord(
        ok=True,
        error_kind=None,
        t_sent=t_sent,
        t_first=times[0],
        t_done=times[-1],
        chunk_times=times,
        chunk_tokens=tokens if counts else (),
        prompt_tokens=prompt_tokens,
        completion_tokens=sum(tokens),
        spec_verify_ct=verify,
        warmup=warmup,
    )


def failed(t_sent, t_done, kind="timeout") -> RequestRecord:
    return RequestRecord(ok=False, error_kind=kind, t_sent=t_sent, t_first=None, t_done=t_done)


A = ok(0.0, [(0.1, 1), (0.2, 3), (0.3, 2)], verify=2)
B = ok(0.05, [(0.25, 1), (0.45, 1)])
C = failed(0.1, 1.0)
W = ok(-5.0, [(-4.9, 50), (-4.0, 50)], warmup=True)


def level(*records: RequestRecord, concurrency: int = 2) -> LevelResult:
    return LevelResult(records=records, wall_s=9.9, concurrency=concurrency)


def test_definitions_on_hand_computed_records() -> None:
    s = summarize(level(W, A, B, C), max_error_rate=0.5)
    assert s.concurrency == 2 and s.n_requests == 3 and s.n_ok == 2 and s.n_errors == 1
    assert s.errors_by_kind == {"timeout": 1} and s.error_rate == pytest.approx(1 / 3)
    assert s.failed_reason is None
    assert s.output_tok_s == pytest.approx((6 / 0.3 + 2 / 0.4) / 2)  # queueing + TTFT included
    assert s.decode_tok_s == pytest.approx((5 / 0.2 + 1 / 0.2) / 2)  # first chunk left out
    assert s.wall_s == pytest.approx(1.0)  # first sent .. last end, the failed request included
    assert s.agg_output_tok_s_whole == pytest.approx(8 / 1.0)  # failed request: time yes, tokens no
    # Steady window: both first requests streaming (0.25) .. first end after the last send
    # (A at 0.3). Pro rata: half of A's last chunk (2 tokens over 0.2..0.3) and a quarter
    # of B's second (1 token over 0.25..0.45).
    assert s.agg_output_tok_s == pytest.approx((1 + 0.25) / 0.05)
    assert s.steady_window_s == pytest.approx(0.05) and s.steady_share == pytest.approx(0.05) and s.steady_short
    assert s.completion_tokens == 8
    assert s.ttft_ms_p50 == pytest.approx(150) and s.ttft_ms_mean == pytest.approx(150)
    assert s.tpot_ms_mean == pytest.approx((40 + 200) / 2)  # (done - first) / (tokens - 1)
    assert s.itl_ms_p50 == pytest.approx((100 / 3 + 50) / 2)  # per token: 33.3 x3, 50 x2, 200
    assert s.itl_ms_p99 < 200 and s.itl_ms_p90 > 50
    assert s.e2e_ms_p50 == pytest.approx(350)
    assert s.accept_length == pytest.approx(3.0)  # only A reports spec_verify_ct: 6 / 2
    assert s.prompt_tokens_mean == 10


def test_error_share_above_threshold_fails_the_level_with_the_reason() -> None:
    s = summarize(level(A, B, C))
    assert s.failed and s.failed_reason == "1 of 3 requests failed (33.3% > 5.0% allowed): timeout x1"
    none_ok = summarize(level(failed(0, 1, "http_status"), failed(0, 1, "http_status"), C))
    assert none_ok.failed_reason == "no request succeeded (http_status x2, timeout x1)"
    assert math.isnan(none_ok.output_tok_s) and none_ok.completion_tokens == 0
    assert summarize(level()).failed_reason == "no measured request was sent"


def test_unknown_chunk_counts_use_raw_gaps_and_a_one_token_first_chunk() -> None:
    r = ok(0.0, [(0.1, 1), (0.2, 3), (0.4, 2)], counts=False)
    s = summarize(level(r))
    assert s.decode_tok_s == pytest.approx(5 / 0.3)
    assert s.itl_ms_p50 == pytest.approx(150)  # gaps 100 and 200 ms, per chunk


def test_identical_requests_give_zero_width_intervals() -> None:
    recs = [ok(0.0, [(0.1, 1), (0.3, 9)]) for _ in range(6)]
    s = summarize(level(*recs))
    assert s.output_tok_s_ci == pytest.approx((s.output_tok_s, s.output_tok_s))
    # one wave: too short for batch means over time; sub-wave slices of identical requests agree
    assert s.agg_ci_method == "short-window" and s.steady_slices == 0
    assert s.agg_output_tok_s_ci == pytest.approx((s.agg_output_tok_s, s.agg_output_tok_s))
    assert metric_uncertainty(s, "output_tok_s") == pytest.approx(0.0)
    assert metric_uncertainty(s, "tpot_ms_p50") == pytest.approx(0.0)


def test_noisy_requests_give_intervals_around_the_estimate_deterministically() -> None:
    recs = [ok(0.0, [(0.05, 1), (0.2 + 0.03 * (i % 5), 20)]) for i in range(20)]
    s1, s2 = summarize(level(*recs)), summarize(level(*recs))
    assert s1.as_dict() == s2.as_dict()
    lo, hi = s1.output_tok_s_ci
    assert lo < s1.output_tok_s < hi
    assert s1.output_tok_s_std > 0
    assert metric_uncertainty(s1, "itl_ms_p50") is None  # no interval for pooled ITL


def test_single_request_has_no_interval() -> None:
    s = summarize(level(A))
    assert metric_uncertainty(s, "output_tok_s") is None
    assert all(math.isnan(v) for v in s.output_tok_s_ci)


def run_with_speed(tokens: int) -> LevelResult:
    return level(ok(0.0, [(0.5, 1), (1.0, tokens - 1)]), concurrency=1)


def test_repeats_use_a_t_interval_across_runs() -> None:
    s = summarize_repeats([run_with_speed(100), run_with_speed(110), run_with_speed(90)])
    assert s.n_repeats == 3 and s.n_requests == 3
    assert s.output_tok_s == pytest.approx(100)
    half = t_quantile(2) * 10 / math.sqrt(3)
    assert metric_uncertainty(s, "output_tok_s") == pytest.approx(half)
    # Steady window of one request at C=1: first token (0.5 s) .. done (1.0 s), so the
    # runs' aggregates are 2 x (tokens - 1) = 198, 218, 178.
    assert s.agg_output_tok_s == pytest.approx(198)
    assert s.agg_output_tok_s_ci == pytest.approx((198 - 2 * half, 198 + 2 * half))
    assert s.agg_output_tok_s_whole == pytest.approx(300 / 3.0)  # all tokens / all runs' time
    assert summarize_repeats([run_with_speed(100)]).as_dict() == summarize(run_with_speed(100)).as_dict()
    with pytest.raises(ValueError, match="share one concurrency"):
        summarize_repeats([run_with_speed(100), level(A, concurrency=4)])
    with pytest.raises(ValueError, match="at least one"):
        summarize_repeats([])


def test_t_quantile_and_intervals() -> None:
    assert t_quantile(1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(30) == pytest.approx(2.042, abs=1e-3)
    assert all(math.isnan(v) for v in t_interval([1.0]))
    assert half_width((1.0, 3.0)) == 1.0 and half_width((math.nan, 1.0)) is None
    lo, hi = bootstrap_ratio_ci([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0])
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def test_metric_lookup_by_name() -> None:
    s = summarize(level(A, B, C), max_error_rate=0.5)
    assert metric_value(s, "agg_output_tok_s_whole") == pytest.approx(8.0)
    assert metric_value(s, "agg_output_tok_s") == pytest.approx(25.0)
    assert metric_value(s, "error_rate") == pytest.approx(1 / 3)
    assert math.isnan(metric_value(summarize(level(B)), "accept_length"))
    for name in METRICS:
        assert isinstance(metric_value(s, name), float)
        assert METRIC_DIRECTIONS[name] in ("maximize", "minimize")
    assert metric_direction("output_tok_s") == "maximize" and metric_direction("ttft_ms_p99") == "minimize"
    for func in (metric_value, metric_uncertainty):
        with pytest.raises(KeyError, match="unknown metric 'tok_s'"):
            func(s, "tok_s")
    with pytest.raises(KeyError):
        metric_direction("nope")


def test_summary_and_result_are_json_ready() -> None:
    result = level(W, A, B, C)
    json.dumps(summarize(result).as_dict(), allow_nan=False)
    json.dumps(summarize(level(C)).as_dict(), allow_nan=False)
    assert LevelResult.from_dict(json.loads(json.dumps(result.as_dict()))) == result


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"ok": True, "error_kind": "timeout"}, "cannot carry an error_kind"),
        ({"ok": False, "error_kind": "weird"}, "unknown error_kind"),
        ({"ok": False, "error_kind": "timeout", "completion_tokens": 3}, "must not carry completion tokens"),
        ({"ok": True, "error_kind": None, "chunk_times": (1.0,), "chunk_tokens": (1, 2)}, "chunk_tokens"),
    ],
)
def test_record_invariants(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        RequestRecord(t_sent=0.0, t_first=None, t_done=None, **kwargs)


# ------------------------------------------------------------------ steady state


def spread(t_sent: float, t_first: float, t_done: float, tokens: int, *, events: int = 0) -> RequestRecord:
    """A successful request; without `events` no per-event counts (tokens spread evenly
    after the first), with `events` > 0 that many evenly spaced events after the first."""
    if not events:
        return RequestRecord(
            ok=True,
            error_kind=None,
            t_sent=t_sent,
            t_first=t_first,
            t_done=t_done,
            chunk_times=(t_first, t_done),
            completion_tokens=tokens,
        )
    step = (t_done - t_first) / events
    times = (t_first, *(t_first + step * (i + 1) for i in range(events)))
    per = (tokens - 1) // events
    counts = (1, *([per] * (events - 1)), tokens - 1 - per * (events - 1))
    return RequestRecord(
        ok=True,
        error_kind=None,
        t_sent=t_sent,
        t_first=t_first,
        t_done=t_done,
        chunk_times=times,
        chunk_tokens=counts,
        completion_tokens=tokens,
    )


def closed_loop(events: int = 0) -> list[RequestRecord]:
    """C=2, two waves of 11-token requests: 1 s to the first token, 2 s for the other 10.
    The second request of each wave starts streaming 0.5 s after the first (ramp-up),
    and the last wave ends one after the other (drain). In steady state a cycle of 3 s
    serves 2 x 11 tokens: 22 / 3 tok/s."""
    return [
        spread(0.0, 1.0, 3.0, 11, events=events),
        spread(0.0, 1.5, 3.5, 11, events=events),
        spread(3.0, 4.0, 6.0, 11, events=events),
        spread(3.5, 4.5, 6.5, 11, events=events),
    ]


@pytest.mark.parametrize("events", [0, 5, 10])
def test_steady_window_leaves_out_ramp_up_and_drain_exactly(events: int) -> None:
    records = closed_loop(events)
    window = steady_window(records, 2)
    assert window is not None
    # From the moment both first-wave requests stream (1.5 s) to the moment both
    # last-wave requests stream again (4.5 s): one whole cycle of prefill and decode.
    assert (window.start, window.end) == (1.5, 4.5)
    assert window.tokens == pytest.approx(22.0) and window.rate == pytest.approx(22 / 3)
    assert window.share == pytest.approx(3 / 6.5) and window.short
    s = summarize(level(*records, concurrency=2))
    assert s.agg_output_tok_s == pytest.approx(22 / 3)
    assert s.agg_output_tok_s_whole == pytest.approx(44 / 6.5)  # ramp-up and drain included: lower
    assert s.steady_window_s == pytest.approx(3.0) and s.steady_short
    # one cycle: too short for batch means, the interval comes from sub-wave slices
    lo, hi = s.agg_output_tok_s_ci
    assert lo < s.agg_output_tok_s < hi and s.agg_ci_method == "short-window" and s.steady_slices == 1


def test_tokens_straddling_the_window_count_pro_rata() -> None:
    r = spread(0.0, 1.0, 3.0, 11)  # 1 token at 1.0, then 10 evenly over (1, 3]
    assert tokens_between(r, 0.0, 1.0) == pytest.approx(1.0)
    assert tokens_between(r, 1.0, 1.5) == pytest.approx(2.5)
    assert tokens_between(r, 2.5, 9.0) == pytest.approx(2.5)
    assert tokens_between(r, 0.0, 9.0) == pytest.approx(11.0)
    chunks = ok(0.0, [(1.0, 1), (2.0, 4), (3.0, 2)])  # each event's tokens spread since the last
    assert tokens_between(chunks, 1.5, 2.5) == pytest.approx(2.0 + 1.0)
    assert tokens_between(failed(0.0, 2.0), 0.0, 9.0) == 0.0


def test_a_long_run_is_mostly_steady_and_failed_requests_hold_slots_without_tokens() -> None:
    # C=2, ten cycles of 3 s; one request of the fourth cycle fails after 3 s.
    records = []
    for cycle in range(10):
        t = 3.0 * cycle
        records.append(spread(t, t + 1.0, t + 3.0, 11))
        if cycle == 3:
            records.append(failed(t + 0.5, t + 3.5))
        else:
            records.append(spread(t + 0.5, t + 1.5, t + 3.5, 11))
    window = steady_window(records, 2)
    assert window is not None and (window.start, window.end) == (1.5, 28.5)
    assert window.tokens == pytest.approx(9 * 22 - 11)  # nine cycles, one request without tokens
    assert window.share == pytest.approx(27 / 30.5) and not window.short


def waves(cycles: int, slow_every: int = 0) -> list[RequestRecord]:
    """C=2 in lockstep: each cycle both requests get their first token after 1 s and 10
    more over 2 s (3 s cycles); with `slow_every`, every that many cycles wait 4 s for
    their first token (a stall: the requests stream as fast as ever once they start)."""
    records, t = [], 0.0
    for cycle in range(cycles):
        wait = 4.0 if slow_every and cycle % slow_every == 0 else 1.0
        records += [spread(t, t + wait, t + wait + 2.0, 11), spread(t, t + wait, t + wait + 2.0, 11)]
        t += wait + 2.0
    return records


def test_the_aggregate_interval_is_over_slices_of_time_when_waves_are_correlated() -> None:
    steady = summarize(level(*waves(12), concurrency=2))
    lo, hi = steady.agg_output_tok_s_ci
    assert lo <= steady.agg_output_tok_s <= hi and hi - lo < 0.03 * steady.agg_output_tok_s  # identical waves
    # Every third wave stalls before its first token, both requests together. Each request
    # streams as fast as ever, so the per-request bootstrap sees no spread; the batch means
    # over time see the stalls, and widen the interval.
    uneven = summarize(level(*waves(12, slow_every=3), concurrency=2))
    lo, hi = uneven.agg_output_tok_s_ci
    assert lo < uneven.agg_output_tok_s < hi
    window = steady_window(waves(12, slow_every=3), 2)
    tokens, streamed = [], []
    for r in waves(12, slow_every=3):
        inside = max(0.0, min(r.t_done, window.end) - max(r.t_first, window.start))
        if inside > 0:
            tokens.append(tokens_between(r, window.start, window.end))
            streamed.append(inside)
    from autospec.metrics.stats import bootstrap_ratio_ci

    b_lo, b_hi = bootstrap_ratio_ci(tokens, streamed)
    ratio = sum(tokens) / sum(streamed)
    assert (hi - lo) / uneven.agg_output_tok_s > (b_hi - b_lo) / ratio


def waves_with_one_stall(cycles: int, stalled: int, stall_s: float) -> list[RequestRecord]:
    """`waves(cycles)`, except that wave `stalled` waits `stall_s` more for its first token."""
    records, t = [], 0.0
    for cycle in range(cycles):
        wait = 1.0 + (stall_s if cycle == stalled else 0.0)
        records += [spread(t, t + wait, t + wait + 2.0, 11), spread(t, t + wait, t + wait + 2.0, 11)]
        t += wait + 2.0
    return records


def test_a_one_off_stall_early_in_the_level_is_left_out_of_the_steady_window() -> None:
    # 24 waves of 3 s; the third waits 12 s more before its first token (four waves' time).
    records = waves_with_one_stall(24, stalled=2, stall_s=12.0)
    window = steady_window(records, 2)
    assert window is not None and window.transient_s > 12.0
    assert window.start >= 6.0 + 1.0 + 12.0  # after the stalled wave's first token
    assert window.rate == pytest.approx(22 / 3, rel=0.05)  # the rate of the waves that did not stall
    s = summarize(level(*records, concurrency=2))
    assert s.steady_transient_s == pytest.approx(window.transient_s) and not s.steady_short
    assert s.steady_share == pytest.approx((window.seconds + window.transient_s) / window.run_seconds)
    lo, hi = s.agg_output_tok_s_ci
    assert lo <= s.agg_output_tok_s <= hi and (hi - lo) / s.agg_output_tok_s < 0.05
    # The whole run, the stall in it, reads 528 tokens / 84 s: a seventh lower.
    assert s.agg_output_tok_s_whole == pytest.approx(528 / 84) and s.agg_output_tok_s == pytest.approx(22 / 3, rel=0.01)


def test_a_one_off_stall_is_left_out_also_when_a_later_wave_hiccups() -> None:
    # The early stall of four waves' time, and later one wave waits 2.5 s more (a loaded
    # host's hiccup of about one slice): the hiccup stays in the window, the stall does not.
    records, t = [], 0.0
    for cycle in range(24):
        wait = 1.0 + {2: 12.0, 18: 2.5}.get(cycle, 0.0)
        records += [spread(t, t + wait, t + wait + 2.0, 11), spread(t, t + wait, t + wait + 2.0, 11)]
        t += wait + 2.0
    window = steady_window(records, 2)
    assert window is not None and window.transient_s > 12.0
    assert window.start >= 6.0 + 1.0 + 12.0 and window.end > 18 * 3.0 + 12.0 + 2.5


@pytest.mark.parametrize("stalled", [14, 20])
def test_a_stall_late_in_the_level_stays_in_the_window(stalled: int) -> None:
    # What follows the stall is shorter than what precedes it: nothing shows it was one-off.
    window = steady_window(waves_with_one_stall(24, stalled=stalled, stall_s=12.0), 2)
    assert window is not None and window.transient_s == 0.0
    assert window.rate < 0.9 * 22 / 3
    lo, hi = window.interval
    assert (hi - lo) / window.rate > 0.05


def test_recurring_stalls_stay_in_the_window() -> None:
    window = steady_window(waves(24, slow_every=3), 2)
    assert window is not None and window.transient_s == 0.0


def test_all_token_curves_at_once_equal_the_per_record_sums() -> None:
    import random

    import numpy as np

    from autospec.metrics.steady import _TokenCurves

    rng = random.Random(7)
    records = [failed(0.0, 1.0)]
    for _ in range(60):
        t0 = rng.uniform(0, 10)
        times = sorted(t0 + rng.uniform(0, 3) for _ in range(rng.randint(1, 12)))
        if len(times) > 2 and rng.random() < 0.3:
            times[2] = times[1]  # two events at one instant
        tokens = [rng.randint(1, 5) for _ in times]
        records.append(ok(t0 - 0.1, list(zip(times, tokens, strict=True)), counts=rng.random() < 0.7))
    curves = _TokenCurves(records)
    at = np.linspace(-1.0, 15.0, 97)
    assert curves.total_upto(at) == pytest.approx([curves.upto(t).sum() for t in at], abs=1e-9)


def test_no_steady_window_falls_back_to_the_whole_run_and_says_so() -> None:
    s = summarize(level(ok(0.0, [(0.1, 1), (0.3, 9)]), concurrency=4))  # C=4 never reached
    assert s.steady_share == 0.0 and s.steady_short and s.steady_window_s == 0.0
    assert s.agg_output_tok_s == s.agg_output_tok_s_whole == pytest.approx(10 / 0.3)
    assert steady_window([], 1) is None


def test_quantile_intervals_are_order_statistics_and_unknown_where_too_few() -> None:
    values = list(range(1, 101))  # 1..100
    lo, hi = quantile_interval(values, 50)
    assert (lo, hi) == (40.0, 61.0)  # binomial(100, 0.5): the 40th and 61st values, the textbook pair
    lo, hi = quantile_interval(values[:64], 99)  # the p99 of 64 values has a lower bound, no upper one
    assert lo == 61.0 and math.isnan(hi) and half_width((lo, hi)) is None
    assert all(math.isnan(v) for v in quantile_interval([1.0, 2.0, 3.0, 4.0], 50))  # 4 values: none at 95%


def test_intervals_can_be_limited_to_the_figures_asked_for() -> None:
    recs = [ok(0.0, [(0.05, 1), (0.2 + 0.03 * (i % 5), 20)]) for i in range(20)]
    s = summarize(level(*recs), intervals=("output_tok_s",))
    assert set(s.cis) == {"output_tok_s"}
    assert s.as_dict()["output_tok_s"] == summarize(level(*recs)).as_dict()["output_tok_s"]


def test_accept_length_from_the_server_fills_in_only_where_responses_had_none() -> None:
    with_verify = summarize(level(A, B))
    assert with_verify.accept_length_source == "response"
    assert with_accept_length(with_verify, 9.0, "log") is with_verify
    without = summarize(level(B))
    filled = with_accept_length(without, 3.5, "server_info")
    assert filled.accept_length == 3.5 and filled.accept_length_source == "server_info"
    assert filled.as_dict()["accept_length_source"] == "server_info"


def test_overlapping_batch_means_widen_for_a_correlated_series_and_match_t_for_an_independent_one() -> None:
    import numpy as np

    from autospec.metrics import stats

    rng = np.random.default_rng(5)
    independent = rng.normal(100.0, 5.0, 400)
    lo, hi = stats.overlapping_batch_means_interval(independent, 1)
    t_lo, t_hi = stats.t_interval(independent)
    assert (hi - lo) == pytest.approx(t_hi - t_lo, rel=0.01)  # batches of one: the plain t interval
    # An AR(1) series (each value 0.9 of the one before plus noise): the plain t interval
    # is several times too narrow; batches of 40 values see the correlation.
    drift = np.empty(400)
    drift[0] = 0.0
    for i in range(1, 400):
        drift[i] = 0.9 * drift[i - 1] + rng.normal(0.0, 1.0)
    lo, hi = stats.overlapping_batch_means_interval(100.0 + drift, 40)
    t_lo, t_hi = stats.t_interval(100.0 + drift)
    assert lo < float(np.mean(100.0 + drift)) < hi and (hi - lo) > 2.5 * (t_hi - t_lo)
    assert all(math.isnan(x) for x in stats.overlapping_batch_means_interval(independent[:79], 40))
