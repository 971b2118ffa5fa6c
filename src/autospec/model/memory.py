"""Memory: the KV pool, the running-request cap, the headroom left after init, and the
probability that a configuration starts (pure numpy).

The forms follow how SGLang sizes memory at start-up (DESIGN.md, "SGLang facts";
docs/model.md has the long form):

- **KV pool** (``max_total_num_tokens``, T). ``--mem-fraction-static`` f is a fraction of
  the memory free before loading, P (the log's ``Load weight begin. avail mem=P GB``).
  The static budget f*P holds the weights, the draft model, per-request state and the KV
  pool; what is left is divided by the bytes per token. A hybrid (recurrent + attention)
  model reserves recurrent state per request slot *and* per draft position before
  sizing the pool (sglang 0.5.10 ``handle_max_mamba_cache``: ``mamba_cache_per_req *
  max_running_requests * num_draft_tokens``; the hand-tuning sweep of sim profile
  seed-qwen35-122b-4x-rtxpro6000 lost about 80k tokens per extra step). So, for fixed other flags,
  ``T = b0 + bf * f - bd * D - bs * slots * D``: linear in f and in the reserve. The slope
  bf is known from one launch up to the state share: P GB per unit of f at the log's own
  tokens per GB (``KV Cache is allocated. #tokens: T, K size + V size``), bf ~ P * T / kv_gb;
  that is its prior. bd (a per-draft-token reserve independent of slots) has a tight prior
  at 0: attention-only models reserve nothing per draft token.
- **Running-request cap** (``max_running_requests``, R): the requested slots (the flag,
  48 under speculation), capped by the pool where a model keeps per-request state in it
  (hybrid models: R = floor(T / q), q tokens per running request, bracketed by every
  launch whose cap bound: T/(R+1) < q <= T/R).
- **Headroom** (``available_gpu_mem`` after init, H). What the static fraction leaves,
  (1 - f) * P, minus the CUDA graphs: SGLang captures verify graphs holding draft-token
  buffers per batch slot and draft graphs holding steps x topk, and trees need tree-mask
  buffers on top. So ``H = h0 + hf * f - g1 * D - g2 * steps * topk - g3 * tree - g4 * tree *
  (D + steps * topk)``, with hf's prior at -P.
- **Starting**: SGLang fails with "Not enough memory" when the pool is empty (T <= 0,
  in practice below a small minimum) and with a CUDA-graph OOM when capture finds less
  than it needs (H below an unknown activation reserve theta). The KV threshold is 0, raised
  above the predicted pool of any configuration that failed there; theta lies between the
  largest predicted headroom that failed (0 if none) and the smallest observed headroom
  that worked, uniformly. Prediction spread grows with extrapolation (below the smallest
  pool that worked, and through the linear fit's own variance), which lowers the
  probability. Monotonicity is exact and applied on top: with a smaller fraction, a
  larger reserve and no fewer draft tokens than a configuration that failed on the KV
  pool, a configuration fails too (and the reverse for one that started); likewise for
  graph OOM with a larger fraction and no smaller graph shape.
- **Sure to start** (`MemoryModel.sure_to_start`, for launches the study queues on its
  own): only the upper end of theta's range is proven, so a configuration is sure to
  start when its predicted headroom clears the least headroom that worked, with the fit's
  spread, or a launch of its context that started had no more headroom.
- **Draft KV dtype** (``--speculative-draft-kv-cache-dtype``, sglang 0.5.23;
  `autospec.model.draft_kv`): with the draft pool's measured size per token, a block
  draft's (DFLASH, DSPARK) pool scales by (t + d) / (t + d r) and an EAGLE-family draft
  leaves T d (1 - r) GB more headroom. The fits see launches corrected back to the draft in
  the target's dtype, and predictions are corrected forward to the candidate's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from autospec.model._linear import LinearFit, fit_linear
from autospec.model.draft_kv import DraftKv, draft_kv_of
from autospec.model.observation import GRAPH_FAILURE, KV_FAILURE, WEIGHTS_FAILURE, Observation
from autospec.model.parameters import Group, Layout
from autospec.model.shape import SPEC_DEFAULT_SLOTS, Shape

__all__ = [
    "MemoryModel",
    "MemoryPrediction",
    "pool_features",
    "headroom_features",
    "POOL_TERMS",
    "HEADROOM_TERMS",
    "SURE",
]

#: Relative spread added to a pool prediction per unit of extrapolation below the
#: smallest pool that worked (a pool predicted at half the smallest seen gets +7.5%).
EXTRAPOLATION_SPREAD = 0.15
#: Standard deviation (GB) of a headroom figure: the log prints two decimals.
HEADROOM_NOISE_GB = 0.03
#: How sure `MemoryModel.sure_to_start` must be (each check, one-sided).
SURE = 0.95
#: A default memory fraction for configurations that do not set one (SGLang picks one
#: from the GPU; only differences between configurations matter to the fit).
DEFAULT_MEM = 0.85


def _mem(shape: Shape) -> float:
    return shape.mem if shape.mem is not None else DEFAULT_MEM


def _reserve(shape: Shape) -> float:
    """Slots x draft tokens: the per-position state a hybrid model reserves (0 without speculation)."""
    if not shape.speculative:
        return 0.0
    return float((shape.slots or SPEC_DEFAULT_SLOTS) * shape.draft)


#: The pool's linear terms (b0, bf, bd, bs of the module docstring), in the order of `pool_features`.
POOL_TERMS = Layout([Group("pool", ("base", "per_mem_fraction", "per_draft_token", "per_reserved_token"))])
#: The headroom's linear terms (h0, hf, g1..g4), in the order of `headroom_features`.
HEADROOM_TERMS = Layout(
    [Group("headroom", ("base", "per_mem_fraction", "per_draft_token", "per_draft_candidate", "tree", "per_tree_token"))]
)


def pool_features(shape: Shape) -> list[float]:
    """The pool's features, one per `POOL_TERMS` name: 1, f, D (0 without speculation), slots x D."""
    return [1.0, _mem(shape), float(shape.draft if shape.speculative else 0), _reserve(shape)]


