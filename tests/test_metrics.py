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
    summarize,
    summarize_repeats,
)
from autospec.metrics.stats import bootstrap_mean_ci, half_width, t_interval, t_quantile


def ok(t_sent, chunks, *, verify=None, warmup=False, prompt_tokens=10, counts=True) -> RequestRecord:
    times = tuple(t for t, _ in chunks)
    tokens = tuple(n for _, n in chunks)
    return RequestRecord(
        ok=True, error_kind=None, t_sent=t_sent, t_first=times[0], t_done=times[-1],
        chunk_times=times, chunk_tokens=tokens if counts else (), prompt_tokens=prompt_tokens,
        completion_tokens=sum(tokens), spec_verify_ct=verify, warmup=warmup,
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
    assert s.agg_output_tok_s == pytest.approx(8 / 1.0)  # failed request: time yes, tokens no
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
    assert s.agg_output_tok_s_ci == pytest.approx((s.agg_output_tok_s, s.agg_output_tok_s))
    assert metric_uncertainty(s, "output_tok_s") == pytest.approx(0.0)
    assert metric_uncertainty(s, "tpot_ms_p50") == pytest.approx(0.0)


def test_noisy_requests_give_intervals_around_the_estimate_deterministically() -> None:
    recs = [ok(0.0, [(0.05, 1), (0.2 + 0.03 * (i % 5), 20)]) for i in range(20)]
    s1, s2 = summarize(level(*recs)), summarize(level(*recs))
    assert s1.as_dict() == s2.as_dict()
    lo, hi = s1.output_tok_s_ci
    assert lo < s1.output_tok_s < hi
    lo, hi = s1.agg_output_tok_s_ci
    assert lo < s1.agg_output_tok_s < hi
    assert 0 < metric_uncertainty(s1, "agg_output_tok_s") < s1.agg_output_tok_s
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
    assert s.agg_output_tok_s == pytest.approx(100) and s.output_tok_s == pytest.approx(100)
    half = t_quantile(2) * 10 / math.sqrt(3)
    assert metric_uncertainty(s, "agg_output_tok_s") == pytest.approx(half)
    assert s.agg_output_tok_s_ci == pytest.approx((100 - half, 100 + half))
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
    lo, hi = bootstrap_mean_ci([1.0, 2.0, 3.0, 4.0])
    assert 1.0 <= lo < 2.5 < hi <= 4.0


def test_metric_lookup_by_name() -> None:
    s = summarize(level(A, B, C), max_error_rate=0.5)
    assert metric_value(s, "agg_output_tok_s") == pytest.approx(8.0)
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
