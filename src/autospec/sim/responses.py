"""The JSON shapes of the simulator's generation responses, streamed or whole.

A :class:`Responder` turns a :class:`~autospec.sim.engine.Generation`'s steps into one
API's response on one connection. Shapes follow sglang 0.5.23 ``http_server.py`` and
``entrypoints/openai/serving_completions.py`` / ``serving_chat.py`` and the 0.5.16
captures in ``data/real-sglang-0.5.16-h200/eagle-probe.json``:

- ``/generate`` streams ``{"text": <cumulative>, "meta_info": {...}}`` per step;
  ``meta_info`` carries ``spec_verify_ct``, ``spec_accept_length``, ``spec_accept_rate``
  and ``spec_accept_histogram`` under speculation.
- ``/v1/completions`` streams one ``text_completion`` chunk per step (the new text);
  chat streams a role chunk, one content chunk per step and a finish chunk. With
  ``stream_options.continuous_usage_stats`` every content chunk carries the cumulative
  ``usage`` (completions: sglang 0.5.23; 0.5.16 did it for chat only; the simulator does
  it for both whatever its profile's version); with ``include_usage`` a last chunk with
  ``choices: []`` carries the usage (``exclude_none``), then ``data: [DONE]``.
- Whole responses: ``/generate`` as above; OpenAI ``text_completion`` / ``chat.completion``
  objects with ``usage`` and ``metadata.weight_version``.
"""

from __future__ import annotations

import time
from typing import Any

from autospec.sim.engine import Generation
from autospec.sim.http import HttpConnection, dumps
from autospec.sim.parsing import Parsed

__all__ = ["Responder"]

JSON = dict[str, Any]


