"""Which configuration to launch next: expected hypervolume improvement under the model's
uncertainty, weighted by the probability that the server starts (pure numpy).

    choice = rank(model, candidates, observed_front, reference_point, maximize)   # choice.index, reasons
    explain(choice, j)                                                              # why not j

- **EHVI** (two objectives; one objective: expected improvement) by Monte Carlo over the
  model's joint draws (`Prediction.samples`, fixed seed): for every draw, the exact 2-D
  hypervolume improvement of the candidate's predicted point over the observed front
  (a staircase sweep), averaged. The model's spread is the exploration: a candidate the
  model is unsure about has draws above the front.
- **Starting**: the improvement counts only if the server starts, so the score is
  ``p_start * EHVI``; and a launch that dies at init costs most of a model load for
  nothing, so candidates below `MIN_P_START` are not taken while better-founded ones remain
  (the best of them only when nothing else is left, and never below `FLOOR_P_START`).
- **None** when no candidate is worth a launch: every one is predicted to fail at init,
  or none is expected to add more than `MIN_GAIN` of the front's hypervolume (the reason is
  in `Choice.reason`).
- Before any launch started (no performance data), the model cannot value anything; the
  choice is then the candidate most likely to start (`p_start`, from the exact
  monotonicity rules and the failures seen), smallest draft shape first.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autospec.model.hypervolume import hypervolume_improvement
from autospec.model.spec import Prediction, SpecModel

__all__ = ["rank", "explain", "Choice", "hypervolume_improvement", "reference_point", "MIN_P_START", "FLOOR_P_START", "MIN_GAIN"]

log = logging.getLogger(__name__)

#: Candidates less likely than this to start are passed over while others remain.
MIN_P_START = 0.4
#: Never launch a candidate less likely than this to start.
FLOOR_P_START = 0.15
#: A launch must be expected to add at least this share of the normalised objective box.
MIN_GAIN = 1e-5


@dataclass(frozen=True)
class Choice:
    """The outcome of `rank`: ``index`` (None: launch nothing, see ``reason``), the score
    of every candidate (``ehvi``, ``p_start``, ``score`` = p_start x ehvi, in units of the
    normalised objective box), the prediction, and what the front was."""

    index: int | None
    reason: str
    ehvi: np.ndarray
    p_start: np.ndarray
    score: np.ndarray
    prediction: Prediction
    front: np.ndarray  # (k, t) observed front, objective units
    front_labels: tuple[str, ...]
    reference: np.ndarray
    maximize: tuple[bool, ...]


def _to_min(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    sign = np.array([-1.0 if mx else 1.0 for mx in maximize])
    return values * sign


def reference_point(
    prediction: Prediction, observed: np.ndarray, maximize: Sequence[bool], min_p_start: float = 0.5
) -> np.ndarray:
    """A reference point for the hypervolume: per objective the worst of what was measured
    and of the predicted means of candidates likely to start (the worst configuration that
    starts, as far as the model knows)."""
    means = prediction.mean[prediction.p_start >= min_p_start]
    pool = np.concatenate([np.asarray(observed, dtype=float).reshape(-1, len(maximize)), means], axis=0)
    if len(pool) == 0:
        return np.zeros(len(maximize))
    return np.array([pool[:, i].min() if mx else pool[:, i].max() for i, mx in enumerate(maximize)])


def _scales(front_min: np.ndarray, ref_min: np.ndarray, samples_min: np.ndarray) -> np.ndarray:
    """Per objective, the span between the reference and the best value seen or drawn
    (to express improvements as shares of a normalised box)."""
    best = np.minimum(
        np.min(samples_min.reshape(-1, samples_min.shape[-1]), axis=0), np.min(front_min, axis=0) if len(front_min) else np.inf
    )
    span = ref_min - best
    return np.where(span > 0, span, 1.0)


def rank(
    model: SpecModel | Prediction,
    candidates: Sequence[Mapping[str, Any]],
    observed_front: Sequence[Sequence[float]],
    reference: Sequence[float] | None,
    maximize: Sequence[bool],
    *,
    front_labels: Sequence[str] | None = None,
    min_p_start: float = MIN_P_START,
    floor_p_start: float = FLOOR_P_START,
    min_gain: float = MIN_GAIN,
) -> Choice:
    """Score every candidate and pick one (module docstring). `model` is a fitted
    `SpecModel` (or its `Prediction` for these candidates); `observed_front`: the objective
    values of the measured launches (any set: dominated ones add nothing); `reference`:
    the hypervolume's reference point in objective units (None: `reference_point`);
    `maximize`: per objective."""
    maximize = tuple(bool(x) for x in maximize)
    pred = model.predict(candidates) if isinstance(model, SpecModel) else model
    n = len(pred.shapes)
    front = np.asarray(observed_front, dtype=float).reshape(-1, len(maximize))
    labels = tuple(front_labels) if front_labels is not None else tuple(f"#{i}" for i in range(len(front)))
    ref = reference_point(pred, front, maximize) if reference is None else np.asarray(reference, dtype=float)
    p = pred.p_start.copy()
    empty = np.zeros(n)

    def done(index: int | None, reason: str, ehvi: np.ndarray, score: np.ndarray) -> Choice:
        if index is None:
            log.info("model choice: nothing to launch: %s", reason)
        return Choice(index, reason, ehvi, p, score, pred, front, labels, ref, maximize)

    if n == 0:
        return done(None, "no candidates left", empty, empty)
    if len(maximize) > 2:
        raise ValueError("the model's choice supports one or two objectives")
    measured = isinstance(model, Prediction) or bool(model.measured)
    if not measured:
        j, reason = _likeliest_to_start(pred, p, floor_p_start)
        return done(j, reason, empty, p if j is not None else empty)
    ehvi = _expected_improvement(pred.samples, front, ref, maximize)
    score = p * ehvi
    j, reason = _best_eligible(pred, p, ehvi, score, min_p_start=min_p_start, floor_p_start=floor_p_start, min_gain=min_gain)
    return done(j, reason, ehvi, score)


def _likeliest_to_start(pred: Prediction, p: np.ndarray, floor_p_start: float) -> tuple[int | None, str]:
    """(index, reason) before any launch started: the candidate likeliest to start
    (`p`, rounded), smallest draft shape first; None when even it is below `floor_p_start`."""
    n = len(pred.shapes)
    order = sorted(
        range(n),
        key=lambda j: (-round(float(p[j]), 3), pred.shapes[j].draft, pred.shapes[j].draft_passes * pred.shapes[j].width),
    )
    j = order[0]
    if p[j] < floor_p_start:
        return None, f"no launch has started yet and every candidate is predicted to fail at init (best p_start {p[j]:.2f})"
    return j, f"no launch has started yet: the candidate likeliest to start (p_start {p[j]:.2f})"


def _expected_improvement(samples: np.ndarray, front: np.ndarray, ref: np.ndarray, maximize: tuple[bool, ...]) -> np.ndarray:
    """(n,) expected improvement of each candidate over `front` (k, t) within `ref` (t,),
    averaged over the draws `samples` (m, n, t), in shares of the normalised objective box:
    the hypervolume improvement for two objectives, the plain improvement for one."""
    s_min = _to_min(samples, maximize)
    f_min = _to_min(front, maximize) if len(front) else np.zeros((0, len(maximize)))
    r_min = _to_min(ref[None, :], maximize)[0]
    scale = _scales(f_min, r_min, s_min)
    s_n, f_n, r_n = s_min / scale, f_min / scale, r_min / scale
    if len(maximize) == 1:
        best = f_n[:, 0].min() if len(f_n) else r_n[0]
        return np.clip(min(best, r_n[0]) - s_n[:, :, 0], 0.0, None).mean(axis=0)
    return hypervolume_improvement(s_n, f_n, r_n).mean(axis=0)


def _best_eligible(
    pred: Prediction,
    p: np.ndarray,
    ehvi: np.ndarray,
    score: np.ndarray,
    *,
    min_p_start: float,
    floor_p_start: float,
    min_gain: float,
) -> tuple[int | None, str]:
    """(index, reason): the highest `score` among candidates with p_start >= `min_p_start`
    (or, when none, >= `floor_p_start`); None when none reaches `floor_p_start` or the best
    score is below `min_gain`."""
    eligible = p >= min_p_start
    if not eligible.any():
        eligible = p >= floor_p_start
        if not eligible.any():
            j = int(np.argmax(p))
            return None, f"every candidate is predicted to fail at init (best p_start {p[j]:.2f}: {pred.shapes[j].describe()})"
    masked = np.where(eligible, score, -np.inf)
    j = int(np.argmax(masked))
    if not np.isfinite(masked[j]) or masked[j] < min_gain:
        return (
            None,
            f"no candidate is expected to improve the front by more than {min_gain:g} of the "
            f"objective box (best {max(float(masked[j]), 0.0):.2g}: {pred.shapes[j].describe()})",
        )
    return j, f"highest expected hypervolume improvement x p_start ({ehvi[j]:.3g} x {p[j]:.2f})"


def explain(choice: Choice, j: int) -> str:
    """One line: why candidate `j` was not (or was) chosen, for a report."""
    pred = choice.prediction
    mem = pred.memory
    if choice.index == j:
        return f"chosen: {choice.reason}"
    if mem.p_start[j] < 0.5:
        if mem.p_kv[j] <= mem.p_graph[j] and mem.p_kv[j] < 0.5:
            pool = mem.pool_mean[j]
            what = f"pool {pool:,.0f} +- {mem.pool_sd[j]:,.0f} tokens" if np.isfinite(pool) else "like a failed launch"
            return f"predicted to fail at init: KV pool ({what}; p_start {mem.p_start[j]:.2f})"
        if mem.p_graph[j] < 0.5:
            h = mem.headroom_mean[j]
            what = f"headroom {h:.1f} +- {mem.headroom_sd[j]:.1f} GB after init" if np.isfinite(h) else "like a failed launch"
            return f"predicted to fail at init: CUDA graphs ({what}; p_start {mem.p_start[j]:.2f})"
        return f"predicted to fail at init: like an earlier launch that failed (p_start {mem.p_start[j]:.2f})"
    mean = pred.mean[j]
    sign = np.array([1.0 if mx else -1.0 for mx in choice.maximize])
    for k, (label, values) in enumerate(zip(choice.front_labels, choice.front)):
        if np.all(sign * values >= sign * mean) and np.any(sign * values > sign * mean):
            shown = ", ".join(f"{v:.4g}" for v in mean)
            theirs = ", ".join(f"{v:.4g}" for v in values)
            return f"predicted dominated by {label} ({shown} vs {theirs})"
        del k
    return (
        f"expected improvement {choice.ehvi[j]:.3g} x p_start {choice.p_start[j]:.2f} = {choice.score[j]:.3g}, "
        f"below the chosen candidate's {choice.score[choice.index]:.3g}"
        if choice.index is not None
        else f"expected improvement {choice.ehvi[j]:.3g} x p_start {choice.p_start[j]:.2f}: {choice.reason}"
    )
