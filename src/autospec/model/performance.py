"""Speed: acceptance and decode-step cost fitted jointly from what the benchmark measured,
and the benchmark's figures predicted from them (pure numpy/scipy).

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
them (a dense model fits c7 near 0). NGRAM has no draft passes (S = 0). All coefficients
are positive (fitted on a log scale).

**The benchmark, replayed.** Each level sends n requests of L output tokens from C closed-loop
workers; SGLang runs at most R of them at once (R = ``max_running_requests``, the start-up
fact or the memory model's prediction), B = min(C, R). A batch costs a prefill,
``o0 + o1 * B``, then ``(L - 1) / E`` decode steps of t(B), E the accept length. How the n
requests share the slots lies between two ends: identical requests in lockstep run in
waves of B, the last one partial (n = 64, R = 21: three full waves and one of a single
request); requests that drift apart keep every slot busy and need n / B batch-times
(continuous batching's fluid limit). The model mixes them with a fitted weight phi (the
share of the wave form) (ms)::

    waves      = sum_waves (o0 + o1 * B_w + (L - 1) / E * t(B_w))
    fluid      = n / B * (o0 + o1 * B + (L - 1) / E * t(B))
    aggregate  = n * L / (phi * waves + (1 - phi) * fluid)
    per request (C <= R) = L / (o0 + o1 * C + (L - 1) / E * t(C));   (C > R: aggregate / C)
    tpot       = phi * (request-weighted mean of t(B_w)) / E + (1 - phi) * t(B) / E
    ttft (C=1) = o0 + o1

**Fit.** Acceptance (`autospec.model.acceptance`), step cost and prefill are fitted together
by nonlinear least squares on log residuals of every figure a launch measured (accept
length, TPOT, TTFT at C=1, per-request speed where nothing queued, aggregate), with
Gaussian priors on every parameter. Where a launch measured its accept length, the cost
residuals use the measured one (acceptance misfit then cannot bias the costs); where it
did not (the hand-tuning sweep's measurements, docs/simulator.md), the model's. Uncertainty: the Laplace
approximation at the optimum (the data's precision divided by how much worse than the
stated noise the fit is, plus the prior's, so never wider than the prior), drawn as
parameter samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from autospec.model.acceptance import (
    N_ACCEPT_PARAMS,
    NGRAM_PRIOR_MEAN,
    NGRAM_PRIOR_SD,
    TREE_PARAMS,
    AcceptancePrior,
    accept_length,
)
from autospec.model.observation import Observation
from autospec.model.shape import SPEC_DEFAULT_SLOTS, Shape

__all__ = ["PerformanceModel", "Target", "step_time", "SUPPORTED_METRICS"]

#: Metrics the model predicts (autospec names).
SUPPORTED_METRICS = ("output_tok_s", "agg_output_tok_s", "decode_tok_s", "tpot_ms_mean", "accept_length", "ttft_ms_mean")
#: c0..c7 and h (all on a log scale)
N_COST = 9
_A = N_ACCEPT_PARAMS
#: where the overhead parameters start: o0, o1 (log ms), logit phi
_C = N_ACCEPT_PARAMS + N_COST
#: Noise (log scale) of each measured figure.
NOISE = {"accept": 0.01, "tpot": 0.02, "ttft": 0.10, "out": 0.02, "agg": 0.03}
_KEY = tuple[str, int, int, int, int]


@dataclass(frozen=True)
class Target:
    """One predicted figure: an autospec metric at one concurrency."""

    metric: str
    concurrency: int

    def __post_init__(self) -> None:
        if self.metric not in SUPPORTED_METRICS:
            raise ValueError(f"the model cannot predict {self.metric!r}; it predicts {', '.join(SUPPORTED_METRICS)}")

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"


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


def step_time(cost: np.ndarray, batch: np.ndarray, shapes: ShapeArrays) -> np.ndarray:
    """Decode-step milliseconds (m, n) for cost draws (m, 9) (c0..c7 in ms, h in tokens)
    and batch sizes (m, n) or (n,)."""
    c = [cost[:, i : i + 1] for i in range(N_COST)]
    b = np.asarray(batch, dtype=float)
    bd = b * shapes.draft
    return (
        c[0]
        + c[1] * bd
        + c[2] * b
        + c[3] * shapes.passes
        + c[4] * shapes.passes * b * shapes.width
        + shapes.tree * (c[5] * bd + c[6])
        + c[7] * (1.0 - np.exp2(-bd / c[8]))
    )


def _waves(n: float, c: float, cap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(full wave size, number of full waves, size of the partial last wave)."""
    full = np.maximum(np.minimum(c, cap), 1.0)
    nfull = np.floor(n / full)
    rem = n - nfull * full
    return full, nfull, rem


