"""Simulator profiles: the shipped ones load to the same values as before the pydantic
models, and a typo anywhere in a file is a one-line ProfileError."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from autospec.sim import load_profile
from autospec.sim.profile import ProfileError, list_profiles, profile_from_dict

from .test_model import minimal_profile

# Values the hand-written loader produced for the shipped profiles (fields and types).
SHIPPED = {
    "deepseek-v3-mtp-8x-h200": {
        "sglang_version": "0.5.23",
        "model_name": "deepseek-ai/DeepSeek-V3",
        "weights_gb": 642.0,
        "draft_weights_gb": 11.0,
        "kv_bytes_per_token": 70272.0,
        "kv_replicated": True,
        "gpu_mem_gb": 140.4,
        "gpu_count": 8,
        "tp_size": 8,
        "attention_backend": "fa3",
        "page_size": 1,
        "cuda_graph_max_bs": 48,
        "mem_fraction_static": 0.85,
        "speculative_algorithm": "NEXTN",
        "auto_spec": (3, 1, 4),
        "tokens_per_running_request": 0.0,
        "accept_base": {"synthetic": 0.95, "code": 0.85, "chat": 0.8, "summarize": 0.72},
        "accept_decay": 0.82,
        "decay_power": 1.5,
        "floor_ms": 18.0,
        "expert_ms": 14.0,
        "load_seconds": 600.0,
        "run_sigma": 0.012,
        "seed": 0,
        "extra": {"architecture": "DeepseekV3ForCausalLM", "model_type": "deepseek_v3"},
    },
    "llama31-8b-eagle3-1x-h100": {
        "sglang_version": "0.5.16",
        "model_name": "meta-llama/Llama-3.1-8B-Instruct",
        "weights_gb": 14.96,
        "draft_weights_gb": 0.8,
        "kv_bytes_per_token": 131072.0,
        "kv_replicated": False,
        "gpu_mem_gb": 79.19,
        "gpu_count": 1,
        "tp_size": 1,
        "attention_backend": "flashinfer",
        "page_size": 1,
        "cuda_graph_max_bs": 48,
        "mem_fraction_static": 0.85,
        "speculative_algorithm": "EAGLE3",
        "auto_spec": (5, 4, 8),
        "tokens_per_running_request": 0.0,
        "accept_base": {"synthetic": 0.92, "code": 0.85, "chat": 0.78, "summarize": 0.7},
        "accept_decay": 0.95,
        "decay_power": 1.0,
        "floor_ms": 6.5,
        "expert_ms": 0.0,
        "load_seconds": 25.0,
        "run_sigma": 0.012,
        "seed": 0,
        "extra": {"architecture": "LlamaForCausalLM", "model_type": "llama"},
    },
    "seed-qwen35-122b-4x-rtxpro6000": {
        "sglang_version": "0.5.10",
        "model_name": "Qwen/Qwen3.5-122B-A10B-FP8",
        "weights_gb": 118.0,
        "draft_weights_gb": 2.4,
        "kv_bytes_per_token": 351116.4,
        "kv_replicated": False,
        "gpu_mem_gb": 95.59,
        "gpu_count": 4,
        "tp_size": 4,
        "attention_backend": "triton",
        "page_size": 16,
        "cuda_graph_max_bs": 48,
        "mem_fraction_static": 0.85,
        "speculative_algorithm": "NEXTN",
        "auto_spec": (3, 1, 4),
        "tokens_per_running_request": 17268.0,
        "accept_base": {"synthetic": 0.9964, "code": 0.85, "chat": 0.75, "summarize": 0.65},
        "accept_decay": 0.9962,
        "decay_power": 3.8681,
        "floor_ms": 14.4851,
        "expert_ms": 0.0515,
        "load_seconds": 100.0,
        "run_sigma": 0.012,
        "seed": 0,
        "extra": {"architecture": "Qwen3_5MoeForConditionalGeneration", "model_type": "qwen3_5_moe"},
    },
}


def test_the_pinned_profiles_are_still_shipped():
    assert set(SHIPPED) <= set(list_profiles())


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_profiles_load_to_the_same_values(name):
    profile = load_profile(name)
    got = {key: getattr(profile, key) for key in SHIPPED[name]}
    assert got == SHIPPED[name]
    assert {key: type(value) for key, value in got.items()} == {key: type(v) for key, v in SHIPPED[name].items()}
    assert list(profile.accept_base) == ["synthetic", "code", "chat", "summarize"]


def fails(raw: dict) -> str:
    with pytest.raises(ProfileError) as info:
        profile_from_dict(raw, source="my.toml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("simulator profile my.toml: ")
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)
    return message.removeprefix("simulator profile my.toml: ")


@pytest.mark.parametrize("table", ["model", "gpu", "defaults", "memory", "acceptance", "cost", "timing", "noise"])
def test_an_unknown_key_in_any_table_is_rejected(table):
    raw = minimal_profile()
    raw.setdefault(table, {})["tpyo"] = 1
    message = fails(raw)
    assert message.startswith(f"{table}.tpyo is not a known key; use one of ")


def test_the_docstring_example_request_msx_is_caught():
    raw = minimal_profile()
    raw["cost"]["request_msx"] = 0.03
    assert fails(raw).startswith("cost.request_msx is not a known key; use one of draft_ms_per_token, ")


def test_unknown_keys_at_the_top_level_and_in_sub_tables():
    raw = minimal_profile()
    raw["archtecture"] = "LlamaForCausalLM"
    assert fails(raw).startswith("archtecture is not a known key; use one of acceptance, architecture, ")
    raw = minimal_profile()
    raw["defaults"]["auto_spec"] = {"steps": 3, "topk": 1, "draft": 4, "depth": 2}
    assert fails(raw).startswith("defaults.auto_spec.depth is not a known key")
    raw = minimal_profile()
    raw["model"]["kv"] = {"bytes": 1}
    assert fails(raw).startswith("model.kv is not a known key")


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("gpu"), "[gpu] is missing; add a [gpu] table (see docs/simulator.md)"),
        (lambda d: d["cost"].pop("floor_ms"), "cost.floor_ms is missing; add `floor_ms = ...` under [cost]"),
        (lambda d: d["gpu"].update(count=True), "gpu.count must be an integer, got True; write a whole number"),
        (lambda d: d["gpu"].update(count=0), "gpu.count must be >= 1, got 0; use a value in range"),
        (lambda d: d["model"].update(weights_gb=0), "model.weights_gb must be > 0, got 0.0; use a value in range"),
        (
            lambda d: d["acceptance"]["base"].update(code=1.5),
            "acceptance.base.code must be a probability in [0, 1], got 1.5; write a number between 0 and 1",
        ),
        (
            lambda d: d.update(sglang_version="latest"),
            "sglang_version must look like 0.5.16, got 'latest'; write a release number",
        ),
        (
            lambda d: d["defaults"].update(speculative_algorithm="medusa"),
            "defaults.speculative_algorithm is 'medusa'; use one of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM or omit it",
        ),
        (lambda d: d.update(gpu=3), "gpu must be a table, got 3; write it as [gpu]"),
    ],
)
def test_every_check_is_one_line_naming_the_key_and_fix(mutate, message):
    raw = minimal_profile()
    mutate(raw)
    assert fails(raw) == message


def test_optional_top_level_keys_are_kept_in_extra():
    raw = {**minimal_profile(), "architecture": "LlamaForCausalLM", "typical_output_len": 300}
    profile = profile_from_dict(raw)
    assert profile.extra == {"architecture": "LlamaForCausalLM", "typical_output_len": 300}
    assert profile_from_dict(minimal_profile()).extra == {}


def test_defaults_fill_what_a_minimal_profile_leaves_out():
    profile = profile_from_dict(copy.deepcopy(minimal_profile()))
    assert (profile.tp_size, profile.attention_backend, profile.auto_spec, profile.ngram_factor) == (
        1,
        "flashinfer",
        (3, 1, 4),
        0.6,
    )
    assert (profile.speculative_algorithm, profile.run_sigma, profile.name) == (None, 0.0, "profile")
    assert dataclasses.replace(profile, seed=3).seed == 3  # still a plain frozen dataclass
