"""tools/gpu/tiny_llama.py: a small Llama embedded into wider shapes gives the small model's logits.

The embedding is what lets SGLang serve a small trained target at Llama-3-8B's cost
(docs/validation/2026-12-04-real-8b-standalone.md); here it runs on the CPU with tiny shapes,
in float64 so that any non-zero contribution of a padded weight would show."""

from __future__ import annotations

import pytest

from .gpu_scripts import load

torch = pytest.importorskip("torch")


tl = load("tiny_llama")
SMALL = tl.Shape(vocab=97, hidden=64, layers=2, heads=2, kv_heads=1, intermediate=96, head_dim=32, eps=1e-5)
BIG = dict(hidden=256, layers=4, heads=8, kv_heads=2, intermediate=384)


def _small_weights(seed: int = 1):
    weights = tl.init_weights(SMALL, torch.Generator().manual_seed(seed), std=0.3)
    gen = torch.Generator().manual_seed(seed + 1)
    for name in weights:  # trained norms are not all ones
        if name.endswith("norm.weight"):
            weights[name] = 1 + 0.5 * torch.randn(weights[name].shape, generator=gen)
    return {k: v.double() for k, v in weights.items()}


def _tokens(seed: int = 2):
    return torch.randint(0, SMALL.vocab, (3, 17), generator=torch.Generator().manual_seed(seed))


def test_the_embedded_model_computes_the_small_models_logits():
    small = _small_weights()
    big = tl.big_shape(SMALL, **BIG)
    embedded = {k: v.double() for k, v in tl.embed(small, SMALL, big, seed=5).items()}
    assert embedded["model.layers.3.mlp.down_proj.weight"].shape == (256, 384)
    tokens = _tokens()
    want, got = tl.forward(small, SMALL, tokens), tl.forward(embedded, big, tokens)
    assert got.shape == want.shape
    assert torch.allclose(got, want, rtol=0, atol=1e-9), (got - want).abs().max()


def test_the_padded_weights_are_mostly_not_zero_and_would_change_the_logits_if_misplaced():
    small = _small_weights()
    big = tl.big_shape(SMALL, **BIG)
    embedded = {k: v.double() for k, v in tl.embed(small, SMALL, big, seed=5).items()}
    gate = embedded["model.layers.3.mlp.gate_proj.weight"]
    assert (gate != 0).float().mean() > 0.99
    # an extra layer whose values were not zero would add to the residual stream
    broken = dict(embedded)
    broken["model.layers.3.self_attn.v_proj.weight"] = torch.full_like(embedded["model.layers.3.self_attn.v_proj.weight"], 0.1)
    tokens = _tokens()
    assert not torch.allclose(tl.forward(broken, big, tokens), tl.forward(small, SMALL, tokens), atol=1e-3)


def test_without_the_norm_rescaling_the_logits_differ():
    small = _small_weights()
    big = tl.big_shape(SMALL, **BIG)
    unscaled = tl.Shape(**{**tl.shape_dict(big), "eps": SMALL.eps})
    embedded = {k: v.double() for k, v in tl.embed(small, SMALL, big, seed=5).items()}
    for name in embedded:
        if name.endswith("norm.weight"):
            embedded[name] = embedded[name] * 2  # sqrt(64 / 256) undone
    tokens = _tokens()
    assert not torch.allclose(tl.forward(embedded, unscaled, tokens), tl.forward(small, SMALL, tokens), atol=1e-3)


def test_shapes_that_cannot_embed_exactly_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="head_dim 32 != 64"):
        tl.check_embeddable(SMALL, tl.replace(tl.big_shape(SMALL, **BIG), head_dim=64))
    with pytest.raises(ValueError, match="query heads per KV head 2 must be <= 1"):
        tl.check_embeddable(SMALL, tl.big_shape(SMALL, **{**BIG, "kv_heads": 8}))