@dataclass
class _Level:
    concurrency: int
    n: float
    figures: dict[str, float]


@dataclass
class _Row:
    """One observation's data for the fit."""

    shape: Shape
    cap: float
    length: float
    levels: list[_Level]
    accept: float | None  # measured E (tokens per verify pass), mean over levels


def _parameter_priors(
    rows: Sequence[_Row], accept_prior: AcceptancePrior, *, ngram: bool
) -> tuple[float, np.ndarray, np.ndarray]:
    """(t1, prior mean, prior sd) of every parameter (acceptance, cost, prefill and phi, on
    the fit's scale); t1 is the single-request step time (ms) the cost and prefill priors
    scale with: the median over the rows' concurrency-1 levels, else 20 ms."""
    t1 = []
    for r in rows:
        for lv in r.levels:
            if lv.concurrency == 1 and "tpot" in lv.figures:
                t1.append(lv.figures["tpot"] * (r.accept or 1.0))
            elif lv.concurrency == 1 and "out" in lv.figures:
                t1.append(1000.0 / lv.figures["out"] * (r.accept or 1.5))
    t = float(np.median(t1)) if t1 else 20.0
    cost_mean = np.log(np.array([0.8 * t, 0.005 * t, 0.005 * t, 0.03 * t, 0.002 * t, 0.002 * t, 0.02 * t, 0.05 * t, 16.0]))
    cost_sd = np.array([1.0, 2.0, 2.0, 1.5, 2.0, 2.0, 2.0, 2.0, 1.5])
    over_mean = np.concatenate([np.log(np.array([1.0, 0.05]) * t), [0.0]])
    over_sd = np.array([2.0, 2.5, 1.5])
    acc_mean, acc_sd = accept_prior.vectors()
    if ngram:
        acc_mean[:3], acc_sd[:3] = NGRAM_PRIOR_MEAN, NGRAM_PRIOR_SD
    return t, np.concatenate([acc_mean, cost_mean, over_mean]), np.concatenate([acc_sd, cost_sd, over_sd])


