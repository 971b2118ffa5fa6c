"""tools/gpu/make_models.py: the tiny target and draft unchanged, the 8B-shaped ones beside them."""

from __future__ import annotations

from .gpu_scripts import load

make_models = load("make_models")


def _weights_gb(c: dict) -> float:
    """bf16 bytes of a Llama's weights: embeddings, LM head, attention, MLP."""
    h, kv = c["hidden_size"], c["hidden_size"] // c["num_attention_heads"] * c["num_key_value_heads"]
    layer = 2 * h * h + 2 * h * kv + 3 * h * c["intermediate_size"]
    return 2 * (2 * c["vocab_size"] * h + c["num_hidden_layers"] * layer) / 1e9


def test_the_tiny_target_is_the_one_every_earlier_run_used():
    # ../shared/tools/real-sglang/make_models.py, as the runs of docs/real-gpu-validation.md made it
    assert make_models.MODELS["m"] == {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "num_hidden_layers": 16,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
    }
    assert make_models.MODELS["d"] == {
        **make_models.MODELS["m"],
        "architectures": ["LlamaForCausalLMEagle"],
        "num_hidden_layers": 1,
    }


def test_the_8b_target_has_llama_8b_shapes_and_its_draft_matches_its_width():
    target, draft = make_models.MODELS["m8b"], make_models.MODELS["d8b"]
    assert (
        target["hidden_size"],
        target["num_hidden_layers"],
        target["num_attention_heads"],
        target["num_key_value_heads"],
        target["intermediate_size"],
        target["vocab_size"],
    ) == (4096, 32, 32, 8, 14336, 512)
    assert 13.5 < _weights_gb(target) < 14.5
    assert draft["architectures"] == ["LlamaForCausalLMEagle"] and draft["num_hidden_layers"] == 1
    assert {k: v for k, v in draft.items() if k not in ("architectures", "num_hidden_layers")} == {
        k: v for k, v in target.items() if k not in ("architectures", "num_hidden_layers")
    }


def test_no_folder_is_a_usage_error(capsys):
    assert make_models.main([]) == 2
    assert capsys.readouterr().err.strip() == "usage: make_models.py OUT_DIR (e.g. /tmp/sgmodels)"
