"""One launched trial as the model sees it (pure): flags, whether it started, start-up
facts and per-level figures. Built from a stored trial (`observation_from`), from a
`TrialRecord` (`observation_from_record`) or by hand (`Observation(...)`, e.g. from the
hand-tuning sweep's measurements, sim profile seed-qwen35-122b-4x-rtxpro6000)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autospec.model.shape import Shape, shape_of

if TYPE_CHECKING:
    from autospec.records import StoredTrial, TrialRecord

__all__ = [
    "Observation",
    "LevelObservation",
    "observation_from",
    "observation_from_record",
    "flags_from_argv",
    "STARTED",
    "KV_FAILURE",
    "GRAPH_FAILURE",
    "WEIGHTS_FAILURE",
    "MEMORY_FAILURES",
]

#: Outcomes of a launch that reached readiness (the server started; figures may be missing).
STARTED = ("ok", "constraint_violated", "bench_failed")
KV_FAILURE = "kv_pool_too_small"
GRAPH_FAILURE = "cuda_graph_oom"
WEIGHTS_FAILURE = "weights_oom"
#: Launch failures that the configuration itself causes (the rest are the host's doing:
#: a port in use, foreign GPU memory, a timeout, an unknown crash).
MEMORY_FAILURES = (KV_FAILURE, GRAPH_FAILURE, WEIGHTS_FAILURE)


def _num(value: Any) -> float | None:
    """A finite float, or None (None, NaN, strings that are not numbers)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class LevelObservation:
    """What one concurrency level measured (None where not measured). ``tpot_ms``: mean
    time per output token after the first, per request; ``accept_length``: completion
    tokens / verify passes; ``output_len``: completion tokens per request; ``n_requests``:
    measured requests of the level."""

    concurrency: int
    output_tok_s: float | None = None
    agg_output_tok_s: float | None = None
    accept_length: float | None = None
    tpot_ms: float | None = None
    ttft_ms: float | None = None
    n_requests: int | None = None
    output_len: float | None = None
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # metric -> 95% interval

    @classmethod
    def from_summary(cls, concurrency: int, summary: Mapping[str, Any], output_len: float | None = None) -> LevelObservation:
        """From a level summary as a trial record stores it (`LevelSummary.as_dict()` or
        the simulated chain's dict). Output tokens per request: completion_tokens / n_ok
        where stored, else `output_len`, else from the level's own medians
        (e2e - ttft = (tokens - 1) x tpot)."""
        n_ok = _num(summary.get("n_ok"))
        completion = _num(summary.get("completion_tokens"))
        length: float | None = None
        if completion is not None and n_ok:
            length = completion / n_ok
        elif output_len is not None:
            length = float(output_len)
        else:
            e2e, ttft, tpot = (_num(summary.get(k)) for k in ("e2e_ms_p50", "ttft_ms_p50", "tpot_ms_p50"))
            if e2e is not None and ttft is not None and tpot:
                length = 1.0 + (e2e - ttft) / tpot
        n = _num(summary.get("n_requests"))
        intervals = {}
        for metric, ci in dict(summary.get("cis") or {}).items():
            lo, hi = (_num(x) for x in ci) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)
            if lo is not None and hi is not None and 0 < lo <= hi:
                intervals[str(metric)] = (lo, hi)
        return cls(
            concurrency=int(concurrency),
            output_tok_s=_num(summary.get("output_tok_s")),
            agg_output_tok_s=_num(summary.get("agg_output_tok_s")),
            accept_length=_num(summary.get("accept_length")),
            tpot_ms=_num(summary.get("tpot_ms_mean")),
            ttft_ms=_num(summary.get("ttft_ms_mean")),
            n_requests=int(n) if n else None,
            output_len=length if length and length > 1 else None,
            intervals=intervals,
        )

    def log_sd(self, metric: str) -> float | None:
        """The standard error of `metric` on a log scale, from its stored 95% interval
        (None when the summary has none)."""
        ci = self.intervals.get(metric)
        return None if ci is None else math.log(ci[1] / ci[0]) / (2 * 1.96)

    def value(self, metric: str) -> float | None:
        """A metric by its autospec name (output_tok_s, agg_output_tok_s, accept_length,
        tpot_ms_mean, ttft_ms_mean, decode_tok_s), None when not measured."""
        if metric == "decode_tok_s":
            return 1000.0 / self.tpot_ms if self.tpot_ms else None
        return {
            "output_tok_s": self.output_tok_s,
            "agg_output_tok_s": self.agg_output_tok_s,
            "accept_length": self.accept_length,
            "tpot_ms_mean": self.tpot_ms,
            "ttft_ms_mean": self.ttft_ms,
        }.get(metric)