def _laplace_fit(
    theta0: np.ndarray,
    free: np.ndarray,
    prior_mean: np.ndarray,
    prior_sd: np.ndarray,
    residuals: Callable[[np.ndarray], np.ndarray],
    *,
    batch_residuals: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MAP of the `free` parameters of `theta0` (the others held) under the data's
    `residuals` (parameters (p,) -> (k,)) and the Gaussian prior; returns (theta, Laplace
    covariance of the free parameters, data residuals at theta). `batch_residuals`
    (parameter rows (m, p) -> (m, k)), when given, computes the Jacobian's finite
    differences in one vectorised pass; otherwise least_squares takes them one by one."""

    def full(x: np.ndarray) -> np.ndarray:
        theta = theta0.copy()
        theta[free] = x
        return theta

    def fun(x: np.ndarray) -> np.ndarray:
        return np.concatenate([residuals(full(x)), (x - prior_mean[free]) / prior_sd[free]])

    jac: Any = "2-point"
    if batch_residuals is not None:
        batch = batch_residuals

        def jac(x: np.ndarray) -> np.ndarray:  # all finite differences in one vectorised pass
            h = 1e-6 * np.maximum(1.0, np.abs(x))
            rows = np.repeat(full(x)[None, :], len(x) + 1, axis=0)
            idx = np.flatnonzero(free)
            rows[np.arange(1, len(x) + 1), idx] += h
            r = batch(rows)
            d = (r[1:] - r[0]) / h[:, None]
            return np.concatenate([d.T, np.diag(1.0 / prior_sd[free])], axis=0)

    res = least_squares(fun, theta0[free].copy(), jac=jac, method="trf", x_scale=prior_sd[free], max_nfev=200)
    theta = full(res.x)
    data = residuals(theta)
    s2 = (2.0 + float(data @ data)) / (2.0 + len(data))
    # A fit worse than the stated noise weakens what the data say (their precision over
    # s2), never the prior's: the covariance stays within the prior's.
    J = np.asarray(res.jac)
    J_data, J_prior = J[: len(data)], J[len(data) :]
    precision = J_data.T @ J_data / max(s2, 1.0) + J_prior.T @ J_prior
    try:
        cov_free = np.linalg.inv(precision)
    except np.linalg.LinAlgError:
        cov_free = np.linalg.pinv(precision)
    return theta, cov_free, data


class PerformanceModel:
    """Fitted from launches that started and measured something (module docstring)."""

    def __init__(
        self,
        observations: Sequence[Observation],
        *,
        default_length: float | None = None,
        accept_prior: AcceptancePrior | None = None,
        cap_of: Callable[[Observation], float | None] | None = None,
    ) -> None:
        """`cap_of`: the running-request cap of a launch that did not report one (the
        memory model's prediction); without it, the requested slots."""
        self.accept_prior = accept_prior or AcceptancePrior()
        self.cap_of = cap_of
        started = [o for o in observations if o.started and o.levels]
        lengths = [lv.output_len for o in started for lv in o.levels.values() if lv.output_len]
        self.length = float(np.median(lengths)) if lengths else float(default_length or 256.0)
        self.n_requests: dict[int, float] = {}
        self.rows: list[_Row] = []
        for o in started:
            self._add(o)
        self.speculative = any(r.shape.speculative for r in self.rows)
        self.has_trees = any(r.shape.tree for r in self.rows)  # EAGLE topk > 1 or an NGRAM trie wider than 1
        self.ngram = any(r.shape.family == "ngram" for r in self.rows)
        self._accept_cache: tuple[bytes, np.ndarray] | None = None
        self._prepare()
        self.t1, self.prior_mean, self.prior_sd = _parameter_priors(self.rows, self.accept_prior, ngram=self.ngram)
        self.params, self.cov, self.scale, self.residual_rms = self._fit()

    def _add(self, o: Observation) -> None:
        shape = o.shape
        cap = o.max_running_requests or (self.cap_of(o) if self.cap_of is not None else None)
        cap = float(cap or shape.slots or SPEC_DEFAULT_SLOTS)
        length = float(np.median([lv.output_len for lv in o.levels.values() if lv.output_len] or [self.length]))
        levels: list[_Level] = []
        accepts = []
        for c, lv in sorted(o.levels.items()):
            n = float(lv.n_requests or max(4, 2 * c))
            self.n_requests.setdefault(c, n)
            figures = {}
            if lv.accept_length and shape.speculative:
                e = lv.accept_length * (length - 1.0) / length
                figures["accept"] = e
                accepts.append(e)
            if lv.tpot_ms:
                figures["tpot"] = lv.tpot_ms
            if c == 1 and lv.ttft_ms:
                figures["ttft"] = lv.ttft_ms
            if lv.output_tok_s and c <= cap:
                figures["out"] = lv.output_tok_s
            if lv.agg_output_tok_s and c > 1:
                figures["agg"] = lv.agg_output_tok_s
            if figures:
                levels.append(_Level(c, n, figures))
        if levels:
            self.rows.append(_Row(shape, cap, length, levels, float(np.mean(accepts)) if accepts else None))

    def _prepare(self) -> None:
        """Flatten the rows into arrays: one entry per (row, level) for the batch terms."""
        self.keys: list[_KEY] = []
        index: dict[_KEY, int] = {}
        self.row_key = []
        for r in self.rows:
            if r.shape.key not in index:
                index[r.shape.key] = len(self.keys)
                self.keys.append(r.shape.key)
            self.row_key.append(index[r.shape.key])
        self.key_shapes = [next(r.shape for r in self.rows if r.shape.key == k) for k in self.keys]
        # one entry per (row, level)
        self.lv_row = np.array([i for i, r in enumerate(self.rows) for _ in r.levels], dtype=int)
        self.lv_shapes = ShapeArrays.of([self.rows[i].shape for i in self.lv_row])
        full, nfull, rem, n, length = [], [], [], [], []
        for r in self.rows:
            for lv in r.levels:
                f_, nf, re = _waves(lv.n, float(lv.concurrency), np.array(r.cap))
                full.append(float(f_))
                nfull.append(float(nf))
                rem.append(float(re))
                n.append(lv.n)
                length.append(r.length)
        self.lv_full, self.lv_nfull, self.lv_rem = np.array(full), np.array(nfull), np.array(rem)
        self.lv_n, self.lv_len = np.array(n), np.array(length)
        self.lv_levels = [lv for r in self.rows for lv in r.levels]
        self.measured_accept = np.array([r.accept if r.accept is not None else np.nan for r in self.rows])

    # ------------------------------------------------------------------ the model
    @staticmethod
    def split(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(acceptance params (m, 7), cost (m, 9): c0..c7 in ms and h in tokens, batch
        figures (m, 3): prefill o0, o1 in ms and the wave share phi) of parameter rows (m, p)."""
        theta = np.atleast_2d(theta)
        over = np.concatenate([np.exp(theta[:, _C : _C + 2]), 1.0 / (1.0 + np.exp(-theta[:, _C + 2 : _C + 3]))], axis=1)
        return theta[:, :_A], np.exp(theta[:, _A:_C]), over

    def _accepts(self, acc: np.ndarray, shapes: Sequence[Shape]) -> np.ndarray:
        """(m, len(shapes)) accept lengths."""
        out = np.ones((acc.shape[0], len(shapes)))
        for j, s in enumerate(shapes):
            if s.speculative:
                out[:, j] = accept_length(acc, s)
        return out

    def _residuals(self, theta: np.ndarray) -> np.ndarray:
        acc, cost, over = self.split(theta)
        tag = acc.tobytes()
        if self._accept_cache is None or self._accept_cache[0] != tag:
            self._accept_cache = (tag, self._accepts(acc, self.key_shapes)[0])
        e_key = self._accept_cache[1]
        e_model = e_key[self.row_key]  # per row
        e_used = np.where(np.isnan(self.measured_accept), e_model, self.measured_accept)
        lv_e_model = e_model[self.lv_row]
        lv_e = e_used[self.lv_row]
        steps = (self.lv_len - 1.0) / lv_e
        t_full = step_time(cost, self.lv_full, self.lv_shapes)[0]
        t_rem = step_time(cost, self.lv_rem, self.lv_shapes)[0]
        o0, o1, phi = over[0, 0], over[0, 1], over[0, 2]
        wave_full = o0 + o1 * self.lv_full + steps * t_full
        wave_rem = np.where(self.lv_rem > 0, o0 + o1 * self.lv_rem + steps * t_rem, 0.0)
        total = phi * (self.lv_nfull * wave_full + wave_rem) + (1.0 - phi) * self.lv_n / self.lv_full * wave_full
        tpot_waves = (self.lv_nfull * self.lv_full * t_full + self.lv_rem * t_rem) / self.lv_n
        preds = {
            "accept": lv_e_model,
            "tpot": (phi * tpot_waves + (1.0 - phi) * t_full) / lv_e,
            "ttft": np.full(len(self.lv_row), o0 + o1),
            "out": self.lv_len * 1000.0 / wave_full,
            "agg": self.lv_n * self.lv_len * 1000.0 / total,
        }
        out = []
        for i, lv in enumerate(self.lv_levels):
            for name, value in lv.figures.items():
                out.append((math.log(max(float(preds[name][i]), 1e-12)) - math.log(value)) / NOISE[name])
        return np.array(out)

    def _fit(self) -> tuple[np.ndarray, np.ndarray, float, float]:
        """MAP and Laplace covariance. Where every speculative launch measured its accept
        length, the acceptance residuals depend only on the acceptance parameters and the
        rest only on cost and prefill, so the two blocks are fitted separately (the same
        optimum, much faster); otherwise jointly."""
        prior_mean, prior_sd = self.prior_mean, self.prior_sd
        fixed = np.zeros(len(prior_mean), dtype=bool)
        if not self.speculative:
            fixed[:_A] = True
        if not self.has_trees:  # tree terms stay at their priors
            for i in TREE_PARAMS:
                fixed[i] = True
            fixed[_A + 5] = fixed[_A + 6] = True
        if not self.rows:
            return prior_mean.copy(), np.diag(prior_sd**2), 1.0, 0.0
        theta = prior_mean.copy()
        cov = np.diag(prior_sd**2)
        measured = all(r.accept is not None for r in self.rows if r.shape.speculative)
        if measured:
            blocks = [np.arange(_A), np.arange(_A, len(theta))]
        else:
            blocks = [np.arange(len(theta))]
        residuals = []
        for block in blocks:
            free = np.zeros(len(theta), dtype=bool)
            free[block] = True
            free &= ~fixed
            if not free.any():
                continue
            if measured and block[0] == 0:
                theta, cov_free, data = _laplace_fit(
                    theta, free, prior_mean, prior_sd, self._accept_residual, batch_residuals=self._accept_residuals
                )
            else:
                theta, cov_free, data = _laplace_fit(theta, free, prior_mean, prior_sd, self._residuals)
            cov[np.ix_(free, free)] = cov_free
            residuals.append(data)
        data = np.concatenate(residuals) if residuals else np.zeros(0)
        rms = float(np.sqrt(np.mean(data**2))) if len(data) else 0.0
        s2 = (2.0 + float(data @ data)) / (2.0 + len(data))
        return theta, cov, math.sqrt(max(s2, 1.0)), rms

    def _accept_residual(self, theta: np.ndarray) -> np.ndarray:
        """(k,) acceptance residuals for one parameter vector (p,)."""
        return self._accept_residuals(theta[None, :])[0]

    def _accept_residuals(self, thetas: np.ndarray) -> np.ndarray:
        """(m, k) acceptance residuals for parameter rows (m, p): each measured level."""
        e = self._accepts(thetas[:, :_A], self.key_shapes)  # (m, keys)
        e_lv = e[:, np.array(self.row_key)[self.lv_row]]
        cols = [i for i, lv in enumerate(self.lv_levels) if "accept" in lv.figures]
        obs = np.array([self.lv_levels[i].figures["accept"] for i in cols])
        return (np.log(e_lv[:, cols]) - np.log(obs)[None, :]) / NOISE["accept"]

    # ------------------------------------------------------------------ draws
    def draws(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """(m, p) parameter draws; the first is the fit itself."""
        out = rng.multivariate_normal(self.params, self.cov, size=m, method="eigh")
        out[0] = self.params
        return out

    def accept_draws(self, thetas: np.ndarray, shapes: Sequence[Shape]) -> np.ndarray:
        """(m, n) accept lengths E (tokens per verify pass)."""
        acc = np.atleast_2d(thetas)[:, :_A]
        out = np.ones((acc.shape[0], len(shapes)))
        cache: dict[_KEY, np.ndarray] = {}
        for j, s in enumerate(shapes):
            if not s.speculative:
                continue
            if s.key not in cache:
                cache[s.key] = accept_length(acc, s)
            out[:, j] = cache[s.key]
        return out

    def figures(self, thetas: np.ndarray, shapes: Sequence[Shape], caps: np.ndarray, targets: Sequence[Target]) -> np.ndarray:
        """(m, n, len(targets)) predicted figures for parameter draws `thetas` (m, p) and
        running-request caps `caps` (m, n) (module docstring)."""
        thetas = np.atleast_2d(thetas)
        m, n = thetas.shape[0], len(shapes)
        _, cost, over = self.split(thetas)
        arrays = ShapeArrays.of(shapes)
        e = self.accept_draws(thetas, shapes)
        length = self.length
        steps = (length - 1.0) / e
        caps = np.broadcast_to(caps, (m, n))
        o0, o1, phi = over[:, :1], over[:, 1:2], over[:, 2:3]
        out = np.empty((m, n, len(targets)))
        for i, target in enumerate(targets):
            c = float(target.concurrency)
            nreq = self.n_requests.get(target.concurrency, max(4.0, 2.0 * c))
            full, nfull, rem = _waves(nreq, c, caps)
            t_full = step_time(cost, full, arrays)
            t_rem = step_time(cost, rem, arrays)
            wave_full = o0 + o1 * full + steps * t_full
            wave_rem = np.where(rem > 0, o0 + o1 * rem + steps * t_rem, 0.0)
            total = phi * (nfull * wave_full + wave_rem) + (1.0 - phi) * nreq / full * wave_full
            agg = nreq * length * 1000.0 / total
            if target.metric == "agg_output_tok_s":
                out[:, :, i] = agg
            elif target.metric == "output_tok_s":
                out[:, :, i] = np.where(c <= caps, length * 1000.0 / wave_full, agg / c)
            elif target.metric == "decode_tok_s":
                out[:, :, i] = 1000.0 * e / t_full
            elif target.metric == "tpot_ms_mean":
                out[:, :, i] = (phi * (nfull * full * t_full + rem * t_rem) / nreq + (1.0 - phi) * t_full) / e
            elif target.metric == "accept_length":
                out[:, :, i] = e * length / (length - 1.0)
            else:  # ttft_ms_mean: the prefill of the first wave (queueing not modelled)
                out[:, :, i] = o0 + o1 * full
        return out
