"""SGLang's streaming wire formats: request bodies and event parsing (pure, no I/O).

Checked against sglang 0.5.23 (the wheel's `srt/entrypoints/http_server.py`,
`srt/entrypoints/openai/serving_completions.py`, `serving_chat.py`, `serving_base.py`,
`protocol.py`, `managers/tokenizer_manager.py`):

- native `POST /generate` with `"stream": true` sends `data: {json}\\n\\n` events,
  each `{"text": <cumulative text>, "meta_info": {"prompt_tokens", "completion_tokens"
  (cumulative), "finish_reason" (null until the last event; {"type": "stop"|"length"|
  "abort", ...}), "spec_verify_ct" (speculative decoding only), ...}}`, then
  `data: [DONE]`. An error inside the stream is `data: {"error": {"message", ...}}`
  followed by `data: [DONE]`.
- OpenAI `POST /v1/completions` and `/v1/chat/completions` stream `choices[0].text`
  (completions) or `choices[0].delta.content` / `.reasoning_content` (chat) deltas.
  With `stream_options: {"include_usage": true}` a last chunk with `choices: []`
  carries `usage`; with `"continuous_usage_stats": true` every chunk carries the
  cumulative `usage` too (which gives per-chunk token counts). Errors mid-stream are
  `data: {"error": {...}}` (or `{"object": "error", ...}` in some versions), then
  `data: [DONE]`. SGLang accepts `ignore_eos` and `top_p` on both endpoints.
- `top_k` (sample among the k most likely tokens; SGLang's default -1 is every token)
  is a field of `/generate`'s `sampling_params` and one of SGLang's extra fields of
  both OpenAI requests (`CompletionRequest.top_k`, `ChatCompletionRequest.top_k`,
  passed on to the sampling parameters). A workload without `top_k` sends none. The
  native field was exercised against real sglang 0.5.16 on an H200.

`StreamProgress.feed(data, t)` consumes one SSE `data:` payload; `SseSplitter` cuts a
byte stream into those payloads. Token counts always come from the server
(`meta_info.completion_tokens` / `usage.completion_tokens`), never from counting
chunks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from autospec.bench.workloads import Prompt, Workload
from autospec.errors import BenchError
from autospec.request_records import RequestRecord

ENDPOINTS = {
    "generate": "/generate",
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
}

DONE_MARKER = "[DONE]"


def sampling_seed(workload: Workload, position: int) -> int:
    """The per-request sampling seed of the request at `position` of a level's measured
    phase: the same in every launch of a study (a function of the workload's seed and the
    position only), below 2**31."""
    digest = hashlib.sha256(f"autospec-sampling:{workload.seed}:{position}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def build_request(
    workload: Workload, prompt: Prompt, model: str | None, output_len: int | None = None, position: int | None = None
) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of one streaming request for `workload.api`; `output_len`
    replaces the workload's. With `workload.sampling_seed` and a `position`, a native
    request carries `sampling_params.sampling_seed` (`sampling_seed`).

    SGLang's `SamplingParams.sampling_seed` (0.5.16, checked again in 0.5.23's source) is
    honoured only by the pytorch sampling backend (`--sampling-backend pytorch`); the
    flashinfer backend asserts it is unset and the request fails, so it is sent only where
    the workload asks for it. On an H200 with 0.5.16 the same seed sent twice agreed on 2
    tokens and then diverged (with and without NGRAM): it does not make a request repeat by
    itself, and pairing rests on matched prompts and positions (docs/benchmarking.md)."""
    max_tokens = output_len or workload.output_len
    if workload.api == "generate":
        params: dict[str, Any] = {"max_new_tokens": max_tokens, **workload.sampling_params()}
        if workload.sampling_seed and position is not None:
            params["sampling_seed"] = sampling_seed(workload, position)
        body: dict[str, Any] = {"text": prompt.text, "sampling_params": params, "stream": True}
        return ENDPOINTS["generate"], body
    body = {
        "max_tokens": max_tokens,
        **workload.sampling_params(),
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if model:
        body["model"] = model
    if workload.api == "chat":
        body["messages"] = [dict(m) for m in prompt.messages]
    else:
        body["prompt"] = prompt.text
    return ENDPOINTS[workload.api], body


class SseSplitter:
    """Cuts a byte stream into SSE `data` payloads (str), one per event.

    Follows the SSE framing rules that matter here: lines end in LF or CRLF, an
    empty line ends an event, several `data:` lines of one event are joined by LF,
    comments (`:`) and other fields are ignored. `flush()` returns a final event
    that lacked its terminating empty line.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += chunk
        if b"\n" not in chunk:
            return []
        *lines, self._buffer = self._buffer.split(b"\n")
        events: list[str] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                if value.startswith(b" "):
                    value = value[1:]
                self._data.append(value.decode("utf-8", errors="replace"))
        return events

    def flush(self) -> list[str]:
        tail = self.feed(b"\n\n") if self._buffer or self._data else []
        return tail


class StreamError(BenchError):
    """One request's stream failed: raised by `StreamProgress.feed` when the stream
    reports or shows a failure. `kind` is one of `autospec.request_records.ERROR_KINDS`;
    the client turns it into a failed `RequestRecord` and does not let it escape."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass
class StreamProgress:
    """What has arrived so far on one stream; becomes a `RequestRecord`."""

    api: str
    t_first: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    counts_per_chunk: bool = True
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    spec_accept_histogram: tuple[int, ...] = ()
    finished: bool = False
    t_finished: float | None = None
    status_code: int | None = None

    def feed(self, data: str, t: float) -> None:
        """Consume one SSE data payload that arrived at `t` (raises StreamError)."""
        if data == DONE_MARKER:
            if not self.finished:
                self.finished = True
                self.t_finished = t
            return
        if self.finished:
            return
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            raise StreamError("protocol", f"event is not JSON: {data[:120]!r}") from None
        if not isinstance(event, dict):
            raise StreamError("protocol", f"event is not a JSON object: {data[:120]!r}")
        if "error" in event or event.get("object") == "error":
            raise StreamError("stream_error", _error_message(event))
        if self.api == "generate":
            self._feed_native(event, t)
        else:
            self._feed_openai(event, t)

    def _feed_native(self, event: dict, t: float) -> None:
        meta = event.get("meta_info")
        if not isinstance(meta, dict) or not isinstance(meta.get("completion_tokens"), int):
            raise StreamError("protocol", "native event without meta_info.completion_tokens")
        self._count(meta["completion_tokens"], t, has_text=bool(event.get("text")))
        if isinstance(meta.get("prompt_tokens"), int):
            self.prompt_tokens = meta["prompt_tokens"]
        if isinstance(meta.get("spec_verify_ct"), int):
            self.spec_verify_ct = meta["spec_verify_ct"]
        # verify steps by accepted draft tokens: SGLang 0.5.16 and 0.5.23 name it
        # spec_correct_drafts_histogram (tokenizer_manager.py), the simulator spec_accept_histogram
        histogram = meta.get("spec_correct_drafts_histogram", meta.get("spec_accept_histogram"))
        if isinstance(histogram, list) and all(isinstance(n, int) for n in histogram):
            self.spec_accept_histogram = tuple(histogram)
        finish = meta.get("finish_reason")
        if isinstance(finish, dict) and finish.get("type") == "abort":
            raise StreamError("stream_error", f"request aborted: {finish.get('message', 'no message')}")

    def _feed_openai(self, event: dict, t: float) -> None:
        usage = event.get("usage")
        cumulative = None
        if isinstance(usage, dict):
            if isinstance(usage.get("prompt_tokens"), int):
                self.prompt_tokens = usage["prompt_tokens"]
            if isinstance(usage.get("completion_tokens"), int):
                cumulative = usage["completion_tokens"]
        choices = event.get("choices")
        if not choices:
            # The usage-only chunk (include_usage) or an empty keep-alive: no output.
            if cumulative is not None:
                self.completion_tokens = cumulative
            return
        choice = choices[0] if isinstance(choices, list) and isinstance(choices[0], dict) else None
        if choice is None:
            raise StreamError("protocol", "OpenAI event with malformed choices")
        if self.api == "chat":
            delta = choice.get("delta") or {}
            text = (delta.get("content") or "") + (delta.get("reasoning_content") or "")
        else:
            text = choice.get("text") or ""
        if cumulative is not None:
            self._count(cumulative, t, has_text=bool(text))
        elif text:
            # No per-chunk usage: the chunk's token count is unknown.
            self.counts_per_chunk = False
            self._mark_output(t, 0)

    def _count(self, cumulative: int, t: float, has_text: bool) -> None:
        previous = self.completion_tokens or 0
        self.completion_tokens = cumulative
        if cumulative > previous:
            self._mark_output(t, cumulative - previous)
        elif has_text and not self.chunk_times:
            # Text before any counted token (should not happen with SGLang): first output.
            self._mark_output(t, 0)

    def _mark_output(self, t: float, tokens: int) -> None:
        if self.t_first is None:
            self.t_first = t
        self.chunk_times.append(t)
        self.chunk_tokens.append(tokens)

    def to_record(
        self,
        t_sent: float,
        t_end: float,
        *,
        warmup: bool,
        prompt_index: int,
        error: StreamError | None = None,
        position: int | None = None,
        request_id: str | None = None,
    ) -> RequestRecord:
        """The final record: ok only when the stream reached `[DONE]` without error
        and the server reported a completion-token count."""
        if error is None:
            error = self._final_error()
        return RequestRecord(
            ok=error is None,
            error_kind=None if error is None else error.kind,
            error_detail=None if error is None else error.detail[:500],
            t_sent=t_sent,
            t_first=self.t_first,
            t_done=self.t_finished if error is None and self.t_finished is not None else t_end,
            chunk_times=tuple(self.chunk_times),
            chunk_tokens=tuple(self.chunk_tokens) if self.counts_per_chunk else (),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=0 if error is not None else int(self.completion_tokens or 0),
            spec_verify_ct=self.spec_verify_ct,
            spec_accept_histogram=self.spec_accept_histogram,
            warmup=warmup,
            status_code=self.status_code,
            prompt_index=prompt_index,
            position=position,
            request_id=request_id,
        )

    def _final_error(self) -> StreamError | None:
        """What is wrong with a stream that raised nothing: no end marker, or no count."""
        if not self.finished:
            return StreamError("truncated", "stream ended before data: [DONE]")
        if self.completion_tokens is None:
            return StreamError("protocol", "stream finished without a completion-token count (usage)")
        return None


def _error_message(event: dict) -> str:
    err = event.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    if err is not None:
        return str(err)
    return str(event.get("message") or event)
