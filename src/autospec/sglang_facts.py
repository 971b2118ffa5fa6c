"""Facts about SGLang that several layers of autospec share, each with the SGLang
version it was checked against. It imports nothing of autospec, so the simulator
(`autospec.sim`) and SGLang's rule table (`autospec.sglang_rules`) read it too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_SGLANG_VERSION",
    "DRAFT_TOKENS",
    "STEPS",
    "TOPK",
    "MEM_FRACTION",
    "ALGORITHM",
    "ADAPTIVE_ALGORITHMS",
    "max_draft_tokens",
    "draft_token_range",
    "dedup_key",
    "POOL_SIZING_FLAGS",
]

# ServerArgs fields that never change what server runs: where it listens, its logs (sglang 0.5.16-0.5.23).
_IRRELEVANT = {"host", "port", "log_level", "random_seed"}

#: ServerArgs fields that only size the KV-cache pool (sglang 0.5.16-0.5.23: the pool's token
#: count, from which `max_running_requests` is derived when unset). A server holding every
#: request of a level at once, with room for all their tokens, runs the same batches at any
#: of their values: on the H200 the 8B-shaped EAGLE target read 169.5 / 170.9 / 171.7 tok/s
#: at C=1 with `mem_fraction_static` 0.105 / 0.13 / 0.2 (tests/fixtures/real_8b_eagle_mem.json).
POOL_SIZING_FLAGS = frozenset({"mem_fraction_static", "max_total_tokens"})


def dedup_key(resolved: Mapping[str, Any], ignore: frozenset[str] = frozenset()) -> str:
    """Canonical text of resolved server flags: equal keys mean the same server (`ignore`:
    fields left out as well, e.g. `POOL_SIZING_FLAGS`)."""
    skip = _IRRELEVANT | ignore
    canon = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in resolved.items() if k not in skip}
    return json.dumps(canon, sort_keys=True, default=str)


#: The release the static rules, log wording and flag names were last checked against;
#: used when neither the space file nor the server's Python says which one runs.
DEFAULT_SGLANG_VERSION = "0.5.23"

# ServerArgs field names (sglang 0.5.4-0.5.23) of the tunable speculative flags.
STEPS = "speculative_num_steps"
TOPK = "speculative_eagle_topk"
DRAFT_TOKENS = "speculative_num_draft_tokens"
MEM_FRACTION = "mem_fraction_static"
ALGORITHM = "speculative_algorithm"
#: The algorithms ``--speculative-adaptive`` runs for (sglang 0.5.23
#: ``adaptive_spec_params.adaptive_unsupported_reason``: EAGLE and EAGLE3; NEXTN is rewritten to EAGLE).
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")


def max_draft_tokens(steps: int, topk: int) -> int:
    """Most draft tokens an EAGLE tree of ``steps`` and ``topk`` can verify.

    SGLang picks the ``num_draft_tokens - 1`` best of ``topk + (steps - 1) * topk**2``
    scored candidates with ``torch.topk`` (sglang 0.5.23 ``speculative/eagle_utils.py``
    ``organize_draft_results``), so more than ``1 + topk + (steps - 1) * topk**2`` fails
    at the first decode; the argument checks do not catch it. With topk == 1 this is
    ``steps + 1``, the value SGLang forces for chains.
    """
    return 1 + topk + (steps - 1) * topk * topk


def draft_token_range(steps: int, topk: int, cap: int | None = None) -> tuple[int, int]:
    """Inclusive ``(low, high)`` of the draft tokens SGLang can run for ``steps`` and
    ``topk``: ``steps + 1`` up to `max_draft_tokens`, capped at ``cap`` (never below low)."""
    low = steps + 1
    high = max_draft_tokens(steps, topk)
    if cap is not None:
        high = min(high, max(cap, low))
    return low, max(low, high)
