"""Hypervolume of a front: the one implementation the model sampler, the tests and the
benchmarks use (plain Python; the vectorised improvement with numpy).

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

from collections.abc import Iterable, Sequence

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


def hypervolume(points: Iterable[Sequence[float]], reference: Sequence[float]) -> float:
    """Exact hypervolume (minimisation) of one or two objectives: the length or area of the
    union of the boxes [p, reference] of the points strictly better than `reference` in
    every coordinate. ValueError for more objectives (no space of the project has them).
    Plain Python: the benchmarks call it hundreds of thousands of times on a few points."""
    ref = [float(r) for r in reference]
    if len(ref) not in (1, 2):
        raise ValueError(f"hypervolume handles 1 or 2 objectives, got a reference of {len(ref)}")
    inside = sorted(tuple(float(v) for v in p) for p in points if all(v < r for v, r in zip(p, ref)))
    if not inside:
        return 0.0
    if len(ref) == 1:
        return ref[0] - inside[0][0]
    # a sweep in x: each point that lowers the best y so far adds its strip to the right
    area, best_y = 0.0, ref[1]
    for x, y in inside:
        if y < best_y:
            area += (ref[0] - x) * (best_y - y)
            best_y = y
    return area


def hypervolume_ratio(found: Iterable[Sequence[float]], every: Sequence[Sequence[float]], maximize: Sequence[bool]) -> float:
    """The hypervolume of `found` over that of `every`, both normalised per objective to
    [0, 1] between the worst (1) and the best (0) value of `every`, in the objectives'
    directions (`maximize`); 1.0 where `every` spans no volume."""
    cols = list(zip(*every))
    worst = [min(c) if m else max(c) for c, m in zip(cols, maximize)]
    best = [max(c) if m else min(c) for c, m in zip(cols, maximize)]

    def normalised(points: Iterable[Sequence[float]]) -> list[tuple[float, ...]]:
        return [tuple((b - v) / (b - w) if b != w else 0.0 for v, w, b in zip(p, worst, best)) for p in points]

    ones = [1.0] * len(maximize)
    total = hypervolume(normalised(every), ones)
    return hypervolume(normalised(found), ones) / total if total > 0 else 1.0
