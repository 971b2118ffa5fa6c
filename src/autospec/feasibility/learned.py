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

Successful launches also predict untried configurations before they fail (see
`LearnedRules.predict_tokens` and `predict_available_gb`): the KV pool from
``max_total_num_tokens``, the KV size and the free memory before loading, and the
headroom for activations and CUDA graphs from ``available_gpu_mem``. A configuration
predicted to have an empty pool or no headroom, or no more than a configuration that
failed that way, is skipped.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autospec.sglang_facts import DRAFT_TOKENS as DRAFT
from autospec.sglang_facts import MEM_FRACTION as MEM
from autospec.sglang_facts import STEPS, TOPK

__all__ = ["LearnedRules", "MEMORY_FAILURES"]

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


@dataclass(frozen=True)
class _Launch:
    """What one successful launch showed about memory (per GPU)."""

    others: tuple
    mem: float
    draft: float
    tokens: float
    pre_load_gb: float | None  # free memory before weights: what mem_fraction_static is a fraction of
    gb_per_token: float | None  # KV bytes per token, from the pool's K + V size
    available_gb: float | None  # free after init (activations, CUDA graphs live here)
    graph_units: float = 1.0  # how big its CUDA graphs are, relative (`_graph_units`)
    graph_gb: float | None = None  # what its CUDA-graph captures took (from the capture lines)
    mrr: float | None = None  # the max_running_requests flag it was given, when it was

    def tokens_per_mem(self) -> float | None:
        """KV tokens one unit of mem-fraction buys (pre_load_gb / gb_per_token); None
        when the log did not give both."""
        if self.pre_load_gb and self.gb_per_token:
            return self.pre_load_gb / self.gb_per_token
        return None

    def headroom_at(self, mem: float, graph_units: float | None = None) -> float | None:
        """Free memory after init at mem-fraction ``mem`` for a configuration whose CUDA
        graphs are `graph_units` big: each extra unit of mem-fraction moves pre_load_gb
        from the headroom into the static pool, and bigger graphs take more of what is
        left. None when the log did not give the figures it needs."""
        if self.available_gb is None or not self.pre_load_gb:
            return None
        free = self.available_gb - (mem - self.mem) * self.pre_load_gb
        if graph_units is None or graph_units <= self.graph_units:
            return free
        if self.graph_gb is None:
            return None  # bigger graphs than any seen, and no graph size logged: cannot tell
        return free - self.graph_gb * (graph_units / self.graph_units - 1.0)


