"""The decode step and the benchmark replayed from it: the model's physics, written once
(pure numpy). The fit (`performance.PerformanceModel`) compares these figures with what
each launch measured; the prediction reports them for configurations not launched.

**Step cost.** One decode iteration of a batch of B requests with a draft shape of S draft
passes, topk k and D verified tokens per request costs (ms)::

    t(B) = c0 + c1 * B * D + c2 * B + c3 * S + c4 * S * B * k + tree * (c5 * B * D + c6)
           + c7 * (1 - 2^(-B * D / h))

c0 is the memory-bound floor of the target's verify pass (weights read once, kernel
launches, all-reduce), c1 the compute and attention per verified token, c2 the per-request
work (sampling, KV reads, scheduling), c3 and c4 the S sequential draft passes (a floor each
and k tokens per request), c5 and c6 building and masking the verify tree (topk > 1). The
last term is mixture-of-experts weight traffic: a pass reads only the experts its B * D
tokens route to, and with tokens routed independently the share of experts touched is
``1 - (1 - k_e / E)^(B * D)``, written here with h, the number of tokens that touch half of
them (a dense model fits c7 near 0). NGRAM has no draft passes (S = 0).

**The benchmark, replayed.** A level sends n requests of L output tokens from C closed-loop
workers; SGLang runs at most R of them at once (R = ``max_running_requests``), B = min(C, R).
A batch costs a prefill, ``o0 + o1 * B``, then ``(L - 1) / E`` decode steps of t(B), E the
accept length. How the n requests share the slots lies between two ends: identical requests
in lockstep run in waves of B, the last one partial (n = 64, R = 21: three full waves and one
of a single request); requests that drift apart keep every slot busy and need n / B
batch-times (continuous batching's fluid limit). The model mixes them with the wave share
phi (ms)::

    waves      = sum_waves (o0 + o1 * B_w + (L - 1) / E * t(B_w))
    fluid      = n / B * (o0 + o1 * B + (L - 1) / E * t(B))
    aggregate  = n * L / (phi * waves + (1 - phi) * fluid)
    per request (C <= R) = L / (o0 + o1 * C + (L - 1) / E * t(C));   (C > R: aggregate / C)
    tpot       = phi * (request-weighted mean of t(B_w)) / E + (1 - phi) * t(B) / E
    decode     = E / t(B)
    ttft       = o0 + o1 * B   (the first wave's prefill; queueing not modelled)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from autospec.model.parameters import Group, Layout
from autospec.model.shape import Shape

__all__ = ["STEP_COST", "PREFILL", "WAVE", "Rates", "ShapeArrays", "Levels", "LevelFigures", "step_time", "replay"]

#: The step cost's coefficients c0..c7 (ms) and h (tokens), fitted on a log scale (all positive).
STEP_COST = Group(
    "step cost",
    (
        "floor",
        "per_verified_token",
        "per_request",
        "per_draft_pass",
        "per_draft_token",
        "tree_per_token",
        "tree_floor",
        "expert_traffic",
        "half_experts_tokens",
    ),
    scale="log",
)
#: The prefill of a batch, o0 + o1 * B (ms), fitted on a log scale.
PREFILL = Group("prefill", ("prefill_floor", "prefill_per_request"), scale="log")
#: phi, the wave form's share of the benchmark's time, fitted as a logit.
WAVE = Group("wave share", ("wave_share",), scale="logit")


@dataclass(frozen=True)
class Rates:
    """The physics' parameters on their natural scale, each a column (m, 1) over parameter draws."""

    floor: np.ndarray
    per_verified_token: np.ndarray
    per_request: np.ndarray
    per_draft_pass: np.ndarray
    per_draft_token: np.ndarray
    tree_per_token: np.ndarray
    tree_floor: np.ndarray
    expert_traffic: np.ndarray
    half_experts_tokens: np.ndarray
    prefill_floor: np.ndarray
    prefill_per_request: np.ndarray
    wave_share: np.ndarray

    @classmethod
    def of(cls, layout: Layout, theta: np.ndarray) -> Rates:
        """From parameter rows `theta` (m, p) or (p,) laid out by `layout` (which holds the
        groups STEP_COST, PREFILL and WAVE)."""
        return cls(*layout.columns(theta, _RATE_GROUPS))


_RATE_GROUPS = (STEP_COST.name, PREFILL.name, WAVE.name)
if tuple(f.name for f in fields(Rates)) != STEP_COST.names + PREFILL.names + WAVE.names:
    raise AssertionError("Rates' fields must be STEP_COST's, PREFILL's and WAVE's names, in order")


