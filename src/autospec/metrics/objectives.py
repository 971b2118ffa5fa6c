"""Objective values by metric name (pure; no Optuna).

`METRICS` names every figure a study may optimise or constrain, with its unit and
meaning; `METRIC_DIRECTIONS` says whether larger is better. The config layer
validates names against `METRICS`; `metric_value` raises KeyError for others.
"""

from __future__ import annotations

import math

from autospec.metrics import stats
from autospec.metrics.summary import LevelSummary

METRICS: dict[str, str] = {
    "output_tok_s": "mean per-request output speed, tok/s: completion tokens / (done - sent), "
    "queueing and TTFT included",
    "decode_tok_s": "mean per-request decode speed, tok/s: (completion tokens - first chunk) / (done - first token)",
    "agg_output_tok_s": "aggregate output throughput, tok/s, in the level's steady window: while C requests "
    "were in flight, ramp-up and drain left out",
    "agg_output_tok_s_whole": "aggregate output throughput over the whole level, tok/s: all completion tokens / "
    "(last done - first sent), ramp-up and drain included",
    "ttft_ms_mean": "mean time to first token, ms",
    "ttft_ms_p50": "median time to first token, ms",
    "ttft_ms_p90": "90th percentile time to first token, ms",
    "ttft_ms_p99": "99th percentile time to first token, ms",
    "tpot_ms_mean": "mean time per output token after the first, ms (bench_serving's TPOT)",
    "tpot_ms_p50": "median time per output token after the first, ms",
    "tpot_ms_p90": "90th percentile time per output token after the first, ms",
    "tpot_ms_p99": "99th percentile time per output token after the first, ms",
    "itl_ms_p50": "median inter-token latency, ms (chunk gaps spread over their tokens)",
    "itl_ms_p90": "90th percentile inter-token latency, ms",
    "itl_ms_p99": "99th percentile inter-token latency, ms",
    "e2e_ms_p50": "median end-to-end request latency, ms",
    "e2e_ms_p90": "90th percentile end-to-end request latency, ms",
    "e2e_ms_p99": "99th percentile end-to-end request latency, ms",
    "accept_length": "speculative accept length, tokens per verify step: completion tokens / spec_verify_ct "
    "(from the responses, else from the server's /server_info or its decode log)",
    "error_rate": "share of measured requests that failed, 0..1",
}

METRIC_DIRECTIONS: dict[str, str] = {
    name: ("maximize" if "tok_s" in name or name == "accept_length" else "minimize") for name in METRICS
}


def metric_value(summary: LevelSummary, name: str) -> float:
    """The named figure of `summary` (NaN where it could not be formed, e.g.
    accept_length without speculative decoding). KeyError for unknown names."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    value = getattr(summary, name)
    return math.nan if value is None else float(value)


def metric_uncertainty(summary: LevelSummary, name: str) -> float | None:
    """Half-width of the named figure's 95% interval, where known (None otherwise).
    KeyError for unknown names."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    interval = summary.cis.get(name)
    return None if interval is None else stats.half_width(interval)


def metric_direction(name: str) -> str:
    """"maximize" or "minimize" (KeyError for unknown names)."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRIC_DIRECTIONS[name]