@dataclass
class LearnedRules:
    """Memory failures predicted from earlier launches. `bisect`: in the band between the
    largest predicted amount that failed and the least that worked, skip what lies below
    the halfway mark (`_unsure_below`); off, only what is known to fail is skipped (the
    `--sampler model` study weighs that band itself, by its own p_start)."""

    failures: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    launches: list[_Launch] = field(default_factory=list)
    bisect: bool = True

    def record_failure(self, flags: Mapping[str, Any], kind: str) -> None:
        if kind in MEMORY_FAILURES:
            self.failures.append((kind, dict(flags)))

    def record_success(self, flags: Mapping[str, Any], startup: Mapping[str, Any]) -> None:
        tokens = (startup or {}).get("max_total_num_tokens")
        mem = _num(flags, MEM)
        if not tokens or mem is None:
            return
        kv_gb = startup.get("kv_cache_gb")
        kv_tokens = startup.get("kv_cache_tokens") or tokens
        self.launches.append(
            _Launch(
                others=_others(flags),
                mem=mem,
                draft=_num(flags, DRAFT) or 0.0,
                tokens=float(tokens),
                pre_load_gb=startup.get("gpu_mem_before_load_gb"),
                gb_per_token=(kv_gb / kv_tokens) if kv_gb and kv_tokens else None,
                available_gb=startup.get("available_gpu_mem_gb"),
                graph_units=_graph_units(flags),
                graph_gb=startup.get("cuda_graph_gb"),
                mrr=_num(flags, MRR),
            )
        )

    def explain(self, flags: Mapping[str, Any]) -> tuple[str, str] | None:
        """(rule id, one-line reason) when `flags` is predicted to fail; else None."""
        for kind, failed in self.failures:
            if _others(flags) != _others(failed):
                continue
            if all(self._dominates(flags, failed, key, sign) for key, sign in _DIRECTIONS[kind].items()):
                return f"learned_{kind}", (
                    f"predicted {kind}: needs at least what {_describe(failed)} needed, and that failed at init"
                )
        tokens = self.predict_tokens(flags)
        if tokens is not None and tokens < self._unsure_below(
            "kv_pool_too_small", flags, self.predict_tokens, [launch.tokens for launch in self._comparable(flags)]
        ):
            pool = (
                f"predicted KV pool of {tokens:,.0f} tokens is too small"
                if tokens >= 1
                else "predicted to leave no room for the KV pool"
            )
            return "learned_kv_capacity", (
                f"{pool} (below the halfway mark between the largest pool that failed and the smallest that "
                "worked; from max_total_num_tokens and KV sizes of earlier launches)"
            )
        free = self.predict_available_gb(flags)
        proven = [a for launch in self._comparable(flags) if (a := launch.available_gb) is not None]
        if free is not None and free < self._unsure_below("cuda_graph_oom", flags, self.predict_available_gb, proven):
            headroom = (
                f"predicted {free:.2f} GB left for activations and CUDA graphs"
                if free >= 0.005
                else "predicted to leave no memory for activations and CUDA graphs"
            )
            return "learned_graph_headroom", (
                f"{headroom} (below the halfway mark between the most that failed and the least that worked; "
                "from available_gpu_mem and the CUDA-graph sizes of earlier launches)"
            )
        return None

    def _unsure_below(
        self, kind: str, flags: Mapping[str, Any], predictor: Callable[[Mapping[str, Any]], float | None], proven: Sequence[float]
    ) -> float:
        """The least predicted amount (KV pool, or headroom after init) at which `flags`
        is launched. Known to fail: at or below the largest prediction among comparable
        failures (`_limit`, 0 without). Known to work: the least amount a comparable
        launch started with. In between the model is unsure, and a launch may go at most
        halfway from what failed towards what worked: each launch there either works
        (the proven bound moves down) or fails (the failed bound moves up), so the
        uncertain band halves with every launch instead of being crossed blind."""
        failed = max(self._limit(kind, flags, predictor), 0.0)
        worked = min(proven, default=None)
        if worked is None or worked <= failed or not self.bisect:
            return failed + 1e-9  # nothing proven above what failed: only the failure itself rules
        return (failed + worked) / 2.0

    def _limit(self, kind: str, flags: Mapping[str, Any], predictor: Callable[[Mapping[str, Any]], float | None]) -> float:
        """Largest prediction among comparable observed failures of `kind` (0 when none):
        anything predicted at or below it is expected to fail the same way. Every
        failure counts: a KV pool is too small below a size that does not depend on the
        draft, and the headroom after init is predicted net of each configuration's own
        CUDA graphs (`predict_available_gb`), so what is left for activations has to clear
        the same bar whatever the draft."""
        values = [predictor(f) for k, f in self.failures if k == kind and _others(f) == _others(flags)]
        return max([v for v in values if v is not None], default=0.0)

    @staticmethod
    def _dominates(flags: Mapping[str, Any], failed: Mapping[str, Any], key: str, sign: int) -> bool:
        a, b = _num(flags, key), _num(failed, key)
        if a is None or b is None:
            return a is None and b is None
        return a >= b if sign > 0 else a <= b

    def _comparable(self, flags: Mapping[str, Any]) -> list[_Launch]:
        return [launch for launch in self.launches if launch.others == _others(flags)]

    def predict_tokens(self, flags: Mapping[str, Any]) -> float | None:
        """max_total_num_tokens expected for `flags`, or None when earlier launches do not
        determine it.

        SGLang sizes the pool as mem_fraction_static x (free memory before loading) minus
        what is loaded and reserved (sglang 0.5.x, model_runner/kv_cache_configurator), so
        tokens grow by pre_load_gb / gb_per_token per unit of mem-fraction: both numbers
        are in the log. What else is reserved grows with the draft, and on hybrid models
        (state per request slot and draft position, sglang 0.5.10 handle_max_mamba_cache)
        with max_running_requests x draft. Each of those is fitted when two values of it
        were seen, and the smaller prediction is kept (a larger reserve is the safe
        guess); with one draft value seen, only configurations with at least those draft
        tokens are predicted (an upper bound on their reserve, so no false alarm)."""
        mem, draft = _num(flags, MEM), _num(flags, DRAFT) or 0.0
        seen = self._comparable(flags)
        if mem is None or not seen:
            return None
        physical = [(launch, per) for launch in seen if (per := launch.tokens_per_mem()) is not None]
        if not physical:
            return self._fit_tokens(seen, mem, draft)
        per_mem = statistics.median(per for _, per in physical)
        residual = [(launch, launch.tokens - launch.mem * per_mem) for launch, _ in physical]
        slots = _num(flags, MRR)
        fits = [_linear(residual, lambda launch: launch.draft, draft)]
        if slots is not None and all(launch.mrr is not None for launch, _ in residual):
            fits.append(_linear(residual, lambda launch: (launch.mrr or 0.0) * launch.draft, slots * draft))
        predicted = [f for f in fits if f is not None]
        if predicted:
            return float(min(predicted) + mem * per_mem)
        base = [r for launch, r in residual if launch.draft <= draft]
        return float(max(base) + mem * per_mem) if base else None

    @staticmethod
    def _fit_tokens(seen: list[_Launch], mem: float, draft: float) -> float | None:
        """Without KV sizes in the log: least squares on (mem, draft) over >= 3 launches."""
        if len(seen) < 3:
            return None
        data = np.array([(launch.mem, launch.draft, launch.tokens) for launch in seen])
        if np.ptp(data[:, 0]) < 1e-9:
            return None
        use_draft = np.ptp(data[:, 1]) > 0
        cols = [data[:, 0], np.ones(len(data))] + ([data[:, 1]] if use_draft else [])
        coef, *_ = np.linalg.lstsq(np.column_stack(cols), data[:, 2], rcond=None)
        return float(np.dot(coef, [mem, 1.0] + ([draft] if use_draft else [])))

    def predict_available_gb(self, flags: Mapping[str, Any]) -> float | None:
        """Free memory after init expected for `flags`: every extra unit of mem-fraction
        moves pre_load_gb from the headroom into the static pool, and bigger CUDA graphs
        (more draft tokens, a wider top-k: `_graph_units`) take more of it. The most
        pessimistic prediction over the comparable launches; None when none can tell."""
        mem = _num(flags, MEM)
        if mem is None:
            return None
        units = _graph_units(flags)
        predictions = [h for launch in self._comparable(flags) if (h := launch.headroom_at(mem, units)) is not None]
        return min(predictions, default=None)