@dataclass(frozen=True)
class ShapeArrays:
    """Per-configuration draft shape as arrays (n,): verified tokens D, draft passes S,
    topk k, tree indicator."""

    draft: np.ndarray
    passes: np.ndarray
    width: np.ndarray
    tree: np.ndarray

    @classmethod
    def of(cls, shapes: Sequence[Shape]) -> ShapeArrays:
        return cls(
            np.array([float(s.draft) for s in shapes]),
            np.array([float(s.draft_passes) for s in shapes]),
            np.array([float(s.width) for s in shapes]),
            np.array([1.0 if s.tree else 0.0 for s in shapes]),
        )


def step_time(rates: Rates, batch: np.ndarray, shapes: ShapeArrays) -> np.ndarray:
    """Decode-step milliseconds (..., m, n) for batch sizes (..., m, n) or (n,) (module docstring)."""
    b = np.asarray(batch, dtype=float)
    bd = b * shapes.draft
    return (
        rates.floor
        + rates.per_verified_token * bd
        + rates.per_request * b
        + rates.per_draft_pass * shapes.passes
        + rates.per_draft_token * shapes.passes * b * shapes.width
        + shapes.tree * (rates.tree_per_token * bd + rates.tree_floor)
        + rates.expert_traffic * (1.0 - np.exp2(-bd / rates.half_experts_tokens))
    )


@dataclass(frozen=True)
class Levels:
    """What benchmark levels did, as arrays that broadcast to (m, n): the concurrency C, the
    requests sent n, the output tokens per request L and the running-request cap R."""

    concurrency: np.ndarray | float
    requests: np.ndarray | float
    length: np.ndarray | float
    cap: np.ndarray | float

    @cached_property
    def waves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(full wave size B, number of full waves, size of the partial last wave)."""
        full = np.maximum(np.minimum(self.concurrency, self.cap), 1.0)
        nfull = np.floor(self.requests / full)
        return full, nfull, self.requests - nfull * full

    @cached_property
    def at_once(self) -> np.ndarray:
        """Whether all C requests run at once (C <= R)."""
        return np.less_equal(self.concurrency, self.cap)

    @cached_property
    def partial(self) -> np.ndarray:
        """Whether the last wave is partial."""
        return self.waves[2] > 0


@dataclass
class LevelFigures:
    """A level's figures as the benchmark reports them (m, n), from the replay's parts: the
    full wave's step time t(B) and batch time, and the whole level's time (ms)."""

    levels: Levels
    rates: Rates
    accept: np.ndarray
    step: np.ndarray
    partial_step: np.ndarray
    batch: np.ndarray
    total: np.ndarray

    @cached_property
    def aggregate(self) -> np.ndarray:
        """Output tokens per second of the whole level."""
        return self.levels.requests * self.levels.length * 1000.0 / self.total

    @property
    def per_request(self) -> np.ndarray:
        """One request's output tokens per second: a batch's, where C runs at once."""
        return np.where(self.levels.at_once, self.levels.length * 1000.0 / self.batch, self.aggregate / self.levels.concurrency)

    @property
    def tpot(self) -> np.ndarray:
        """Milliseconds per output token of a request, averaged over the level's requests."""
        full, nfull, rem = self.levels.waves
        phi = self.rates.wave_share
        waves = (nfull * full * self.step + rem * self.partial_step) / self.levels.requests
        return (phi * waves + (1.0 - phi) * self.step) / self.accept

    @property
    def ttft(self) -> np.ndarray:
        """The first wave's prefill (ms; queueing not modelled)."""
        return self.rates.prefill_floor + self.rates.prefill_per_request * self.levels.waves[0]

    @property
    def decode(self) -> np.ndarray:
        """One request's tokens per second during decode."""
        return 1000.0 * self.accept / self.step


def replay(rates: Rates, accept: np.ndarray, shapes: ShapeArrays, levels: Levels) -> LevelFigures:
    """The benchmark's figures (module docstring) for accept lengths E `accept` (m, n): tokens
    per verify pass (a measured accept length, output tokens over verify passes, is
    E * L / (L - 1): the first token comes from the prefill)."""
    full, nfull, rem = levels.waves
    steps = (levels.length - 1.0) / accept
    both = np.array([full, rem]) if np.shape(full) == np.shape(rem) else np.array(np.broadcast_arrays(full, rem))
    t_full, t_rem = step_time(rates, both, shapes)  # both in one pass
    o0, o1, phi = rates.prefill_floor, rates.prefill_per_request, rates.wave_share
    batch = o0 + o1 * full + steps * t_full
    partial = np.where(levels.partial, o0 + o1 * rem + steps * t_rem, 0.0)
    total = phi * (nfull * batch + partial) + (1.0 - phi) * levels.requests / full * batch
    return LevelFigures(levels, rates, accept, t_full, t_rem, batch, total)