def headroom_features(shape: Shape) -> list[float]:
    """The headroom's features, one per `HEADROOM_TERMS` name: 1, f, D, steps x topk, tree,
    tree x (D + steps x topk)."""
    tree = 1.0 if shape.tree else 0.0
    return [1.0, _mem(shape), float(shape.draft), float(shape.draft_passes * shape.width), tree, tree * shape.graph_tokens]


def _dominates_kv_fail(c: Shape, g: Shape) -> bool:
    """c's pool is no larger than g's (g failed on the KV pool)."""
    return _mem(c) <= _mem(g) + 1e-9 and _reserve(c) >= _reserve(g) and c.draft >= g.draft


def _kv_safe_by(c: Shape, s: Shape) -> bool:
    """c's pool is no smaller than s's (s allocated its pool)."""
    return _mem(c) >= _mem(s) - 1e-9 and _reserve(c) <= _reserve(s) and c.draft <= s.draft


def _graph_ge(c: Shape, g: Shape) -> bool:
    """c leaves no more headroom than g: no smaller fraction, graphs no smaller."""
    return (
        _mem(c) >= _mem(g) - 1e-9
        and c.draft >= g.draft
        and c.draft_passes * c.width >= g.draft_passes * g.width
        and (c.tree or not g.tree)
        and (c.slots or 0) >= (g.slots or 0)
    )


def _uniform_threshold_prob(mu: np.ndarray, sd: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """P(X > theta) for X ~ N(mu, sd^2) and theta ~ U[lo, hi] (a point at lo when hi <= lo)."""
    sd = np.maximum(sd, 1e-9)
    if hi <= lo + 1e-9:
        return ndtr((mu - lo) / sd)

    def g(x: np.ndarray) -> np.ndarray:  # an antiderivative of the normal CDF
        return x * ndtr(x) + np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)

    return np.clip(sd / (hi - lo) * (g((mu - lo) / sd) - g((mu - hi) / sd)), 0.0, 1.0)


@dataclass(frozen=True)
class MemoryPrediction:
    """Per candidate: pool tokens (mean, sd), headroom GB (mean, sd; NaN where unknown),
    the probability of passing each start-up check, and which check is likelier to fail."""

    pool_mean: np.ndarray
    pool_sd: np.ndarray
    headroom_mean: np.ndarray
    headroom_sd: np.ndarray
    p_kv: np.ndarray
    p_graph: np.ndarray
    p_other: np.ndarray

    @property
    def p_start(self) -> np.ndarray:
        return self.p_kv * self.p_graph * self.p_other