def _linear(points: Sequence[tuple[_Launch, float]], x_of: Callable[[_Launch], float], x: float) -> float | None:
    """The least-squares line through (x_of(launch), value) at `x`; None with fewer than
    two distinct x values."""
    xs = [x_of(launch) for launch, _ in points]
    if len(set(xs)) < 2:
        return None
    slope, intercept = np.polyfit(xs, [value for _, value in points], 1)
    return float(intercept + slope * x)


def _graph_units(flags: Mapping[str, Any]) -> float:
    """How big a configuration's CUDA graphs are, relative to another's: sglang 0.5.16
    captures, per batch size, a verify graph of `draft tokens` per request and a draft
    decode graph of `top-k` per request (the capture lines say so), so their size grows
    with draft tokens + top-k, and with the graph batch size. Scaling the whole capture,
    prefill graphs included, overestimates the growth: the safe side."""
    draft = _num(flags, DRAFT) or 1.0
    topk = _num(flags, TOPK) or 1.0
    batch = _num(flags, GRAPH_BS) or 1.0
    return (draft + topk) * batch


def _describe(flags: Mapping[str, Any]) -> str:
    keys = [k for k in (STEPS, TOPK, DRAFT, MEM, GRAPH_BS) if k in flags]
    return ", ".join(f"{k}={flags[k]}" for k in keys) or "an earlier configuration"