@dataclass(frozen=True)
class Observation:
    """One launch: its full server flags (as launched, SGLang's rewrites applied where
    known), ``outcome`` ("ok", "constraint_violated", "bench_failed" when it started, else
    the launch failure kind), the start-up facts it printed and its levels by concurrency.
    ``number`` is the trial number (for explanations)."""

    flags: Mapping[str, Any]
    outcome: str
    max_total_num_tokens: float | None = None
    max_running_requests: float | None = None
    available_gpu_mem_gb: float | None = None
    gpu_mem_before_load_gb: float | None = None
    kv_cache_gb: float | None = None
    kv_cache_dtype: str | None = None  # the target pool's torch dtype (its KV log line)
    draft_kv_cache_gb: float | None = None  # the draft pool's K + V, per GPU
    draft_kv_cache_dtype: str | None = None
    levels: Mapping[int, LevelObservation] = field(default_factory=dict)
    number: int | None = None

    @property
    def started(self) -> bool:
        return self.outcome in STARTED

    @property
    def shape(self) -> Shape:
        return shape_of(self.flags)

    def level(self, concurrency: int) -> LevelObservation | None:
        return self.levels.get(concurrency)

    def value(self, metric: str, concurrency: int) -> float | None:
        level = self.levels.get(concurrency)
        return level.value(metric) if level is not None else None

    def log_sd(self, metric: str, concurrency: int) -> float | None:
        level = self.levels.get(concurrency)
        return level.log_sd(metric) if level is not None else None

    @property
    def label(self) -> str:
        return f"trial {self.number}" if self.number is not None else self.shape.describe()


def flags_from_argv(argv: Sequence[str]) -> dict[str, Any]:
    """Server flags from a launched argv (``--kebab-case VALUE`` words; a bare switch is
    True); values parsed as int, float or kept as strings. Words before the first flag
    (the command) are skipped; host and port are dropped."""
    out: dict[str, Any] = {}
    words = list(argv)
    i = 0
    while i < len(words) and not str(words[i]).startswith("--"):
        i += 1
    while i < len(words):
        word = str(words[i])
        if not word.startswith("--"):
            i += 1
            continue
        name = word[2:].replace("-", "_")
        if i + 1 < len(words) and not str(words[i + 1]).startswith("--"):
            out[name] = _parse_value(str(words[i + 1]))
            i += 2
        else:
            out[name] = True
            i += 1
    out.pop("host", None)
    out.pop("port", None)
    return out


def _parse_value(word: str) -> Any:
    for cast in (int, float):
        try:
            return cast(word)
        except ValueError:
            continue
    return word


def observation_from_record(
    record: TrialRecord,
    *,
    base_flags: Mapping[str, Any] | None = None,
    number: int | None = None,
    output_len: float | None = None,
    imported: bool = False,
) -> Observation | None:
    """The observation of one trial record; None when no server was launched for it
    (rejected, skipped, duplicate; `imported`: measured elsewhere, `autospec import`) or
    its launch says nothing about the configuration (interrupted, a host failure).
    Flags: `base_flags` (the space's fixed flags), then the launched argv, the candidate
    and SGLang's resolved flags on top (the resolver's rewrites, e.g. draft tokens =
    steps + 1 for chains), and last what the server logged it runs
    (`startup["logged_flags"]`)."""
    if not (record.launched or imported):
        return None
    outcome = record.outcome
    if outcome not in STARTED and outcome not in MEMORY_FAILURES:
        return None
    flags: dict[str, Any] = dict(base_flags or {})
    if record.server_args:
        flags.update(flags_from_argv(record.server_args))
    flags.update(record.candidate)
    flags.update({k: v for k, v in record.resolved.items() if v is not None})
    startup = dict(record.startup or {})
    # what the server logged it runs (its ServerArgs line) settles what the flags left to
    # SGLang: a reference of SGLang's defaults leaves steps, topk and draft tokens unset
    logged = startup.get("logged_flags")
    if isinstance(logged, Mapping):
        flags.update({k: v for k, v in logged.items() if v is not None})
    levels = {
        int(c): LevelObservation.from_summary(int(c), s, output_len)
        for c, s in (record.bench or {}).items()
        if isinstance(s, Mapping)
    }
    return Observation(
        flags=flags,
        outcome=outcome,
        max_total_num_tokens=_num(startup.get("max_total_num_tokens")),
        max_running_requests=_num(startup.get("max_running_requests")),
        available_gpu_mem_gb=_num(startup.get("available_gpu_mem_gb")),
        gpu_mem_before_load_gb=_num(startup.get("gpu_mem_before_load_gb")),
        kv_cache_gb=_num(startup.get("kv_cache_gb")),
        kv_cache_dtype=_text(startup.get("kv_cache_dtype")),
        draft_kv_cache_gb=_num(startup.get("draft_kv_cache_gb")),
        draft_kv_cache_dtype=_text(startup.get("draft_kv_cache_dtype")),
        levels=levels if outcome in STARTED else {},
        number=number,
    )


def observation_from(
    stored: StoredTrial, *, base_flags: Mapping[str, Any] | None = None, output_len: float | None = None
) -> Observation | None:
    """The observation of a stored trial (`autospec.records.read_trials`), or None when
    it was not launched, is still running, or ended for a reason that says nothing about
    the configuration. `base_flags`: the space's fixed server flags (``space.server.flags``),
    so that candidates and observations are compared as full flags; `output_len`: the
    workload's output tokens per request, when the stored summaries do not count them."""
    record = stored.record
    if record is None or stored.state.name != "COMPLETE":
        return None
    return observation_from_record(
        record, base_flags=base_flags, number=stored.number, output_len=output_len, imported=stored.markers.imported is not None
    )
