"""Speed: acceptance and decode-step cost fitted jointly from what the benchmark measured,
and the benchmark's figures predicted from them (pure numpy/scipy). The forms are
`autospec.model.physics` (one function, `replay`, for both); the parameters and their
priors `autospec.model.priors`.

**Fit.** Acceptance (`autospec.model.acceptance`), step cost and prefill are fitted together
by nonlinear least squares on log residuals of every figure a launch measured (accept
length, TPOT, TTFT at C=1, per-request speed where nothing queued, aggregate), each level
replayed with its own request count, output length and the launch's running-request cap
(the start-up fact, or the memory model's prediction), with Gaussian priors on every
parameter. Where a launch measured its accept length, the cost residuals use the measured
one (acceptance misfit then cannot bias the costs); where it did not (the hand-tuning
sweep's measurements, docs/simulator.md), the model's. Uncertainty: the Laplace
approximation at the optimum (the data's precision divided by how much worse than the
stated noise the fit is, plus the prior's, so never wider than the prior), drawn as
parameter samples.

**Prediction.** A configuration not launched is replayed with the study's typical request
count at each concurrency (the median over its launches: adaptive benchmarking sends a
different count each launch) and the median output length; a launched one, where its
figures are compared with the fit, with its own count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autospec.model.acceptance import ACCEPTANCE, TREE_PARAMS, AcceptancePrior, accept_lengths
from autospec.model.laplace import laplace_fit
from autospec.model.observation import Observation
from autospec.model.physics import LevelFigures, Levels, Rates, ShapeArrays, replay
from autospec.model.priors import LAYOUT, TREE_STEP_PARAMS, prior_vectors
from autospec.model.shape import SPEC_DEFAULT_SLOTS, Shape

__all__ = ["PerformanceModel", "Target", "SUPPORTED_METRICS"]

#: Metrics the model predicts (autospec names).
SUPPORTED_METRICS = ("output_tok_s", "agg_output_tok_s", "decode_tok_s", "tpot_ms_mean", "accept_length", "ttft_ms_mean")
#: Noise (log scale) of each measured figure.
NOISE = {"accept": 0.01, "tpot": 0.02, "ttft": 0.10, "out": 0.02, "agg": 0.03}
#: The figures a level may have measured, in the order the fit stacks their predictions.
_FIGURES = ("accept", "tpot", "ttft", "out", "agg")
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


def _requests_fallback(concurrency: int) -> float:
    """The request count of a level no launch recorded one for: two waves, at least 4."""
    return float(max(4, 2 * concurrency))


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


def _single_step_ms(rows: Sequence[_Row]) -> float:
    """t1, the single-request step time (ms) the physics' priors scale with: the median
    over the rows' concurrency-1 levels, else 20 ms."""
    t1 = []
    for r in rows:
        for lv in r.levels:
            if lv.concurrency == 1 and "tpot" in lv.figures:
                t1.append(lv.figures["tpot"] * (r.accept or 1.0))
            elif lv.concurrency == 1 and "out" in lv.figures:
                t1.append(1000.0 / lv.figures["out"] * (r.accept or 1.5))
    return float(np.median(t1)) if t1 else 20.0


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
        counts: dict[int, list[float]] = {}
        for o in started:
            for c, lv in o.levels.items():
                if lv.n_requests:
                    counts.setdefault(c, []).append(float(lv.n_requests))
        self._typical_requests = {c: float(np.median(v)) for c, v in counts.items()}
        self.rows: list[_Row] = []
        for o in started:
            self._add(o)
        self.speculative = any(r.shape.speculative for r in self.rows)
        self.has_trees = any(r.shape.tree for r in self.rows)  # EAGLE topk > 1 or an NGRAM trie wider than 1
        self.ngram = any(r.shape.family == "ngram" for r in self.rows)
        self._accept_cache: tuple[bytes, np.ndarray] | None = None
        self._prepare()
        self.t1 = _single_step_ms(self.rows)
        self.prior_mean, self.prior_sd = prior_vectors(self.t1, self.accept_prior, ngram=self.ngram)
        self.params, self.cov = self._fit()

    def typical_requests(self, concurrency: int) -> float:
        """The request count a configuration not launched is replayed with at `concurrency`:
        the median over the launches that recorded one, else `_requests_fallback`."""
        return self._typical_requests.get(concurrency, _requests_fallback(concurrency))

    def requests_of(self, observations: Sequence[Observation], targets: Sequence[Target]) -> np.ndarray:
        """(n, t): the request count each launch sent at each target's concurrency, or the
        typical one where it recorded none."""
        out = np.empty((len(observations), len(targets)))
        for j, o in enumerate(observations):
            for i, target in enumerate(targets):
                level = o.levels.get(target.concurrency)
                own = level.n_requests if level is not None else None
                out[j, i] = float(own) if own else self.typical_requests(target.concurrency)
        return out

    def _add(self, o: Observation) -> None:
        shape = o.shape
        cap = o.max_running_requests or (self.cap_of(o) if self.cap_of is not None else None)
        cap = float(cap or shape.slots or SPEC_DEFAULT_SLOTS)
        length = float(np.median([lv.output_len for lv in o.levels.values() if lv.output_len] or [self.length]))
        levels: list[_Level] = []
        accepts = []
        for c, lv in sorted(o.levels.items()):
            n = float(lv.n_requests or self.typical_requests(c))
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
        self.lv_levels = [lv for r in self.rows for lv in r.levels]
        self.lv_bench = Levels(
            concurrency=np.array([float(lv.concurrency) for lv in self.lv_levels]),
            requests=np.array([lv.n for lv in self.lv_levels]),
            length=np.array([self.rows[i].length for i in self.lv_row]),
            cap=np.array([self.rows[i].cap for i in self.lv_row]),
        )
        self.measured_accept = np.array([r.accept if r.accept is not None else np.nan for r in self.rows])
        self.accept_unmeasured = np.isnan(self.measured_accept)
        # one entry per measured figure: which figure (an index into _FIGURES), of which level
        figures = [(i, name, value) for i, lv in enumerate(self.lv_levels) for name, value in lv.figures.items()]
        self.res_figure = np.array([_FIGURES.index(name) for _, name, _ in figures], dtype=int)
        self.res_level = np.array([i for i, _, _ in figures], dtype=int)
        self.res_log_measured = np.array([math.log(value) for _, _, value in figures])
        self.res_noise = np.array([NOISE[name] for _, name, _ in figures])

    # ------------------------------------------------------------------ the fit
    def _residuals(self, theta: np.ndarray) -> np.ndarray:
        """(k,) log residuals over their noise of every measured figure, for one parameter
        vector (p,): each level replayed (`physics.replay`) at the accept length measured
        where there is one, the model's elsewhere."""
        theta = np.atleast_2d(theta)
        acc = theta[:, LAYOUT.block(ACCEPTANCE.name)]
        tag = acc.tobytes()
        if self._accept_cache is None or self._accept_cache[0] != tag:
            self._accept_cache = (tag, accept_lengths(acc, self.key_shapes)[0])
        e_key = self._accept_cache[1]
        e_model = e_key[self.row_key]  # per row
        e_used = np.where(self.accept_unmeasured, e_model, self.measured_accept)
        replayed = replay(Rates.of(LAYOUT, theta), e_used[self.lv_row][None, :], self.lv_shapes, self.lv_bench)
        preds = np.array(
            [e_model[self.lv_row], replayed.tpot[0], replayed.ttft[0], replayed.per_request[0], replayed.aggregate[0]]
        )  # in the order of _FIGURES
        predicted = np.maximum(preds[self.res_figure, self.res_level], 1e-12).tolist()
        # math.log, not np.log: the two differ in the last bit now and then, and the fit's
        # optimum is that sensitive on some studies (kept as it was, so proposals stay the same)
        return (np.array([math.log(p) for p in predicted]) - self.res_log_measured) / self.res_noise

    def _fit(self) -> tuple[np.ndarray, np.ndarray]:
        """MAP and Laplace covariance. Where every speculative launch measured its accept
        length, the acceptance residuals depend only on the acceptance parameters and the
        rest only on cost and prefill, so the two blocks are fitted separately (the same
        optimum, much faster); otherwise jointly."""
        prior_mean, prior_sd = self.prior_mean, self.prior_sd
        if not self.rows:
            return prior_mean.copy(), np.diag(prior_sd**2)
        acceptance = LAYOUT.mask(ACCEPTANCE.names)
        fixed = np.zeros(len(LAYOUT), dtype=bool)
        if not self.speculative:
            fixed |= acceptance
        if not self.has_trees:  # tree terms stay at their priors
            fixed |= LAYOUT.mask(TREE_PARAMS + TREE_STEP_PARAMS)
        theta = prior_mean.copy()
        cov = np.diag(prior_sd**2)
        measured = all(r.accept is not None for r in self.rows if r.shape.speculative)
        blocks = [acceptance, ~acceptance] if measured else [np.ones(len(LAYOUT), dtype=bool)]
        for block in blocks:
            free = block & ~fixed
            if not free.any():
                continue
            if measured and block is acceptance:
                theta, cov_free = laplace_fit(
                    theta, free, prior_mean, prior_sd, self._accept_residual, batch_residuals=self._accept_residuals
                )
            else:
                theta, cov_free = laplace_fit(theta, free, prior_mean, prior_sd, self._residuals)
            cov[np.ix_(free, free)] = cov_free
        return theta, cov

    def _accept_residual(self, theta: np.ndarray) -> np.ndarray:
        """(k,) acceptance residuals for one parameter vector (p,)."""
        return self._accept_residuals(theta[None, :])[0]

    def _accept_residuals(self, thetas: np.ndarray) -> np.ndarray:
        """(m, k) acceptance residuals for parameter rows (m, p): each measured level."""
        e = accept_lengths(thetas[:, LAYOUT.block(ACCEPTANCE.name)], self.key_shapes)  # (m, keys)
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
        return accept_lengths(np.atleast_2d(thetas)[:, LAYOUT.block(ACCEPTANCE.name)], shapes)

    def figures(
        self,
        thetas: np.ndarray,
        shapes: Sequence[Shape],
        caps: np.ndarray,
        targets: Sequence[Target],
        requests: np.ndarray | None = None,
    ) -> np.ndarray:
        """(m, n, len(targets)) predicted figures for parameter draws `thetas` (m, p),
        running-request caps `caps` (m, n) and request counts `requests` (n, len(targets))
        (None: `typical_requests`), each level replayed by `physics.replay`."""
        thetas = np.atleast_2d(thetas)
        m, n = thetas.shape[0], len(shapes)
        rates = Rates.of(LAYOUT, thetas)
        arrays = ShapeArrays.of(shapes)
        e = self.accept_draws(thetas, shapes)
        caps = np.broadcast_to(caps, (m, n))
        out = np.empty((m, n, len(targets)))
        for i, target in enumerate(targets):
            count = requests[:, i] if requests is not None else self.typical_requests(target.concurrency)
            levels = Levels(float(target.concurrency), count, self.length, caps)
            out[:, :, i] = _metric(replay(rates, e, arrays, levels), target.metric, e, self.length)
        return out


def _metric(figures: LevelFigures, metric: str, accept: np.ndarray, length: float) -> np.ndarray:
    """One autospec metric of replayed figures (accept length as the benchmark reports it)."""
    if metric == "agg_output_tok_s":
        return figures.aggregate
    if metric == "output_tok_s":
        return figures.per_request
    if metric == "decode_tok_s":
        return figures.decode
    if metric == "tpot_ms_mean":
        return figures.tpot
    if metric == "accept_length":
        return accept * length / (length - 1.0)
    return figures.ttft  # ttft_ms_mean
