"""Per-level summaries from request records (pure; no I/O, no Optuna).

Definitions (docs/figures.md has the long form; docs/architecture.md the
contract). Over the level's *measured* requests (warmup excluded), successful ones
unless stated; the shortened first requests of a phase-spread start (`RequestRecord.ramp`)
count in the aggregates, the totals and accept length, not in the per-request figures:

    output_tok_s      mean over requests of completion_tokens / (t_done - t_sent):
                      the speed one user saw, queueing and TTFT included
    decode_tok_s      mean of (completion_tokens - tokens of the first chunk) /
                      (t_done - t_first): the speed once tokens flow
    agg_output_tok_s  output tokens per second in the level's steady window, while C
                      requests were in flight, ramp-up and drain left out
                      (`autospec.metrics.steady`); the whole-run figure where the run
                      never reached steady state
    agg_output_tok_s_whole
                      sum of completion_tokens / (last t_done - first t_sent), the
                      window spanning every measured request, failed ones included
    ttft_ms           t_first - t_sent
    tpot_ms           (t_done - t_first) / (completion_tokens - 1), as SGLang's
                      bench_serving defines it (requests with more than one token)
    itl_ms            per token: each gap between output events divided over the
                      tokens the later event carried (pooled over requests); the
                      raw gap when the server gave no per-event counts
    e2e_ms            t_done - t_sent
    accept_length     sum completion_tokens / sum spec_verify_ct over requests that
                      report spec_verify_ct (SGLang's own per-request definition);
                      `accept_length_source` = "response". Other APIs: filled in from
                      the server (`with_accept_length`, source "server_info" or "log")
    error_rate        failed / measured requests

Uncertainty: 95% intervals (`autospec.metrics.stats` says which method for which
figure). One run: Student-t over requests for means, order statistics for
percentiles, batch means over the steady window for the aggregate (sub-wave slices in a
window under 3 waves), a seeded paired bootstrap for ratios (accept length, the
whole-run aggregate). Several repeat runs (`summarize_repeats`): a Student-t interval
over the runs' values for output_tok_s and agg_output_tok_s, which also captures
run-to-run noise. `agg_ci_method` says which interval the aggregate has (AGG_CI_METHODS).

`intervals` (a set of metric names) limits the intervals computed to those figures:
the precision loop summarises the records so far while a level runs, and needs only
its own figures' intervals.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from autospec.metrics import series, stats
from autospec.metrics.accept import accept_by_depth
from autospec.metrics.steady import BATCH_MEANS, MIN_SHARE, SHORT_WINDOW, SteadyWindow, steady_window

if TYPE_CHECKING:  # bench sits above metrics; only its record types are read here
    from autospec.request_records import LevelResult, RequestRecord

DEFAULT_MAX_ERROR_RATE = 0.05

WHOLE_RUN = "whole-run"  # no steady window: the whole run's bootstrap over requests
REPEATS = "repeats"  # Student-t over repeat runs' figures
#: how `agg_output_tok_s_ci` was formed (`LevelSummary.agg_ci_method`)
AGG_CI_METHODS = (BATCH_MEANS, SHORT_WINDOW, WHOLE_RUN, REPEATS)

_NAN = math.nan
_NAN2 = stats.NAN_INTERVAL


@dataclass(frozen=True)
class LevelSummary:
    """Figures of one concurrency level (or of several repeat runs of it).

    Speeds are tokens/s, times milliseconds; NaN where a figure cannot be formed
    (no successful request, no second token). `failed_reason` is set when the level
    must not be trusted (error share above the threshold, or nothing succeeded).
    `cis` holds 95% intervals by metric name where they are known.

    Steady state (`autospec.metrics.steady`): `steady_window_s` is the window behind
    `agg_output_tok_s`, `steady_transient_s` the seconds at full concurrency left out
    before it (a one-off stall), `steady_share` the share of the run at full concurrency
    (both together), `steady_short` is True when that share is below half (the figure is
    then mostly ramp-up and drain, or the whole-run figure where there was no window),
    `steady_slices` the whole waves the window holds and `agg_ci_method` how the
    aggregate's interval was formed (one of AGG_CI_METHODS; None without a value). Precision (set by the precision loop,
    None for a fixed request count): `stop_reason` is why the level stopped measuring
    ("target", "cap", "ceiling", "failed" or "external"), `precision` the details
    (targets, relative half-widths, cap and elapsed seconds, the hook's reason).
    """

    concurrency: int
    n_requests: int
    n_ok: int
    n_errors: int
    errors_by_kind: dict[str, int]
    error_rate: float
    failed_reason: str | None
    output_tok_s: float
    output_tok_s_ci: tuple[float, float]
    output_tok_s_std: float
    decode_tok_s: float
    agg_output_tok_s: float
    agg_output_tok_s_ci: tuple[float, float]
    ttft_ms_mean: float
    ttft_ms_p50: float
    ttft_ms_p90: float
    ttft_ms_p99: float
    tpot_ms_mean: float
    tpot_ms_p50: float
    tpot_ms_p90: float
    tpot_ms_p99: float
    itl_ms_p50: float
    itl_ms_p90: float
    itl_ms_p99: float
    e2e_ms_p50: float
    e2e_ms_p90: float
    e2e_ms_p99: float
    accept_length: float | None
    wall_s: float
    completion_tokens: int
    prompt_tokens_mean: float
    n_repeats: int = 1
    cis: dict[str, tuple[float, float]] = field(default_factory=dict)
    agg_output_tok_s_whole: float = _NAN
    steady_window_s: float = _NAN
    steady_share: float = _NAN
    steady_short: bool = True
    steady_transient_s: float = 0.0
    steady_slices: int = 0
    agg_ci_method: str | None = None
    accept_length_source: str | None = None
    stop_reason: str | None = None
    precision: dict[str, Any] | None = None
    gc_frozen: bool | None = None  # the server froze its garbage collector after warmup; None: not asked
    # per-position figures that pair across launches (`autospec.metrics.series`): per request id
    # (at C > 1 only in a long level), and per wave at C > 1; empty for repeat runs and records
    # without request ids
    request_speeds: dict[str, float] = field(default_factory=dict)
    wave_speeds: dict[str, float] = field(default_factory=dict)
    # a warm-up that ran until the rate settled (`autospec.bench.runner`, `autospec.metrics.warmup`):
    # whether it settled within its cap, and how many warm-up requests it sent; None: a fixed warm-up
    warmup_settled: bool | None = None
    warmup_sent: int | None = None
    # verify steps by draft tokens accepted, summed over the measured requests
    # (`autospec.metrics.accept.accept_by_depth`); empty where the server sent no histogram
    accept_by_depth: tuple[int, ...] = ()

    @property
    def failed(self) -> bool:
        return self.failed_reason is not None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples become lists, NaN becomes None."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class _Requests:
    """Column arrays of the successful measured requests."""

    tokens: np.ndarray
    latency: np.ndarray
    ttft: np.ndarray  # NaN where no output arrived
    decode_time: np.ndarray
    first_tokens: np.ndarray
    verify: np.ndarray  # NaN where not reported
    prompt_tokens: np.ndarray
    itl: np.ndarray  # pooled per-token gaps, seconds

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> _Requests:
        n = len(records)
        tokens = np.empty(n)
        latency = np.empty(n)
        ttft = np.full(n, np.nan)
        decode_time = np.full(n, np.nan)
        first_tokens = np.ones(n)
        verify = np.full(n, np.nan)
        prompt_tokens = np.full(n, np.nan)
        gaps: list[np.ndarray] = []
        for i, r in enumerate(records):
            tokens[i] = r.completion_tokens
            latency[i] = (r.t_done if r.t_done is not None else r.t_sent) - r.t_sent
            if r.t_first is not None and r.t_done is not None:
                ttft[i] = r.t_first - r.t_sent
                decode_time[i] = r.t_done - r.t_first
            if r.chunk_tokens:
                first_tokens[i] = r.chunk_tokens[0]
            if r.spec_verify_ct:
                verify[i] = r.spec_verify_ct
            if r.prompt_tokens is not None:
                prompt_tokens[i] = r.prompt_tokens
            if len(r.chunk_times) > 1:
                gaps.append(_per_token_gaps(r))
        itl = np.concatenate(gaps) if gaps else np.empty(0)
        return cls(tokens, latency, ttft, decode_time, first_tokens, verify, prompt_tokens, itl)


def _per_token_gaps(record: RequestRecord) -> np.ndarray:
    times = np.asarray(record.chunk_times, dtype=float)
    gaps = np.diff(times)
    if not record.chunk_tokens:
        return gaps
    counts = np.asarray(record.chunk_tokens[1:], dtype=int)
    keep = counts > 0
    return np.repeat(gaps[keep] / counts[keep], counts[keep])


def _window(records: Sequence[RequestRecord]) -> float:
    if not records:
        return _NAN
    start = min(r.t_sent for r in records)
    end = max((r.t_done if r.t_done is not None else r.t_sent) for r in records)
    return end - start


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def _failed_reason(n_ok: int, n_total: int, errors: Counter, max_error_rate: float) -> str | None:
    kinds = ", ".join(f"{kind} x{count}" for kind, count in errors.most_common())
    if n_total == 0:
        return "no measured request was sent"
    if n_ok == 0:
        return f"no request succeeded ({kinds})"
    rate = (n_total - n_ok) / n_total
    if rate > max_error_rate:
        return f"{n_total - n_ok} of {n_total} requests failed ({rate:.1%} > {max_error_rate:.1%} allowed): {kinds}"
    return None


def _speed_columns(req: _Requests) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        per_request = np.where(req.latency > 0, req.tokens / req.latency, np.nan)
        decode_tokens = req.tokens - req.first_tokens
        decode = np.where((decode_tokens > 0) & (req.decode_time > 0), decode_tokens / req.decode_time, np.nan)
        tpot = np.where(req.tokens > 1, req.decode_time / (req.tokens - 1), np.nan)
    return per_request, decode, tpot


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def _wanted(intervals: Collection[str] | None, name: str) -> bool:
    return intervals is None or name in intervals


def _summarize_records(
    concurrency: int,
    measured: Sequence[RequestRecord],
    windows: Sequence[float],
    steady: Sequence[SteadyWindow],
    max_error_rate: float,
    n_repeats: int,
    intervals: Collection[str] | None = None,
) -> LevelSummary:
    ok = [r for r in measured if r.ok]
    errors = Counter(r.error_kind or "unknown" for r in measured if not r.ok)
    req = _Requests.of(ok)
    each = _Requests.of([r for r in ok if not r.ramp]) if any(r.ramp for r in ok) else req  # per-request figures
    per_request_f, decode_f, tpot_f = (_finite(column) for column in _speed_columns(each))
    ttft_f, latency_f = _finite(each.ttft), each.latency

    wall = float(sum(windows)) if windows else _NAN
    total_tokens = int(req.tokens.sum()) if ok else 0
    whole = total_tokens / wall if wall and wall > 0 else _NAN
    has_verify = np.isfinite(req.verify)
    accept = float(req.tokens[has_verify].sum() / req.verify[has_verify].sum()) if has_verify.any() else None

    cis = _per_request_intervals(each, per_request_f, decode_f, ttft_f, tpot_f, latency_f, intervals)
    cis.update(_level_intervals(req, whole, intervals))
    steady_s, transient_s, share = _steady_time(steady)
    agg, agg_method = _aggregate(steady, bool(ok), whole, cis, intervals)

    n_total = len(measured)
    return LevelSummary(
        concurrency=concurrency,
        n_requests=n_total,
        n_ok=len(ok),
        n_errors=n_total - len(ok),
        errors_by_kind=dict(errors),
        error_rate=(n_total - len(ok)) / n_total if n_total else _NAN,
        failed_reason=_failed_reason(len(ok), n_total, errors, max_error_rate),
        output_tok_s=stats.mean(per_request_f),
        output_tok_s_ci=cis.get("output_tok_s", _NAN2),
        output_tok_s_std=float(per_request_f.std(ddof=1)) if per_request_f.size > 1 else _NAN,
        decode_tok_s=stats.mean(decode_f),
        agg_output_tok_s=agg,
        agg_output_tok_s_ci=cis.get("agg_output_tok_s", _NAN2),
        ttft_ms_mean=_ms(stats.mean(ttft_f)),
        ttft_ms_p50=_ms(stats.percentile(ttft_f, 50)),
        ttft_ms_p90=_ms(stats.percentile(ttft_f, 90)),
        ttft_ms_p99=_ms(stats.percentile(ttft_f, 99)),
        tpot_ms_mean=_ms(stats.mean(tpot_f)),
        tpot_ms_p50=_ms(stats.percentile(tpot_f, 50)),
        tpot_ms_p90=_ms(stats.percentile(tpot_f, 90)),
        tpot_ms_p99=_ms(stats.percentile(tpot_f, 99)),
        itl_ms_p50=_ms(stats.percentile(each.itl, 50)),
        itl_ms_p90=_ms(stats.percentile(each.itl, 90)),
        itl_ms_p99=_ms(stats.percentile(each.itl, 99)),
        e2e_ms_p50=_ms(stats.percentile(latency_f, 50)),
        e2e_ms_p90=_ms(stats.percentile(latency_f, 90)),
        e2e_ms_p99=_ms(stats.percentile(latency_f, 99)),
        accept_length=accept,
        wall_s=wall,
        completion_tokens=total_tokens,
        prompt_tokens_mean=stats.mean(_finite(each.prompt_tokens)),
        n_repeats=n_repeats,
        cis=cis,
        agg_output_tok_s_whole=whole,
        steady_window_s=steady_s,
        steady_share=share,
        steady_short=share < MIN_SHARE,
        steady_transient_s=transient_s,
        steady_slices=int(sum(w.slices for w in steady)),
        agg_ci_method=agg_method,
        accept_length_source="response" if accept is not None else None,
    )


def _level_intervals(req: _Requests, whole: float, intervals: Collection[str] | None) -> dict[str, tuple[float, float]]:
    """95% intervals of the level's whole-run aggregate and accept length (`intervals`: the
    names wanted; None: all)."""
    cis: dict[str, tuple[float, float]] = {}
    if _wanted(intervals, "agg_output_tok_s_whole") or _wanted(intervals, "agg_output_tok_s"):
        cis["agg_output_tok_s_whole"] = _whole_run_interval(req, whole)
    has_verify = np.isfinite(req.verify)
    if has_verify.sum() >= 2 and _wanted(intervals, "accept_length"):
        cis["accept_length"] = stats.bootstrap_ratio_ci(req.tokens[has_verify], req.verify[has_verify])
    return cis


def _steady_time(steady: Sequence[SteadyWindow]) -> tuple[float, float, float]:
    """(steady seconds, transient seconds, their share of the runs' seconds) of the windows."""
    steady_s = float(sum(w.seconds for w in steady))
    transient_s = float(sum(w.transient_s for w in steady))
    run_s = float(sum(w.run_seconds for w in steady))
    return steady_s, transient_s, (steady_s + transient_s) / run_s if run_s > 0 else 0.0


def _per_request_intervals(
    req: _Requests,
    per_request: np.ndarray,
    decode: np.ndarray,
    ttft: np.ndarray,
    tpot: np.ndarray,
    latency: np.ndarray,
    intervals: Collection[str] | None,
) -> dict[str, tuple[float, float]]:
    """95% intervals of the per-request figures (`intervals`: the names wanted; None: all)."""
    cis: dict[str, tuple[float, float]] = {}
    for name, values in (("output_tok_s", per_request), ("decode_tok_s", decode)):
        if _wanted(intervals, name):
            cis[name] = stats.t_interval(values)
    for name, values in (("ttft_ms_mean", ttft), ("tpot_ms_mean", tpot)):
        if _wanted(intervals, name):
            cis[name] = _scaled(stats.t_interval(values))
    for q in (50, 90, 99):
        for prefix, values in (("ttft", ttft), ("tpot", tpot), ("e2e", latency)):
            name = f"{prefix}_ms_p{q}"
            if _wanted(intervals, name):
                cis[name] = _scaled(stats.quantile_interval(values, q))
    return cis


def _aggregate(
    steady: Sequence[SteadyWindow],
    any_ok: bool,
    whole: float,
    cis: dict[str, tuple[float, float]],
    intervals: Collection[str] | None,
) -> tuple[float, str | None]:
    """(the level's aggregate, how its interval was formed): tokens per second of the
    steady windows (the whole run's figure when there is none); its interval is put in
    `cis` (several windows: none here, `summarize_repeats` forms it over the runs)."""
    steady_s = float(sum(w.seconds for w in steady))
    if steady_s > 0 and any_ok:
        if _wanted(intervals, "agg_output_tok_s"):
            cis["agg_output_tok_s"] = steady[0].interval if len(steady) == 1 else _NAN2
        return float(sum(w.tokens for w in steady)) / steady_s, steady[0].method if len(steady) == 1 else None
    if _wanted(intervals, "agg_output_tok_s"):
        cis["agg_output_tok_s"] = cis.get("agg_output_tok_s_whole", _NAN2)
    return whole, WHOLE_RUN if math.isfinite(whole) else None


def _whole_run_interval(req: _Requests, whole: float) -> tuple[float, float]:
    """The whole-run aggregate's interval: in a closed loop aggregate = C x tokens /
    latency, so the paired bootstrap of sum(tokens) / sum(latency) gives its relative
    spread, applied to the measured aggregate."""
    if not req.tokens.size or req.latency.sum() <= 0 or math.isnan(whole):
        return _NAN2
    ratio = req.tokens.sum() / req.latency.sum()
    lo, hi = stats.bootstrap_ratio_ci(req.tokens, req.latency)
    return (whole * lo / ratio, whole * hi / ratio) if ratio > 0 else _NAN2


def _scaled(interval: tuple[float, float]) -> tuple[float, float]:
    return (_ms(interval[0]), _ms(interval[1]))


def _measured(result: LevelResult) -> list[RequestRecord]:
    return [r for r in result.records if not r.warmup]


def summarize(
    result: LevelResult,
    *,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    intervals: Collection[str] | None = None,
) -> LevelSummary:
    """Summary of one level run (warmup records excluded); `intervals` limits the
    intervals computed to the named figures (None: all)."""
    measured = _measured(result)
    window = steady_window(measured, result.concurrency)
    summary = _summarize_records(
        result.concurrency, measured, [_window(measured)], [window] if window else [], max_error_rate, 1, intervals
    )
    c = result.concurrency
    warm = result.metadata.get("warmup")
    warm = warm if isinstance(warm, dict) else {}
    return replace(
        summary,
        gc_frozen=result.metadata.get("gc_frozen"),
        warmup_settled=warm.get("settled"),
        warmup_sent=warm.get("sent"),
        request_speeds=series.request_speeds(measured, c),
        wave_speeds=series.wave_speeds(measured, c) if c > 1 else {},
        accept_by_depth=accept_by_depth(measured),
    )


def summarize_repeats(
    results: Iterable[LevelResult],
    *,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
    intervals: Collection[str] | None = None,
) -> LevelSummary:
    """One summary of several runs of the same level.

    Percentiles pool every run's requests; `output_tok_s` and `agg_output_tok_s`
    are the means of the runs' values with Student-t intervals across runs (one
    run: identical to `summarize`). The whole-run aggregate's window is the sum of the
    runs' windows (tokens over time actually spent measuring); the steady share is
    the runs' steady windows over their runs.
    """
    runs = list(results)
    if not runs:
        raise ValueError("summarize_repeats needs at least one LevelResult")
    concurrencies = {r.concurrency for r in runs}
    if len(concurrencies) != 1:
        raise ValueError(f"repeat runs must share one concurrency, got {sorted(concurrencies)}")
    if len(runs) == 1:
        return summarize(runs[0], max_error_rate=max_error_rate, intervals=intervals)
    per_run = [summarize(r, max_error_rate=max_error_rate, intervals=()) for r in runs]
    measured = [rec for r in runs for rec in _measured(r)]
    windows = [_window(_measured(r)) for r in runs]
    steady = [w for w in (steady_window(_measured(r), r.concurrency) for r in runs) if w is not None]
    pooled = _summarize_records(runs[0].concurrency, measured, windows, steady, max_error_rate, len(runs), intervals)
    run_speeds = [s.output_tok_s for s in per_run if not math.isnan(s.output_tok_s)]
    run_aggs = [s.agg_output_tok_s for s in per_run if not math.isnan(s.agg_output_tok_s)]
    cis = dict(pooled.cis)
    cis["output_tok_s"] = stats.t_interval(run_speeds)
    cis["agg_output_tok_s"] = stats.t_interval(run_aggs)
    failed = pooled.failed_reason or next((s.failed_reason for s in per_run if s.failed_reason), None)
    return replace(
        pooled,
        request_speeds={},
        wave_speeds={},
        output_tok_s=stats.mean(run_speeds),
        output_tok_s_ci=cis["output_tok_s"],
        agg_output_tok_s=stats.mean(run_aggs),
        agg_output_tok_s_ci=cis["agg_output_tok_s"],
        agg_ci_method=REPEATS,
        failed_reason=failed,
        cis=cis,
        gc_frozen=runs[0].metadata.get("gc_frozen"),
    )


def with_accept_length(summary: LevelSummary, value: float | None, source: str | None) -> LevelSummary:
    """`summary` with accept length taken from the server (`autospec.metrics.accept`)
    where the responses gave none; unchanged otherwise."""
    if summary.accept_length is not None or value is None or source is None:
        return summary
    return replace(summary, accept_length=float(value), accept_length_source=source)
