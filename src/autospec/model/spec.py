"""The fitted model of one study: memory, acceptance and step cost from the launches so
far, with an uncertainty for every prediction (pure numpy/scipy).

    model = SpecModel.fit(observations, [Target("output_tok_s", 1), Target("agg_output_tok_s", 32)],
                          base_flags=space.server.flags)
    pred = model.predict(candidates)          # candidate flag dicts (over base_flags)
    pred.mean, pred.sd, pred.samples, pred.p_start

A prediction's spread has three sources, drawn together so that they stay consistent:

1. the parameters of the physical forms (`memory`, `performance`): posterior draws
   (linear-Gaussian for memory, Laplace for acceptance and cost);
2. the pool and running-request cap of the candidate, drawn from the memory fit (the
   aggregate queues behind the cap);
3. what the forms get wrong: per target, a Gaussian process over the draft shape (steps,
   log topk, log draft tokens and, above C=1, the share of C that runs at once) on the
   log residuals of the launches, re-computed for every parameter draw, each measurement
   weighted by its own stored interval. At a configuration measured precisely the
   prediction is the measurement (a noisy one is pulled towards its neighbours); away
   from the launches the spread grows to the forms' own residual scale (never below 3%).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autospec.model.acceptance import AcceptancePrior
from autospec.model.memory import MemoryModel, MemoryPrediction, pool_features
from autospec.model.observation import Observation
from autospec.model.performance import PerformanceModel, Target
from autospec.model.shape import Shape, context_keys, context_of, shape_of

__all__ = ["SpecModel", "Prediction", "DRAWS"]

#: Parameter draws per prediction (Monte Carlo; fixed seed).
DRAWS = 64
#: Floor of the shape-residual scale (log): a form that fits its launches exactly is
#: still trusted no closer than this away from them.
RESIDUAL_FLOOR = 0.03
#: Length scales of the residual process: steps, log2 topk, ln draft tokens, share of C running.
LENGTH_SCALES = (1.5, 1.0, 0.35, 0.15)
#: Least noise of a measurement in the residual process (log); a measurement's own 95%
#: interval, where stored, sets it (a noisy value is smoothed by its neighbours).
NUGGET = 0.002
#: Noise floors (log sd) the residual process may choose by marginal likelihood, for
#: measurements noisier than their intervals say (few requests, varying output lengths).
NOISE_FLOORS = (NUGGET, 0.02, 0.05, 0.1, 0.2)
#: Configurations that differ in other tuned flags (their context, `shape.context_of`: an
#: attention backend, a chunk size) share the shape's residual and add one of their
#: context's own, constant over shapes, with this share of the residual variance: a
#: backend that runs everything 30% faster is learned from all its launches at once.
CONTEXT_VARIANCE = 1.0


@dataclass(frozen=True)
class Prediction:
    """Predictions for n candidates and the model's targets.

    ``samples`` (m, n, t): joint draws (use them for expectations over the front; the
    first is the fit itself); ``point`` (n, t): the fit's own prediction (the fitted
    parameters, the residual correction's mean); ``mean``/``sd``/``median`` (n, t): of the
    draws (extrapolated acceptance is skewed: draws where it collapses pull the mean and
    the median below the fit); ``p_start`` (n,): the
    probability that the server starts (``p_kv`` x ``p_graph`` x other failures);
    ``memory``: pool, headroom and the start-up probabilities per check; ``cap`` (n,):
    the running-request cap at the pool's mean."""

    targets: tuple[Target, ...]
    shapes: tuple[Shape, ...]
    samples: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    median: np.ndarray
    memory: MemoryPrediction
    cap: np.ndarray

    @property
    def p_start(self) -> np.ndarray:
        return self.memory.p_start

    @property
    def point(self) -> np.ndarray:
        return self.samples[0]

    def interval(self, low: float = 0.1, high: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Quantiles of the draws, (n, t) each."""
        return np.quantile(self.samples, low, axis=0), np.quantile(self.samples, high, axis=0)


def _gp_features(shapes: Sequence[Shape], caps: np.ndarray, concurrency: int) -> np.ndarray:
    """Unscaled residual-process inputs: steps, log2 topk, ln draft tokens and, above C=1,
    the share of C that runs at once."""
    s = np.array([float(x.depth) for x in shapes])
    k = np.log2(np.array([float(max(x.width, 1)) for x in shapes]))
    d = np.log(np.array([float(max(x.draft, 1)) for x in shapes]))
    cols = [s, k, d]
    if concurrency > 1:
        cols.append(np.minimum(caps, concurrency) / concurrency)
    return np.stack(cols, axis=1)


def _kernel(a: np.ndarray, b: np.ndarray, tau: float, scales: np.ndarray, same: np.ndarray | None = None) -> np.ndarray:
    """Squared-exponential over the shape features, plus a constant per context where
    contexts differ: `same` (len(a), len(b)) says whether two configurations share theirs
    (None: one context, no such term)."""
    d2 = (((a[:, None, :] - b[None, :, :]) / scales) ** 2).sum(axis=2)
    k = tau**2 * np.exp(-0.5 * d2)
    return k if same is None else k + CONTEXT_VARIANCE * tau**2 * same


def _same(a: Sequence[str], b: Sequence[str]) -> np.ndarray:
    """Whether a's and b's contexts match, pairwise (1.0 or 0.0)."""
    return np.array([[x == y for y in b] for x in a], dtype=float).reshape(len(a), len(b))


def _choose_hyper(
    z: np.ndarray, r: np.ndarray, tau: float, same: np.ndarray | None, sds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Length scales and per-measurement noise (log sd) of the residual process, by marginal
    likelihood: the base scales times a factor per input from {0.5, 1, 2, 4} (log-normal
    prior around 1), and a noise floor from `NOISE_FLOORS` under each measurement's own
    error `sds` (measurements without a stored interval, or whose interval understates how
    much a relaunch or the next level would differ, are told apart from the landscape by
    how well their neighbours agree). Few launches keep the base scales and the least
    floor."""
    base = np.array(LENGTH_SCALES[: z.shape[1]])
    if len(r) < 4:
        return base, np.maximum(sds, NUGGET)
    factors = np.array([0.5, 1.0, 2.0, 4.0])
    log_prior = -0.5 * np.log2(factors) ** 2
    best, best_noise, best_lp = base, np.maximum(sds, NUGGET), -np.inf
    dims = z.shape[1]
    grids = np.meshgrid(*([np.arange(len(factors))] * min(dims, 3)), indexing="ij")
    combos = np.stack([g.ravel() for g in grids], axis=1)
    for floor in NOISE_FLOORS:
        noise = np.maximum(sds, floor)
        for combo in combos:
            scales = base.copy()
            scales[: len(combo)] *= factors[combo]
            K = _kernel(z, z, tau, scales, same) + np.diag(noise**2)
            try:
                L = np.linalg.cholesky(K)
            except np.linalg.LinAlgError:
                continue
            alpha = np.linalg.solve(L, r)
            lp = -0.5 * float(alpha @ alpha) - float(np.log(np.diag(L)).sum()) + float(log_prior[combo].sum())
            if lp > best_lp:
                best, best_noise, best_lp = scales, noise, lp
    return best, best_noise


class SpecModel:
    """See the module docstring. Build with `fit`."""

    def __init__(
        self,
        observations: Sequence[Observation],
        targets: Sequence[Target],
        *,
        base_flags: Mapping[str, Any] | None = None,
        draws: int = DRAWS,
        seed: int = 0,
        accept_prior: AcceptancePrior | None = None,
        candidates: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Fit every part from `observations`. `base_flags`: the space's fixed flags
        (candidates are merged over them); `draws`, `seed`: the Monte Carlo draws of every
        prediction; `accept_prior`: what is known about acceptance before measuring it
        (default: nothing about the workload); `candidates`: what will be predicted, so that
        other tuned flags none of the launches varied yet are still told apart
        (`shape.context_keys`)."""
        self.observations = list(observations)
        self.targets = tuple(targets)
        self.base_flags = dict(base_flags or {})
        self.draws = int(draws)
        self.seed = int(seed)
        flag_sets = [o.flags for o in self.observations]
        # contexts over the candidates too: one no launch has shared yet is uncertain, not alike
        every = flag_sets + [self.flags_of(c) for c in candidates]
        self.context_keys = context_keys(every) if every else ()
        self._several_contexts = bool(self.context_keys)
        self.contexts = [context_of(f, self.context_keys) for f in flag_sets]
        self.memory = MemoryModel(self.observations, self.contexts)
        self.performance = PerformanceModel(self.observations, accept_prior=accept_prior, cap_of=self._predicted_cap)
        self.started = [o for o in self.observations if o.started]
        self.measured = [o for o in self.started if o.levels]
        self._measured_contexts = [context_of(o.flags, self.context_keys) for o in self.measured]
        self._gp = self._fit_residuals()

    @classmethod
    def fit(cls, observations: Sequence[Observation], targets: Sequence[Target], **options: Any) -> SpecModel:
        """Fit every part from `observations` (launches: started or failed at init); the
        `options` are the constructor's keywords (`__init__`: what each one means)."""
        return cls(observations, targets, **options)

    def _predicted_cap(self, o: Observation) -> float | None:
        """The running-request cap the memory model expects for a launch that did not report one."""
        if self.memory.pool is None:
            return None
        pool, _ = self.memory.pool.predict(np.array([pool_features(o.shape)]))
        return float(self.memory.cap([o.shape], pool[None, :])[0, 0])

    # ------------------------------------------------------------------ residual process
    def _fit_residuals(self) -> list[tuple[list[int], np.ndarray, np.ndarray, float, np.ndarray] | None]:
        """Per target: (indices of measured observations, their log values, the inverse
        kernel matrix, tau), or None where no launch measured it."""
        out: list[tuple[list[int], np.ndarray, np.ndarray, float, np.ndarray] | None] = []
        if not self.measured:
            return [None for _ in self.targets]
        shapes = [o.shape for o in self.measured]
        caps = np.array([float(o.max_running_requests or o.shape.slots or 48) for o in self.measured])
        requests = self.performance.requests_of(self.measured, self.targets)
        base = self.performance.figures(self.performance.params[None, :], shapes, caps[None, :], self.targets, requests)[0]
        for i, target in enumerate(self.targets):
            idx, logs, sds = [], [], []
            for j, o in enumerate(self.measured):
                v = o.value(target.metric, target.concurrency)
                if v is not None and v > 0:
                    idx.append(j)
                    logs.append(np.log(v))
                    sds.append(o.log_sd(target.metric, target.concurrency) or 0.0)
            if not idx:
                out.append(None)
                continue
            y = np.array(logs)
            r = y - np.log(np.maximum(base[idx, i], 1e-12))
            tau = max(RESIDUAL_FLOOR, 1.5 * float(np.sqrt(np.mean(r**2))))
            z = _gp_features([shapes[j] for j in idx], caps[idx], target.concurrency)
            ctx = [self._measured_contexts[j] for j in idx]
            same = _same(ctx, ctx) if self._several_contexts else None
            # each measurement's own error (its stored interval, or what its neighbours say) is noise
            scales, noise = _choose_hyper(z, r, tau, same, np.array(sds))
            K = _kernel(z, z, tau, scales, same) + np.diag(noise**2)
            out.append((idx, y, np.linalg.inv(K), tau, scales))
        return out

    # ------------------------------------------------------------------ predictions
    def flags_of(self, candidate: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.base_flags, **candidate}

    def predict(self, candidates: Sequence[Mapping[str, Any]]) -> Prediction:
        """Predictions for candidate flag dicts (merged over `base_flags`)."""
        flags = [self.flags_of(c) for c in candidates]
        shapes = [shape_of(f) for f in flags]
        contexts = [context_of(f, self.context_keys) for f in flags]
        n, m, t = len(shapes), self.draws, len(self.targets)
        rng = np.random.default_rng(self.seed)
        memory = self.memory.predict(shapes, contexts)
        pools = self.memory.pool_draws(shapes, rng, m)
        if pools is not None:
            pools[0] = memory.pool_mean  # draw 0 is the fit itself
        caps = self.memory.cap(shapes, pools)  # (m, n) or (n,)
        caps = np.broadcast_to(caps, (m, n)).copy()
        cap_mean = self.memory.cap(shapes, memory.pool_mean[None, :])[0] if pools is not None else caps[0]
        thetas = self.performance.draws(rng, m)
        logs = np.log(np.maximum(self.performance.figures(thetas, shapes, caps, self.targets), 1e-12))
        if self.measured:
            mshapes = [o.shape for o in self.measured]
            mcaps = np.array([float(o.max_running_requests or o.shape.slots or 48) for o in self.measured])
            mrequests = self.performance.requests_of(self.measured, self.targets)
            mfigures = self.performance.figures(thetas, mshapes, mcaps[None, :], self.targets, mrequests)
            mlogs = np.log(np.maximum(mfigures, 1e-12))
        noise = rng.standard_normal((m, n, t))
        noise[0] = 0.0  # draw 0 is the fit itself
        for i, target in enumerate(self.targets):
            gp = self._gp[i]
            if gp is None:
                logs[:, :, i] += 0.5 * noise[:, :, i]  # nothing measured: wide
                continue
            idx, y, Kinv, tau, scales = gp
            zc = _gp_features(shapes, cap_mean, target.concurrency)
            zo = _gp_features([mshapes[j] for j in idx], mcaps[idx], target.concurrency)
            same = _same(contexts, [self._measured_contexts[j] for j in idx]) if self._several_contexts else None
            Ks = _kernel(zc, zo, tau, scales, same)  # (n, k)
            prior = tau**2 * (1.0 + (CONTEXT_VARIANCE if same is not None else 0.0))
            W = Ks @ Kinv  # (n, k)
            resid = y[None, :] - mlogs[:, idx, i]  # (m, k)
            logs[:, :, i] += resid @ W.T
            # the floor of the noise is not uncertainty: a configuration measured precisely is known
            var = np.maximum(prior - np.einsum("ij,ij->i", W, Ks) - NUGGET**2, 0.0)
            logs[:, :, i] += np.sqrt(var)[None, :] * noise[:, :, i]
        samples = np.exp(logs)
        return Prediction(
            self.targets,
            tuple(shapes),
            samples,
            samples.mean(axis=0),
            samples.std(axis=0),
            np.median(samples, axis=0),
            memory,
            cap_mean,
        )
