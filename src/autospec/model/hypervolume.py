"""Hypervolume of a front: the one implementation the model sampler, the tests and the
benchmarks use (pure numpy).

All functions work under minimisation (negate a maximised objective first, or use
`hypervolume_ratio`, which takes the directions). Points on or beyond the reference in
any coordinate add nothing; dominated and duplicate points add nothing.

    hypervolume(points, reference)                 the measure of the union of the boxes [p, reference]
    hypervolume_improvement(points, front, reference)
                                                   what each point adds to a front (2-D, vectorised)
    hypervolume_ratio(found, every, maximize)      found's share of every's, both normalised
                                                   between every's worst and best
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["hypervolume", "hypervolume_improvement", "hypervolume_ratio", "nondominated_min"]


def nondominated_min(points: np.ndarray) -> np.ndarray:
    """The non-dominated rows of 2-D `points` (minimisation), sorted by the first column."""
    if len(points) == 0:
        return points
    order = np.lexsort((points[:, 1], points[:, 0]))
    pts = points[order]
    keep = []
    best_y = np.inf
    for p in pts:
        if p[1] < best_y:
            keep.append(p)
            best_y = p[1]
    return np.array(keep)


def hypervolume_improvement(points: np.ndarray, front: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Exact 2-D hypervolume improvement (minimisation) of each row of `points` (..., 2)
    over `front` (k, 2) within `reference` (2,): the area that the point's box
    [p, reference] adds to the boxes of the front."""
    rx, ry = float(reference[0]), float(reference[1])
    f = front[(front[:, 0] < rx) & (front[:, 1] < ry)] if len(front) else front
    f = nondominated_min(f) if len(f) else np.zeros((0, 2))
    # staircase: for x in [x_i, x_{i+1}) the front dominates y >= y_i; before x_1 nothing
    lefts = np.concatenate([[-np.inf], f[:, 0]])
    rights = np.concatenate([f[:, 0], [rx]])
    heights = np.concatenate([[ry], f[:, 1]])
    px = points[..., 0:1]
    py = points[..., 1:2]
    width = np.clip(np.minimum(rights, rx) - np.maximum(lefts, px), 0.0, None)
    height = np.clip(heights - py, 0.0, None)
    return (width * height).sum(axis=-1)


def hypervolume(points: Sequence[Sequence[float]] | np.ndarray, reference: Sequence[float] | np.ndarray) -> float:
    """Exact hypervolume (minimisation) of one or two objectives: the length or area of the
    union of the boxes [p, reference] of the points strictly better than `reference` in
    every coordinate. ValueError for more objectives (no space of the project has them)."""
    ref = np.asarray(reference, dtype=float)
    if ref.ndim != 1 or len(ref) not in (1, 2):
        raise ValueError(f"hypervolume handles 1 or 2 objectives, got a reference of shape {ref.shape}")
    pts = np.asarray(points, dtype=float).reshape(-1, len(ref))
    pts = pts[np.all(pts < ref, axis=1)]
    if not len(pts):
        return 0.0
    if len(ref) == 1:
        return float(ref[0] - pts[:, 0].min())
    f = nondominated_min(pts)
    # the staircase's strips: from each front point right to the next one, down to its height
    rights = np.concatenate([f[1:, 0], [ref[0]]])
    return float(((rights - f[:, 0]) * (ref[1] - f[:, 1])).sum())


def hypervolume_ratio(
    found: Sequence[Sequence[float]], every: Sequence[Sequence[float]], maximize: Sequence[bool]
) -> float:
    """The hypervolume of `found` over that of `every`, both normalised per objective to
    [0, 1] between the worst (1) and the best (0) value of `every`, in the objectives'
    directions (`maximize`); 1.0 where `every` spans no volume."""
    cols = np.asarray(every, dtype=float).reshape(-1, len(maximize))
    worst = np.where(maximize, cols.min(axis=0), cols.max(axis=0))
    best = np.where(maximize, cols.max(axis=0), cols.min(axis=0))
    span = np.where(best != worst, best - worst, 1.0)

    def normalised(points: Sequence[Sequence[float]]) -> np.ndarray:
        pts = np.asarray(points, dtype=float).reshape(-1, len(maximize))
        return np.where(best != worst, (best - pts) / span, 0.0)

    ones = np.ones(len(maximize))
    total = hypervolume(normalised(every), ones)
    return hypervolume(normalised(found), ones) / total if total > 0 else 1.0
