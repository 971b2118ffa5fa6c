"""Generation request bodies -> one API-independent :class:`Parsed` request (pure).

Fields read, per endpoint (sglang 0.5.23 ``io_struct.GenerateReqInput`` and
``entrypoints/openai/protocol.py``; only what the simulator uses):

- ``POST /generate``: ``text`` or ``input_ids`` (one prompt), ``sampling_params``
  (``max_new_tokens`` default 128, ``temperature`` default 1.0, ``top_k``, ``ignore_eos``),
  ``stream``.
- ``POST /v1/completions``: ``prompt`` (a string, a list of token ids, or a one-element
  list of either), ``max_tokens`` (default 16, must be positive), ``temperature``,
  ``top_k`` (one of SGLang's extra fields), ``ignore_eos``, ``stream``, ``stream_options``
  (``include_usage``, ``continuous_usage_stats``), ``model``.
- ``POST /v1/chat/completions``: ``messages`` (string or text-part contents),
  ``max_completion_tokens`` or ``max_tokens`` (default: what the context leaves), the rest
  as for completions.

``top_k`` is checked as SGLang's ``SamplingParams.verify`` checks it (-1, SGLang's
default, is every token; otherwise at least 1) and kept in :class:`Parsed`; the
performance model does not use it (acceptance depends on the temperature alone).

Tokenizer: whitespace words (a prompt's token count is its number of whitespace-separated
words; ``input_ids``/token lists count their ids). Bad bodies raise :class:`ApiError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ApiError", "Parsed", "count_tokens", "error_body", "parse_chat", "parse_completions", "parse_generate"]

JSON = dict[str, Any]


class ApiError(Exception):
    """An HTTP error answer: status, message, and SGLang's error ``type``."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.status = status
        self.err_type = err_type


def error_body(status: int, message: str, err_type: str) -> JSON:
    """sglang ``entrypoints/openai/protocol.py`` ``ErrorResponse``."""
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": status}


@dataclass(frozen=True)
class Parsed:
    """A generation request, API-independent."""

    api: str  # "generate" | "completions" | "chat"
    prompt_text: str | None  # None when the prompt came as token ids
    prompt_tokens: int
    max_new_tokens: int
    temperature: float
    top_k: int  # -1: every token (SGLang's default); not used by the performance model
    ignore_eos: bool
    stream: bool
    include_usage: bool  # stream_options.include_usage: a final usage-only chunk
    continuous_usage: bool  # stream_options.continuous_usage_stats: usage on every content chunk
    model: str


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: whitespace-separated words."""
    return len(text.split())


def _as_int(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ApiError(400, f"{name} must be an integer, got {value!r}")
    return int(value)


def _as_float(value: Any, name: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{name} must be a number, got {value!r}")
    return float(value)


def _top_k(value: Any) -> int:
    """SGLang's check (sglang 0.5.23 ``sampling_params.py``; its wording)."""
    top_k = _as_int(value, "top_k", -1)
    if top_k < 1 and top_k != -1:
        raise ApiError(400, f"top_k must be -1 (disable) or at least 1, got {top_k}.")
    return top_k


def _stream_options(body: JSON) -> tuple[bool, bool]:
    """(include_usage, continuous_usage_stats); SGLang's should_include_usage with the
    server default stream_response_default_include_usage=False."""
    options = body.get("stream_options")
    if not isinstance(options, dict):
        return False, False
    return bool(options.get("include_usage")), bool(options.get("continuous_usage_stats"))


def _openai_common(body: JSON, served_model: str) -> JSON:
    include_usage, continuous = _stream_options(body)
    return {
        "temperature": _as_float(body.get("temperature"), "temperature", 1.0),
        "top_k": _top_k(body.get("top_k")),
        "ignore_eos": bool(body.get("ignore_eos", False)),
        "stream": bool(body.get("stream", False)),
        "include_usage": include_usage,
        "continuous_usage": continuous,
        "model": str(body.get("model") or served_model),
    }


def parse_generate(body: JSON, served_model: str) -> Parsed:
    """SGLang's native /generate body."""
    text = body.get("text")
    ids = body.get("input_ids")
    if isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
        raise ApiError(400, "batched /generate requests are not supported by the simulator; send one prompt")
    if text is None and ids is None:
        raise ApiError(400, "Either text, input_ids or input_embeds should be provided.")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise ApiError(400, "sampling_params must be an object")
    if text is not None:
        if not isinstance(text, str):
            raise ApiError(400, "text must be a string")
        prompt_text, prompt_tokens = text, count_tokens(text)
    else:
        prompt_text, prompt_tokens = None, len(ids or [])
    return Parsed(
        api="generate",
        prompt_text=prompt_text,
        prompt_tokens=prompt_tokens,
        max_new_tokens=_as_int(params.get("max_new_tokens"), "max_new_tokens", 128),
        temperature=_as_float(params.get("temperature"), "temperature", 1.0),
        top_k=_top_k(params.get("top_k")),
        ignore_eos=bool(params.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)),
        include_usage=False,
        continuous_usage=False,
        model=served_model,
    )


def parse_completions(body: JSON, served_model: str) -> Parsed:
    """The OpenAI /v1/completions body (one prompt per request)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        prompt_text, prompt_tokens = prompt, count_tokens(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt_text, prompt_tokens = None, len(prompt)
    else:
        raise ApiError(400, "prompt must be a string or a list of token ids (one prompt per request)")
    max_tokens = _as_int(body.get("max_tokens"), "max_tokens", 16)
    if max_tokens <= 0:
        raise ApiError(400, "max_tokens must be positive")
    return Parsed(
        api="completions",
        prompt_text=prompt_text,
        prompt_tokens=prompt_tokens,
        max_new_tokens=max_tokens,
        **_openai_common(body, served_model),
    )


def parse_chat(body: JSON, served_model: str, context_len: int) -> Parsed:
    """The OpenAI /v1/chat/completions body; the prompt is the messages' text joined."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    prompt_text = "\n".join(parts)
    prompt_tokens = count_tokens(prompt_text)
    unbounded = max(context_len - prompt_tokens, 1)  # neither field given: up to the context length
    max_tokens = _as_int(
        body.get("max_completion_tokens"), "max_completion_tokens", _as_int(body.get("max_tokens"), "max_tokens", unbounded)
    )
    return Parsed(
        api="chat",
        prompt_text=prompt_text,
        prompt_tokens=prompt_tokens,
        max_new_tokens=max_tokens,
        **_openai_common(body, served_model),
    )