class MemoryModel:
    """Fitted from launches: see the module docstring. `contexts[i]` groups observations
    (and candidates) that share all other flags; the exact monotonicity rules apply only
    within one group, the regressions pool them."""

    def __init__(self, observations: Sequence[Observation], contexts: Sequence[str]) -> None:
        self.obs = list(observations)
        self.contexts = list(contexts)
        shapes = [o.shape for o in self.obs]
        self.shapes = shapes
        ok = [i for i, o in enumerate(self.obs) if o.started]
        self.pool_obs = [i for i in ok if self.obs[i].max_total_num_tokens]
        self.head_obs = [i for i in ok if self.obs[i].available_gpu_mem_gb is not None]
        self.kv_failed = [i for i, o in enumerate(self.obs) if o.outcome == KV_FAILURE]
        self.graph_failed = [i for i, o in enumerate(self.obs) if o.outcome == GRAPH_FAILURE]
        self.weights_failed = [i for i, o in enumerate(self.obs) if o.outcome == WEIGHTS_FAILURE]
        # memory free before loading, P (GB per GPU)
        pre = [o.gpu_mem_before_load_gb for o in self.obs if o.gpu_mem_before_load_gb]
        self.pre_gb: float | None = float(np.median(pre)) if pre else None
        self.draft_kv: DraftKv | None = draft_kv_of(self.obs)
        self.pool = self._fit_pool()
        self.headroom = self._fit_headroom()
        pools = [float(self.obs[i].max_total_num_tokens or 0) for i in self.pool_obs]
        self.smallest_pool_ok = min(pools) if pools else None
        heads = [float(self.obs[i].available_gpu_mem_gb or 0.0) for i in self.head_obs]
        self.smallest_headroom_ok = min(heads) if heads else None
        self.tokens_per_request = self._fit_cap()
        self.kv_threshold = self._kv_threshold()
        self.graph_threshold = self._graph_threshold()

    # ------------------------------------------------------------------ fits
    def _fit_pool(self) -> LinearFit | None:
        if not self.pool_obs:
            return None
        X = np.array([pool_features(self.shapes[i]) for i in self.pool_obs])
        # pools as if each draft were in the target's KV dtype (`pool_scale`)
        dtype_scale = self._pool_scale([self.shapes[i] for i in self.pool_obs])
        y = np.array([float(self.obs[i].max_total_num_tokens or 0) for i in self.pool_obs]) / dtype_scale
        slope = []
        for k, i in enumerate(self.pool_obs):
            o = self.obs[i]
            if o.kv_cache_gb and o.gpu_mem_before_load_gb and o.max_total_num_tokens:
                slope.append(o.gpu_mem_before_load_gb * o.max_total_num_tokens / dtype_scale[k] / o.kv_cache_gb)
        scale = float(np.max(y))
        if slope:
            a0 = float(np.median(slope))
            slope_prior = (a0, 0.15 * a0)
        else:
            a0 = scale
            slope_prior = (0.0, 10.0 * scale)
        # the intercept (-bf x the weights' share of P) is a nuisance: centred where the
        # prior slope puts the launches, wide
        column = {name: X[:, POOL_TERMS.index(name)] for name in POOL_TERMS.names}
        intercept = float(np.median(y - slope_prior[0] * column["per_mem_fraction"]))
        reserved, draft = column["per_reserved_token"].max(), column["per_draft_token"].max()
        reserve = reserved / max(draft, 1.0) if reserved > 0 else float(SPEC_DEFAULT_SLOTS)
        prior_mean = POOL_TERMS.vector(
            {"base": intercept, "per_mem_fraction": slope_prior[0], "per_draft_token": 0.0, "per_reserved_token": 0.0}
        )
        # per draft token: tight at 0 (attention-only models reserve nothing per draft
        # token); per slot and draft token (hybrid models' recurrent state): mean 0, sd
        # 10% of the largest pool seen per draft token at the slots seen (the hand-tuning sweep
        # measured 17%: about 80k of 455k tokens per step at 48 slots)
        prior_sd = POOL_TERMS.vector(
            {
                "base": max(scale, 0.5 * a0),
                "per_mem_fraction": slope_prior[1],
                "per_draft_token": 0.005 * scale,
                "per_reserved_token": 0.1 * scale / reserve,
            }
        )
        sd = 0.003 * y + 16.0
        return fit_linear(X, y, sd, prior_mean, prior_sd)

    def _fit_headroom(self) -> LinearFit | None:
        if not self.head_obs:
            return None
        X = np.array([headroom_features(self.shapes[i]) for i in self.head_obs])
        y = np.array([float(self.obs[i].available_gpu_mem_gb or 0.0) for i in self.head_obs])
        # headroom as if each draft pool were in the target's KV dtype (`freed_gb`)
        y = y - np.array([self._freed(self.shapes[i], float(self.obs[i].max_total_num_tokens or 0)) for i in self.head_obs])
        pre = self.pre_gb
        scale = max(float(np.max(np.abs(y))), 1.0)
        # graph buffers per token of a captured batch: a few MB per token and batch slot,
        # x cuda_graph_max_bs; 0.3% of the GPU's memory per token is a wide bound
        # (measured about 0.1-0.2% for the bundled profiles' scales)
        per_token = 0.003 * pre if pre else 0.25 * scale
        prior_mean = HEADROOM_TERMS.vector(
            dict.fromkeys(HEADROOM_TERMS.names, 0.0) | {"base": pre if pre else 0.0, "per_mem_fraction": -pre if pre else 0.0}
        )
        prior_sd = HEADROOM_TERMS.vector(
            {
                "base": 10.0 * scale + (pre or 0.0),
                "per_mem_fraction": 0.05 * pre if pre else 10.0 * scale,
                "per_draft_token": per_token,
                "per_draft_candidate": per_token,
                "tree": 10.0 * per_token,
                "per_tree_token": per_token,
            }
        )
        sd = HEADROOM_NOISE_GB + 0.002 * np.abs(y)
        return fit_linear(X, y, sd, prior_mean, prior_sd)

    def _fit_cap(self) -> tuple[float, float] | None:
        """(lowest, highest) tokens per running request consistent with every launch whose
        running-request cap was below its requested slots; None when none was."""
        lo, hi = 0.0, math.inf
        bound = False
        for i in self.pool_obs:
            o, s = self.obs[i], self.shapes[i]
            t, r = o.max_total_num_tokens, o.max_running_requests
            if not t or not r or s.slots is None:
                continue
            if r < s.slots:
                bound = True
                lo = max(lo, t / (r + 1))
                hi = min(hi, t / r)
        if not bound:
            return None
        if hi < lo:  # inconsistent (rounding): take the middle
            lo, hi = hi, lo
        return lo, hi

    def _kv_threshold(self) -> float:
        """Pools at or below this fail: 0, raised above the predicted pool of any
        configuration that failed allocating it."""
        t = 0.0
        if self.pool is not None and self.kv_failed:
            mean, _ = self._pool_predict([self.shapes[i] for i in self.kv_failed])
            t = max(t, float(np.max(mean)))
        return t

    def _graph_threshold(self) -> tuple[float, float]:
        """(lo, hi) of the headroom capture needs: above the largest predicted headroom
        that failed (0 if none), at most the smallest that worked."""
        lo = 0.0
        if self.headroom is not None and self.graph_failed:
            mean, _ = self._headroom_predict([self.shapes[i] for i in self.graph_failed])
            lo = max(lo, float(np.max(mean)))
        hi = self.smallest_headroom_ok if self.smallest_headroom_ok is not None else lo
        return lo, max(hi, lo)

    # ------------------------------------------------------------------ draft KV dtype
    def _pool_scale(self, shapes: Sequence[Shape]) -> np.ndarray:
        kv = self.draft_kv
        return np.array([kv.pool_scale(s) if kv is not None else 1.0 for s in shapes])

    def _freed(self, shape: Shape, tokens: float) -> float:
        return self.draft_kv.freed_gb(shape, tokens) if self.draft_kv is not None else 0.0

    def _pool_predict(self, shapes: Sequence[Shape]) -> tuple[np.ndarray, np.ndarray]:
        """Pool (mean, sd) with each candidate's draft KV dtype (requires a pool fit)."""
        assert self.pool is not None
        mean, sd = self.pool.predict(np.array([pool_features(s) for s in shapes]))
        scale = self._pool_scale(shapes)
        return mean * scale, sd * scale

    def _headroom_predict(self, shapes: Sequence[Shape]) -> tuple[np.ndarray, np.ndarray]:
        """Headroom (mean, sd) with the GB each draft dtype frees at the predicted pool."""
        assert self.headroom is not None
        mean, sd = self.headroom.predict(np.array([headroom_features(s) for s in shapes]))
        if self.draft_kv is not None and self.pool is not None:
            pools, _ = self._pool_predict(shapes)
            mean = mean + np.array([self._freed(s, float(t)) for s, t in zip(shapes, pools)])
        return mean, sd

    # ------------------------------------------------------------------ predictions
    def predict(self, shapes: Sequence[Shape], contexts: Sequence[str]) -> MemoryPrediction:
        n = len(shapes)
        if self.pool is not None:
            pm, ps = self._pool_predict(shapes)
            if self.smallest_pool_ok:
                gap = np.maximum(self.smallest_pool_ok - pm, 0.0)
                ps = np.sqrt(ps**2 + (EXTRAPOLATION_SPREAD * gap) ** 2)
            p_kv = ndtr((pm - self.kv_threshold) / np.maximum(ps, 1.0))
        else:
            pm, ps = np.full(n, np.nan), np.full(n, np.nan)
            p_kv = np.full(n, 0.5)
        if self.headroom is not None:
            hm, hs = self._headroom_predict(shapes)
            hs = np.sqrt(hs**2 + HEADROOM_NOISE_GB**2)
            lo, hi = self.graph_threshold
            p_graph = _uniform_threshold_prob(hm, hs, lo, hi)
        else:
            hm, hs = np.full(n, np.nan), np.full(n, np.nan)
            p_graph = np.full(n, 0.5)
        p_other = np.ones(n)
        # exact monotonicity within a context
        kv_ok = [i for i, o in enumerate(self.obs) if o.started or o.outcome == GRAPH_FAILURE]
        for j, (c, ctx) in enumerate(zip(shapes, contexts)):
            same = [i for i in range(len(self.obs)) if self.contexts[i] == ctx]
            if any(self.contexts[i] == ctx and _dominates_kv_fail(c, self.shapes[i]) for i in self.kv_failed):
                p_kv[j] = 0.0
            elif any(self.contexts[i] == ctx and _kv_safe_by(c, self.shapes[i]) for i in kv_ok):
                p_kv[j] = 1.0
            if any(self.contexts[i] == ctx and _graph_ge(c, self.shapes[i]) for i in self.graph_failed):
                p_graph[j] = 0.0
            elif any(self.contexts[i] == ctx and _graph_ge(self.shapes[i], c) for i in self.head_obs):
                p_graph[j] = 1.0
            if any(i in same for i in self.weights_failed):
                p_other[j] = 0.0
        return MemoryPrediction(pm, ps, hm, hs, p_kv, p_graph, p_other)

    def sure_to_start(self, shapes: Sequence[Shape], contexts: Sequence[str], confidence: float = SURE) -> np.ndarray:
        """Whether each configuration starts with probability `confidence` per check, not
        counting on the unproven part of the activation reserve: no failure rule applies
        to it, its KV pool is allocated that surely, and its CUDA graphs fit because a
        launch of its context that started left no more headroom (exact), or because its
        predicted headroom clears the least headroom any launch started with (the upper
        end of `graph_threshold`) that surely. False where no launch reported headroom."""
        pred = self.predict(shapes, contexts)
        _, proven = self.graph_threshold
        with np.errstate(invalid="ignore"):
            clears = ndtr((pred.headroom_mean - proven) / np.maximum(pred.headroom_sd, 1e-9)) >= confidence
        graphs = (pred.p_graph >= 1.0) | (clears & (self.headroom is not None))
        return (pred.p_other >= 1.0) & (pred.p_kv >= confidence) & graphs

    def pool_draws(self, shapes: Sequence[Shape], rng: np.random.Generator, m: int) -> np.ndarray | None:
        """(m, n) pool draws (the fit's coefficient uncertainty), or None without a fit."""
        if self.pool is None:
            return None
        X = np.array([pool_features(s) for s in shapes])
        return (self.pool.draws(rng, m) @ X.T) * self._pool_scale(shapes)

    def cap(self, shapes: Sequence[Shape], pools: np.ndarray | None) -> np.ndarray:
        """Running-request caps (same shape as `pools`, or (n,) without pools): the
        requested slots, capped by pool / tokens-per-request where a launch showed a cap."""
        slots = np.array([float(s.slots or SPEC_DEFAULT_SLOTS) for s in shapes])
        if pools is None or self.tokens_per_request is None:
            return np.broadcast_to(slots, pools.shape).copy() if pools is not None else slots
        q = 0.5 * (self.tokens_per_request[0] + self.tokens_per_request[1])
        capped = np.floor(np.maximum(pools, 0.0) / q)
        return np.clip(np.minimum(slots, capped), 1.0, None)
