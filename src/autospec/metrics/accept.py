"""Accept length of one level from what the server exposes (pure).

The native API reports `spec_verify_ct` per request, and `summarize` forms accept
length from it (source "response"). The OpenAI APIs carry no speculative fields; for
them the figure comes from the server:

- **server_info**: `/server_info` (older `/get_server_info`) reports
  `internal_states[0].avg_spec_accept_length`, SGLang's accepted tokens per verify pass
  *cumulative since launch*. Read before and after a level, with the decode tokens
  served before (D0) and during (d) the level, it gives the level's own figure:
  verify passes before = D0 / A0, after = (D0 + d) / A1, and the level's accept length
  (decode tokens per pass) = d / (passes after - passes before). The client knows D0
  and d from its own records (every request it sent since launch, warmup included:
  completion tokens minus the first one, which comes from prefill); SGLang's own
  start-up warmup request (a few tokens) is not among them, so D0 is short by those.
- **log**: the scheduler's `Decode batch, #running-req: N, ... accept len: X.XX` lines
  (every `decode_log_interval` = 40 decode batches, each the accept length of its
  interval) printed while the level ran, averaged with weights N: the interval's
  verify passes are about 40 x N, so the weighted mean is decode tokens / passes.

Both count decode tokens only (SGLang's definition); the response figure counts every
completion token (`completion_tokens / spec_verify_ct`, the first token included). To
keep one meaning per figure, `per_request_definition` converts: with n requests and d
decode tokens in the level, passes = d / A and the response figure is (d + n) / passes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from autospec.request_records import RequestRecord

__all__ = [
    "accept_by_depth",
    "AcceptEstimate",
    "accept_from_log",
    "accept_from_server_info",
    "decode_tokens",
    "per_request_definition",
    "server_info_accept",
]

_DECODE_LINE = re.compile(r"Decode batch\b.*?#running-req:\s*(\d+).*?accept len:\s*([0-9.]+)")


@dataclass(frozen=True)
class AcceptEstimate:
    """A level's accept length (decode tokens per verify pass) and where it came from."""

    value: float
    source: str  # "server_info" | "log"


def accept_by_depth(records: Iterable[RequestRecord]) -> tuple[int, ...]:
    """Verify steps by the number of draft tokens they accepted (index k: k drafts accepted,
    the bonus token not counted), summed over the successful `records` that carry the
    server's histogram (`RequestRecord.spec_accept_histogram`); empty where none does."""
    total: list[int] = []
    for r in records:
        if not r.ok:
            continue
        for k, n in enumerate(r.spec_accept_histogram):
            if k == len(total):
                total.append(0)
            total[k] += n
    return tuple(total)


def server_info_accept(info: Mapping[str, Any] | None) -> float | None:
    """`internal_states[0].avg_spec_accept_length` of a /server_info answer (None when
    absent: no speculative decoding, or an older server)."""
    if not isinstance(info, Mapping):
        return None
    states = info.get("internal_states")
    state = states[0] if isinstance(states, list) and states else info
    value = state.get("avg_spec_accept_length") if isinstance(state, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def decode_tokens(records: Iterable[RequestRecord]) -> tuple[float, int]:
    """(decode tokens, requests) the server served for `records` (warmup included):
    completion tokens less the first, which prefill produced. A failed request counts
    what it streamed (its chunk counts) where known."""
    tokens, requests = 0.0, 0
    for r in records:
        streamed = r.completion_tokens if r.ok else sum(r.chunk_tokens)
        if streamed > 0:
            tokens += streamed - 1
            requests += 1
    return tokens, requests


def accept_from_server_info(before: float | None, decode_before: float, after: float | None, decode_level: float) -> float | None:
    """The level's decode tokens per verify pass from the cumulative averages before
    and after it (module docstring); None when it cannot be formed (no answer after
    the level, or none before it although tokens had been served)."""
    if after is None or after <= 0 or decode_level <= 0:
        return None
    if before is None and decode_before > 0:
        return None
    passes_before = decode_before / before if before and before > 0 else 0.0
    passes_after = (decode_before + decode_level) / after
    passes = passes_after - passes_before
    if passes <= 0:
        return None
    return decode_level / passes


def accept_from_log(text: str) -> float | None:
    """Weighted mean of the `accept len` of the decode lines in `text` (weights: the
    line's #running-req); None without such lines."""
    weighted = weights = 0.0
    for match in _DECODE_LINE.finditer(text):
        running, value = int(match.group(1)), float(match.group(2))
        if running > 0 and value > 0:
            weighted += running * value
            weights += running
    return weighted / weights if weights else None


def per_request_definition(decode_accept: float, decode_tokens: float, requests: int) -> float:
    """Decode tokens per pass -> completion tokens per pass (the response figure)."""
    if decode_accept <= 0 or decode_tokens <= 0:
        return decode_accept
    passes = decode_tokens / decode_accept
    return (decode_tokens + requests) / passes
