"""The model's choice: the exact hypervolume improvement it scores candidates by."""

from __future__ import annotations

import numpy as np
import pytest

from autospec.model import hypervolume_improvement


def hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    """Area dominated by `points` (minimisation) within `reference`, by sweeping."""
    area, ceiling = 0.0, float(reference[1])
    for x, y in sorted(map(tuple, points)):
        if x < reference[0] and y < ceiling:
            area += (reference[0] - x) * (ceiling - y)
            ceiling = y
    return area


@pytest.mark.parametrize("seed", range(5))
def test_improvement_is_the_added_area(seed):
    rng = np.random.default_rng(seed)
    front = rng.uniform(0, 1, size=(6, 2))
    reference = np.array([1.1, 1.2])
    points = rng.uniform(-0.2, 1.3, size=(40, 2))  # some dominated, some outside the box, some beyond the front
    got = hypervolume_improvement(points, front, reference)
    base = hypervolume(front, reference)
    want = [hypervolume(np.vstack([front, p]), reference) - base for p in points]
    assert got == pytest.approx(want, abs=1e-12)


def test_improvement_over_an_empty_front_is_the_point_box():
    got = hypervolume_improvement(np.array([[0.2, 0.5], [2.0, 0.0]]), np.zeros((0, 2)), np.array([1.0, 1.0]))
    assert got == pytest.approx([0.8 * 0.5, 0.0])


def test_draws_are_scored_independently():
    front = np.array([[0.5, 0.5]])
    draws = np.array([[[0.4, 0.4]], [[0.6, 0.6]]])  # (draws, candidates, 2)
    got = hypervolume_improvement(draws, front, np.array([1.0, 1.0]))
    assert got.shape == (2, 1)
    assert got[:, 0] == pytest.approx([0.6 * 0.6 - 0.25, 0.0])
