"""Infeasibility learned from failures at init, and KV capacity learned from successes.

The two memory failures point in opposite directions, so each has its own monotone rule
(all other flags equal):

- ``kv_pool_too_small`` (SGLang: ``Not enough memory. Please try to increase
  --mem-fraction-static.``; 0.5.16: ``Loaded weights leave no GPU memory for the KV cache
  ...``): the KV pool is what is left of ``mem_fraction_static`` after weights and
  per-draft-token reserves. A configuration with *no more* mem-fraction and *at least as
  many* draft tokens, CUDA-graph batch size and running requests needs at least as much
  and is skipped.
- ``cuda_graph_oom`` (``Capture cuda graph failed``): activations and graphs live in the
  ``1 - mem_fraction_static`` headroom. A configuration with *at least* the mem-fraction,
  draft tokens, top-k and CUDA-graph batch size is skipped.
- ``weights_oom``: weights are loaded before the pool is sized, so mem-fraction does not
  help; every configuration with the same other flags is skipped.

Successful launches report ``max_total_num_tokens``; a least-squares fit of it on
(mem_fraction_static, draft tokens) predicts the pool of untried configurations, and any
configuration predicted to have no more KV tokens than one that failed with
``kv_pool_too_small`` is skipped too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

__all__ = ["LearnedRules", "MEMORY_FAILURES"]

MEM = "mem_fraction_static"
DRAFT = "speculative_num_draft_tokens"
STEPS = "speculative_num_steps"
TOPK = "speculative_eagle_topk"
GRAPH_BS = "cuda_graph_max_bs"
GRAPH_BS_DECODE = "cuda_graph_max_bs_decode"  # the name since sglang 0.5.16 (the only one from 0.5.20)
MRR = "max_running_requests"
_RESOURCE_KEYS = {MEM, DRAFT, STEPS, TOPK, GRAPH_BS, GRAPH_BS_DECODE, MRR}
MEMORY_FAILURES = ("kv_pool_too_small", "cuda_graph_oom", "weights_oom")

# Direction of each resource for each failure: +1 = "at least as much as the failure needs
# at least as much", -1 = "at most as much". Flags absent from both configurations match.
_DIRECTIONS: dict[str, dict[str, int]] = {
    "kv_pool_too_small": {MEM: -1, DRAFT: +1, GRAPH_BS: +1, MRR: +1},
    "cuda_graph_oom": {MEM: +1, DRAFT: +1, TOPK: +1, GRAPH_BS: +1},
    "weights_oom": {},
}


def _others(flags: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in flags.items() if k not in _RESOURCE_KEYS))


def _num(flags: Mapping[str, Any], key: str) -> float | None:
    v = flags.get(key)
    if key == GRAPH_BS and v is None:
        v = flags.get(GRAPH_BS_DECODE)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass
class LearnedRules:
    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    capacity: list[tuple[float, float, float]] = field(default_factory=list)  # (mem, draft, tokens)

    def record_failure(self, flags: Mapping[str, Any], kind: str) -> None:
        if kind in MEMORY_FAILURES:
            self.failures.append((kind, dict(flags)))

    def record_success(self, flags: Mapping[str, Any], startup: Mapping[str, Any]) -> None:
        tokens = startup.get("max_total_num_tokens") if startup else None
        mem, draft = _num(flags, MEM), _num(flags, DRAFT)
        if tokens and mem is not None:
            self.capacity.append((mem, draft or 0.0, float(tokens)))

    def explain(self, flags: Mapping[str, Any]) -> tuple[str, str] | None:
        """(rule id, one-line reason) when `flags` is predicted to fail; else None."""
        for kind, failed in self.failures:
            if _others(flags) != _others(failed):
                continue
            if all(self._dominates(flags, failed, key, sign) for key, sign in _DIRECTIONS[kind].items()):
                return f"learned_{kind}", (
                    f"predicted {kind}: needs at least what {_describe(failed)} needed, and that failed at init"
                )
        predicted = self.predict_tokens(flags)
        if predicted is not None:
            limit = max(
                (p for kind, f in self.failures if kind == "kv_pool_too_small" and _others(f) == _others(flags)
                 for p in [self.predict_tokens(f)] if p is not None),
                default=0.0,
            )
            if predicted <= limit:
                return "learned_kv_capacity", (
                    f"predicted KV pool of {predicted:,.0f} tokens is no more than a configuration that failed "
                    "with kv_pool_too_small (fit on max_total_num_tokens of earlier launches)"
                )
        return None

    @staticmethod
    def _dominates(flags: Mapping[str, Any], failed: Mapping[str, Any], key: str, sign: int) -> bool:
        a, b = _num(flags, key), _num(failed, key)
        if a is None or b is None:
            return a is None and b is None
        return a >= b if sign > 0 else a <= b

    def predict_tokens(self, flags: Mapping[str, Any]) -> float | None:
        """max_total_num_tokens predicted from successful launches, or None when the fit
        is not determined (fewer than 3 launches, or no spread in mem-fraction)."""
        mem = _num(flags, MEM)
        if mem is None or len(self.capacity) < 3:
            return None
        data = np.array(self.capacity)
        if np.ptp(data[:, 0]) < 1e-9:
            return None
        use_draft = np.ptp(data[:, 1]) > 0
        cols = [data[:, 0], np.ones(len(data))] + ([data[:, 1]] if use_draft else [])
        coef, *_ = np.linalg.lstsq(np.column_stack(cols), data[:, 2], rcond=None)
        x = [mem, 1.0] + ([_num(flags, DRAFT) or 0.0] if use_draft else [])
        return float(np.dot(coef, x))


def _describe(flags: Mapping[str, Any]) -> str:
    keys = [k for k in (STEPS, TOPK, DRAFT, MEM, GRAPH_BS) if k in flags]
    return ", ".join(f"{k}={flags[k]}" for k in keys) or "an earlier configuration"
