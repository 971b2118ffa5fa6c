"""The names of the figures a study may optimise or constrain (pure data, no imports).

`METRICS` maps each name to its unit and meaning; `METRIC_DIRECTIONS` says whether
larger is better ("maximize") or smaller ("minimize"). `autospec.config` validates
objective and constraint names against them; `autospec.metrics` computes the figures
and re-exports both.
"""

from __future__ import annotations

__all__ = ["METRICS", "METRIC_DIRECTIONS"]

METRICS: dict[str, str] = {
    "output_tok_s": "mean per-request output speed, tok/s: completion tokens / (done - sent), queueing and TTFT included",
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