class Responder:
    """Writes one request's response: ``on_step`` after each engine step; ``finish_now``
    for a request that ends without an engine step (max_new_tokens = 0)."""

    def __init__(
        self,
        conn: HttpConnection,
        parsed: Parsed,
        method: str,
        path: str,
        *,
        draft_tokens: int,
        truncate_after: int | None = None,
    ) -> None:
        self.conn = conn
        self.parsed = parsed
        self.method = method
        self.path = path
        self.draft_tokens = draft_tokens
        self.truncate_after = truncate_after  # fault: cut the stream after this many events
        self.created = int(time.time())
        self.role_sent = False

    # -- engine callbacks
    def start(self) -> None:
        """Before the first step: a stream's headers."""
        if self.parsed.stream:
            self.conn.start_stream(self.method, self.path)

    def on_step(self, gen: Generation, new_text: str) -> None:
        if self.parsed.stream:
            self._stream_step(gen, new_text)
            if gen.finished:
                self._stream_end(gen)
            elif self.truncate_after is not None and gen.events >= self.truncate_after:
                self.conn.cut_stream()
        elif gen.finished:
            self.conn.send_json(200, self.full_response(gen), self.method, self.path)

    def finish_now(self, gen: Generation) -> None:
        self.start()
        if self.parsed.stream:
            self._stream_end(gen)
        else:
            self.conn.send_json(200, self.full_response(gen), self.method, self.path)

    # -- pieces
    def meta_info(self, gen: Generation) -> JSON:
        """``meta_info`` as sglang 0.5.16 returns it (eagle-probe.json)."""
        meta: JSON = {
            "id": gen.rid,
            "finish_reason": gen.finish_reason(),
            "prompt_tokens": gen.prompt_tokens,
            "weight_version": "default",
            "completion_tokens": gen.completion_tokens,
            "cached_tokens": 0,
            "e2e_latency": time.perf_counter() - gen.created,
        }
        if gen.histogram is not None:
            verify = max(gen.verify_ct, 1)
            accepted_drafts = max(gen.completion_tokens - 1 - gen.verify_ct, 0)
            proposed = gen.verify_ct * (self.draft_tokens - 1)
            meta["spec_accept_rate"] = accepted_drafts / proposed if proposed else 0.0
            meta["spec_accept_length"] = gen.completion_tokens / verify
            meta["spec_verify_ct"] = gen.verify_ct
            meta["spec_accept_histogram"] = list(gen.histogram)
        return meta

    @staticmethod
    def usage(gen: Generation, exclude_none: bool) -> JSON:
        """``UsageInfo`` (0.5.16 fields), with or without its None fields."""
        usage: JSON = {
            "prompt_tokens": gen.prompt_tokens,
            "total_tokens": gen.prompt_tokens + gen.completion_tokens,
            "completion_tokens": gen.completion_tokens,
        }
        if not exclude_none:
            usage["prompt_tokens_details"] = None
        usage["reasoning_tokens"] = 0
        return usage

    def _running_usage(self, gen: Generation) -> JSON | None:
        return self.usage(gen, exclude_none=False) if self.parsed.continuous_usage else None

    def _stream_step(self, gen: Generation, new_text: str) -> None:
        api = self.parsed.api
        if api == "generate":
            payload: JSON = {"text": gen.text, "meta_info": self.meta_info(gen)}
        elif api == "completions":
            reason = gen.finish_reason()
            payload = {
                "id": gen.rid,
                "object": "text_completion",
                "created": self.created,
                "model": self.parsed.model,
                "choices": [
                    {
                        "index": 0,
                        "text": new_text,
                        "logprobs": None,
                        "finish_reason": reason["type"] if reason else None,
                        "matched_stop": reason.get("matched") if reason else None,
                    }
                ],
                "usage": self._running_usage(gen),
            }
        else:
            if not self.role_sent:
                self.role_sent = True
                self.conn.stream_event(dumps(self._chat_chunk(gen, {"role": "assistant", "content": ""})))
            payload = self._chat_chunk(gen, {"role": None, "content": new_text}, usage=self._running_usage(gen))
        self.conn.stream_event(dumps(payload))

    def _chat_chunk(
        self, gen: Generation, delta: JSON, finish: str | None = None, matched: Any = None, usage: JSON | None = None
    ) -> JSON:
        full_delta = {"role": delta.get("role"), "content": delta.get("content"), "reasoning_content": None, "tool_calls": None}
        return {
            "id": gen.rid,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.parsed.model,
            "choices": [{"index": 0, "delta": full_delta, "logprobs": None, "finish_reason": finish, "matched_stop": matched}],
            "usage": usage,
        }

    def _stream_end(self, gen: Generation) -> None:
        api = self.parsed.api
        reason = gen.finish_reason() or {}
        if api == "chat":
            self.conn.stream_event(dumps(self._chat_chunk(gen, {}, reason.get("type"), reason.get("matched"))))
        if api != "generate" and self.parsed.include_usage:
            chunk: JSON = {
                "id": gen.rid,
                "object": "text_completion" if api == "completions" else "chat.completion.chunk",
                "created": self.created,
                "model": self.parsed.model,
                "choices": [],
                "usage": self.usage(gen, exclude_none=api == "completions"),
            }
            self.conn.stream_event(dumps(chunk))
        self.conn.stream_event(b"[DONE]")
        self.conn.end_stream()

    def full_response(self, gen: Generation) -> JSON:
        api = self.parsed.api
        reason = gen.finish_reason() or {}
        if api == "generate":
            return {"text": gen.text, "meta_info": self.meta_info(gen)}
        usage = self.usage(gen, exclude_none=False)
        if api == "completions":
            choice = {
                "index": 0,
                "text": gen.text,
                "logprobs": None,
                "finish_reason": reason.get("type"),
                "matched_stop": reason.get("matched"),
            }
            return {
                "id": gen.rid,
                "object": "text_completion",
                "created": self.created,
                "model": self.parsed.model,
                "choices": [choice],
                "usage": usage,
                "metadata": {"weight_version": "default"},
            }
        message = {"role": "assistant", "content": gen.text, "reasoning_content": None, "tool_calls": None}
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": reason.get("type"),
            "matched_stop": reason.get("matched"),
        }
        return {
            "id": gen.rid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.parsed.model,
            "choices": [choice],
            "usage": usage,
            "metadata": {"weight_version": "default"},
        }
