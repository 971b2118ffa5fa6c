"""tools/gpu/check_exact.py: served top tokens against the small model's, position by position."""

from __future__ import annotations

import math

import pytest

from .gpu_scripts import load

torch = pytest.importorskip("torch")


ce = load("check_exact")


def _small(rows):
    """log-probabilities (1 sequence, positions, vocab 3) from per-position probabilities."""
    return torch.tensor([[[math.log(p) for p in row] for row in rows]], dtype=torch.float64)


def test_agreement_near_ties_and_the_largest_difference():
    small = _small([[0.7, 0.2, 0.1], [0.41, 0.40, 0.19], [0.5, 0.3, 0.2]])
    served = [
        [
            [(math.log(0.7), 0), (math.log(0.2), 1)],  # agrees
            [(math.log(0.405), 1), (math.log(0.404), 0)],  # disagrees where the small model nearly ties
            [(math.log(0.45), 1), (math.log(0.40), 0)],  # disagrees where it does not
        ]
    ]
    result = ce.compare(served, small, positions=64, near_tie=0.05)
    assert (result["positions"], result["agree"]) == (3, 1)
    assert [c["pos"] for c in result["disagreements_near_tie"]] == [2]
    assert [c["pos"] for c in result["disagreements_not_near_tie"]] == [3]
    assert result["max_logprob_diff"] == pytest.approx(abs(math.log(0.45) - math.log(0.3)), abs=1e-5)


def test_only_the_first_positions_are_compared():
    small = _small([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2]])
    served = [[[(math.log(0.7), 0)], [(math.log(0.9), 2)]]]
    result = ce.compare(served, small, positions=1, near_tie=0.05)
    assert (result["positions"], result["agreement"], result["max_logprob_diff"]) == (1, 1.0, 0.0)


def test_the_small_model_is_computed_in_the_arithmetic_asked_for(tmp_path, monkeypatch):
    tl = ce.tl
    shape = tl.Shape(vocab=53, hidden=32, layers=2, heads=2, kv_heads=1, intermediate=48, head_dim=16, eps=1e-5)
    weights = {k: v.to(torch.bfloat16) for k, v in tl.init_weights(shape, torch.Generator().manual_seed(3), std=0.3).items()}
    monkeypatch.setattr(tl, "load_checkpoint", lambda folder: (shape, weights))  # a checkpoint's bf16 weights
    seqs = [[1, 5, 9, 2, 7, 30], [4, 4, 8, 16, 23, 42]]
    wide = ce.small_logprobs(tmp_path, seqs)
    narrow = ce.small_logprobs(tmp_path, seqs, torch.bfloat16)
    assert wide.shape == narrow.shape == (2, 5, 53) and wide.dtype == narrow.dtype == torch.float64
    # the same model: close, but bf16 arithmetic rounds differently
    assert 0 < float((wide - narrow).abs().max()) < 0.5
