"""The one hypervolume (`autospec.model.hypervolume`): against Optuna's, and its improvement
and ratio against the hypervolume itself."""

from __future__ import annotations

import numpy as np
import pytest
from optuna._hypervolume import compute_hypervolume  # private Optuna API (4.x), a second opinion only

from autospec.model import hypervolume, hypervolume_ratio
from autospec.model.hypervolume import hypervolume_improvement


def test_small_cases():
    assert hypervolume([(0.5, 0.5)], (1, 1)) == 0.25
    assert hypervolume([(0.0, 0.5), (0.5, 0.0)], (1, 1)) == pytest.approx(0.75)
    assert hypervolume([(0.0, 0.5), (0.5, 0.0), (0.6, 0.6), (0.0, 0.5)], (1, 1)) == pytest.approx(0.75)  # dominated, duplicate
    assert hypervolume([(1.0, 0.0), (0.2, 1.0), (1.5, -1)], (1, 1)) == 0.0  # on or beyond the reference
    assert hypervolume([], (1, 1)) == 0.0
    assert hypervolume([(0, 0)], (2, 3)) == pytest.approx(6.0)
    assert hypervolume([(0.25,), (0.5,)], (1,)) == pytest.approx(0.75)


def test_matches_optuna_on_random_fronts():
    rng = np.random.default_rng(7)
    for _ in range(50):
        pts = rng.random((int(rng.integers(1, 12)), 2))
        assert hypervolume(pts, (1.0, 1.0)) == pytest.approx(float(compute_hypervolume(pts, np.ones(2))), abs=1e-12)


def test_improvement_is_the_difference_of_hypervolumes():
    rng = np.random.default_rng(3)
    ref = np.array([1.0, 1.0])
    for _ in range(30):
        front, point = rng.random((5, 2)), rng.random(2)
        gain = float(hypervolume_improvement(point[None, :], front, ref)[0])
        assert gain == pytest.approx(hypervolume(np.vstack([front, point]), ref) - hypervolume(front, ref), abs=1e-12)


def test_ratio_normalises_between_worst_and_best():
    every = [(100.0, 10.0), (50.0, 30.0), (10.0, 5.0)]  # both maximised
    assert hypervolume_ratio(every, every, [True, True]) == 1.0
    # normalised: (100, 10) -> (0, 0.8), (50, 30) -> (5/9, 0), (10, 5) -> (1, 1)
    # every's area: 5/9 x 0.2 + 4/9 x 1 = 5/9; (100, 10) alone: 1 x 0.2
    assert hypervolume_ratio([(100.0, 10.0)], every, [True, True]) == pytest.approx(0.2 / (5 / 9))
    assert hypervolume_ratio([(10.0, 5.0)], every, [True, True]) == 0.0  # the worst point spans nothing


def test_more_than_two_objectives_is_refused():
    with pytest.raises(ValueError, match="1 or 2 objectives"):
        hypervolume([(0.1, 0.2, 0.3)], (1, 1, 1))
