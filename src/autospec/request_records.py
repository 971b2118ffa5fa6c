"""Per-request records and per-level results: plain data, no I/O.

`autospec.bench` produces them and `autospec.metrics` reads them; both import them from
here (and `autospec.bench` re-exports them).

Every request the runner sends becomes exactly one `RequestRecord`, whether it
succeeded or not. Timestamps are `time.perf_counter()` readings (monotonic, in
seconds, comparable only within one process). Token counts are the server's own
(`meta_info.completion_tokens` on the native API, `usage.completion_tokens` on the
OpenAI APIs); chunk token counts are the differences between consecutive cumulative
counts, so `sum(chunk_tokens)` equals `completion_tokens` when every event carried a
count.

Error kinds (`RequestRecord.error_kind`; `None` on success):

    http_status   the server answered with a non-2xx status before streaming
    stream_error  the stream carried an error event, or finished with "abort"
    truncated     the stream ended before its final event / `data: [DONE]`
    timeout       the request ran past its deadline (`timeout_s`)
    connection    connecting failed or the connection broke (reset, refused)
    protocol      an event could not be parsed (not JSON, wrong shape)

A failed request never contributes tokens: `completion_tokens` is 0 on every record
with `ok == False`, whatever had streamed before the failure (the partial chunk
times are kept for diagnosis).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ERROR_KINDS", "LevelResult", "RequestRecord", "request_id"]

ERROR_KINDS: tuple[str, ...] = (
    "http_status",
    "stream_error",
    "truncated",
    "timeout",
    "connection",
    "protocol",
)


def request_id(position: int, prompt_index: int, warmup: bool = False) -> str:
    """The id of the request sent `position`-th in a level's measured phase (warmup: in its
    warmup) with prompt `prompt_index`: every launch of a study sends the same prompts, output
    lengths and sampling settings in the same order (`autospec.bench.workloads.prompts`, fixed
    by the study's fingerprinted workload), so position and prompt name the request."""
    return f"{'w' if warmup else ''}{position}.{prompt_index}"


@dataclass(frozen=True)
class RequestRecord:
    """One request as the client saw it.

    `t_first` is the arrival of the first event that carried output (a rise of the
    completion-token count, or text where the server gives no per-event count);
    `t_done` is when the request ended: the arrival of the stream's end marker on
    success, the moment the failure was seen otherwise. `chunk_times[i]` /
    `chunk_tokens[i]` describe every output-carrying event in order (the first one
    included); `chunk_tokens` is empty when the server sent no per-event counts
    (OpenAI APIs without `continuous_usage_stats`). `spec_verify_ct` is the server's count
    of verify steps for this request (native API only; accept length is
    completion_tokens / spec_verify_ct). `spec_accept_histogram[k]` counts its verify steps
    that accepted k draft tokens (the bonus token not counted; native API only, empty where
    the server sent none).
    """

    ok: bool
    error_kind: str | None
    t_sent: float
    t_first: float | None
    t_done: float | None
    chunk_times: tuple[float, ...] = ()
    chunk_tokens: tuple[int, ...] = ()
    prompt_tokens: int | None = None
    completion_tokens: int = 0
    spec_verify_ct: int | None = None
    spec_accept_histogram: tuple[int, ...] = ()
    warmup: bool = False
    ramp: bool = False  # a shortened first request of a phase-spread start (`LevelPlan.stagger`)
    status_code: int | None = None
    error_detail: str | None = None
    prompt_index: int = 0
    #: the request's place in its phase's send order (0 = the level's first measured request);
    #: None in records written before it existed
    position: int | None = None
    #: the request's name in the study's request stream (`request_id`): two launches of a level
    #: sent the same request under the same id, so they pair request by request
    request_id: str | None = None

    def __post_init__(self) -> None:
        if self.ok and self.error_kind is not None:
            raise ValueError("a successful record cannot carry an error_kind")
        if not self.ok and self.error_kind not in ERROR_KINDS:
            raise ValueError(f"unknown error_kind {self.error_kind!r}; expected one of {ERROR_KINDS}")
        if not self.ok and self.completion_tokens:
            raise ValueError("a failed record must not carry completion tokens")
        if self.chunk_tokens and len(self.chunk_times) != len(self.chunk_tokens):
            raise ValueError("chunk_tokens must be empty (unknown) or match chunk_times")

    @property
    def ttft_s(self) -> float | None:
        """Seconds from sending to the first output-carrying event."""
        return None if self.t_first is None else self.t_first - self.t_sent

    def as_dict(self) -> dict:
        """JSON-ready form (tuples become lists)."""
        return {
            "ok": self.ok,
            "error_kind": self.error_kind,
            "t_sent": self.t_sent,
            "t_first": self.t_first,
            "t_done": self.t_done,
            "chunk_times": list(self.chunk_times),
            "chunk_tokens": list(self.chunk_tokens),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "spec_verify_ct": self.spec_verify_ct,
            "spec_accept_histogram": list(self.spec_accept_histogram),
            "warmup": self.warmup,
            "ramp": self.ramp,
            "status_code": self.status_code,
            "error_detail": self.error_detail,
            "prompt_index": self.prompt_index,
            "position": self.position,
            "request_id": self.request_id,
        }

    @classmethod
    def from_dict(cls, data: dict) -> RequestRecord:
        """Inverse of `as_dict`."""
        values = dict(data)
        values["chunk_times"] = tuple(values.get("chunk_times", ()))
        values["chunk_tokens"] = tuple(values.get("chunk_tokens", ()))
        values["spec_accept_histogram"] = tuple(values.get("spec_accept_histogram", ()))
        return cls(**values)


@dataclass(frozen=True)
class LevelResult:
    """Everything one closed-loop level produced.

    `records` holds warmup and measured requests alike (see `RequestRecord.warmup`),
    in completion order. `wall_s` is the level's whole wall time, warmup included;
    the measured window is computed from the records by `autospec.metrics`.
    """

    records: tuple[RequestRecord, ...]
    wall_s: float
    concurrency: int = 1
    api: str = "generate"
    metadata: dict = field(default_factory=dict)

    @property
    def measured(self) -> tuple[RequestRecord, ...]:
        """The records that count (warmup excluded)."""
        return tuple(r for r in self.records if not r.warmup)

    def as_dict(self) -> dict:
        """JSON-ready form, the inverse of `from_dict`."""
        return {
            "concurrency": self.concurrency,
            "api": self.api,
            "wall_s": self.wall_s,
            "metadata": dict(self.metadata),
            "records": [r.as_dict() for r in self.records],
        }

    @classmethod
    def from_dict(cls, data: dict) -> LevelResult:
        return cls(
            records=tuple(RequestRecord.from_dict(r) for r in data["records"]),
            wall_s=float(data["wall_s"]),
            concurrency=int(data.get("concurrency", 1)),
            api=str(data.get("api", "generate")),
            metadata=dict(data.get("metadata", {})),
        )
