"""Per-request, per-launch and per-machine variation (`autospec.sim.variation`): the
per-request effect is a fixed function of the prompt and the position in the launch, it
averages to the model's accept length, and two launches sent the same stream see it alike."""

from __future__ import annotations

import itertools
import math
import statistics

import httpx
import pytest

from autospec.sim import accept_length, load_profile, request_accept_length, resolve_args
from autospec.sim.variation import RequestVariation, climb, machine_factor, shifted_distribution

from .conftest import to_argv

VARIATION = RequestVariation(request_sigma=0.1, ngram_climb=0.32, climb_requests=8.0, climb_window=40)


def test_the_effect_is_a_fixed_function_of_prompt_and_position():
    a = VARIATION.shift(mean=3.0, draft_tokens=12, ngram=True, prompt="p", position=7)
    assert a == VARIATION.shift(mean=3.0, draft_tokens=12, ngram=True, prompt="p", position=7)
    others = {VARIATION.shift(mean=3.0, draft_tokens=12, ngram=True, prompt=p, position=n) for p in "pq" for n in (7, 8)}
    assert len(others) == 4


def test_the_climb_averages_zero_over_its_window_and_rises():
    shape = [climb(n, 8.0, 40) for n in range(1, 41)]
    assert abs(statistics.fmean(shape)) < 1e-12
    assert all(b > a for a, b in itertools.pairwise(shape))
    assert shape[0] < -0.7 and climb(200, 8.0, 40) > 0.2


def test_the_mean_over_prompts_and_window_positions_is_the_models_accept_length():
    shifts = [
        VARIATION.shift(mean=3.0, draft_tokens=12, ngram=True, prompt=f"prompt {i}", position=n)
        for i in range(100)
        for n in range(1, 41)
    ]
    assert abs(statistics.fmean(shifts)) < 0.02  # 4,000 draws of sd ~0.3: the mean's sd is 0.005
    spread = statistics.stdev(
        VARIATION.shift(mean=3.0, draft_tokens=12, ngram=False, prompt=f"prompt {i}", position=5) for i in range(2000)
    )
    assert spread == pytest.approx(0.1 * 3.0, rel=0.1)  # request_sigma x the mean


def test_first_requests_of_an_ngram_launch_accept_less_than_settled_ones():
    def mean_at(position: int) -> float:
        return statistics.fmean(
            VARIATION.shift(mean=2.7, draft_tokens=12, ngram=True, prompt=f"p{i}", position=position) for i in range(500)
        )

    first, settled = 2.7 + mean_at(1), 2.7 + mean_at(60)
    assert 0.65 < first / settled < 0.75  # H200, SGLang 0.5.16: 2.0-2.5 rising to 3.0-3.4
    eagle = [VARIATION.shift(mean=2.7, draft_tokens=4, ngram=False, prompt="p", position=n) for n in (1, 60)]
    assert eagle[0] != 0 and abs(eagle[1]) <= 0.95 * 1.3  # no climb without NGRAM, the prompt's part only


def test_shifts_stay_inside_the_accept_lengths_range():
    for mean, draft in ((1.05, 4), (3.9, 4), (2.0, 12), (11.5, 12), (1.0, 1)):
        for n in range(1, 60):
            s = VARIATION.shift(mean=mean, draft_tokens=draft, ngram=True, prompt="x", position=n)
            assert 1.0 <= mean + s <= draft


def test_a_shifted_distribution_has_the_shifted_mean():
    probs = [0.3, 0.3, 0.2, 0.1, 0.1]
    mean = sum((k + 1) * p for k, p in enumerate(probs))
    for shift in (-1.0, -0.3, 0.0, 0.4, 1.5):
        moved = shifted_distribution(probs, mean, shift)
        assert math.isclose(sum(moved), 1.0)
        assert min(moved) >= 0
        assert math.isclose(sum((k + 1) * p for k, p in enumerate(moved)), mean + shift)


def test_a_machine_factor_is_fixed_by_its_name_and_spreads_by_sigma():
    assert machine_factor(None, 0.05) == 1.0 and machine_factor("", 0.05) == 1.0
    assert machine_factor("h200-a", 0.0) == 1.0
    assert machine_factor("h200-a", 0.05) == machine_factor("h200-a", 0.05) != machine_factor("h200-b", 0.05)
    logs = [math.log(machine_factor(f"host-{i}", 0.05)) for i in range(2000)]
    assert abs(statistics.fmean(logs)) < 0.005
    assert statistics.stdev(logs) == pytest.approx(0.05, rel=0.1)


def _accepts(sim, n: int) -> list[float]:
    body = {
        "text": " ".join(f"w{i % 50}" for i in range(32)),
        "sampling_params": {"max_new_tokens": 256, "ignore_eos": True, "temperature": 0.0},
    }
    out = []
    with httpx.Client(base_url=sim.url, timeout=60) as http:
        for _ in range(n):
            meta = http.post("/generate", json=body).raise_for_status().json()["meta_info"]
            out.append(meta["completion_tokens"] / meta["spec_verify_ct"])
    return out


def test_two_launches_sent_the_same_stream_see_the_same_per_request_effect(sim_factory):
    flags = {"model_path": "m", "speculative_algorithm": "NGRAM"}
    profile = load_profile("qwen25-coder-7b-ngram-1x-l4")
    fast = ("--sim-profile", "qwen25-coder-7b-ngram-1x-l4", "--sim-load-seconds", "0", "--sim-time-scale", "0.01")
    runs = []
    for seed in ("1", "2"):
        sim = sim_factory(*to_argv(flags), *fast, "--sim-seed", seed)
        sim.wait_ready()
        runs.append(_accepts(sim, 16))
    a, b = runs
    assert a != b  # the launches' own noise differs
    assert statistics.correlation(a, b) > 0.5  # the requests' effects are the same
    model = accept_length(profile, resolve_args(profile, flags), "synthetic", 0.0)
    assert statistics.fmean(a[:3] + b[:3]) < model < statistics.fmean(a[10:] + b[10:])  # NGRAM's climb


def test_predicts_accept_length_is_the_mean_of_the_per_request_ones_over_prompts_and_the_window():
    profile = load_profile("qwen25-coder-7b-ngram-1x-l4")
    for flags in (
        {"speculative_algorithm": "NGRAM"},
        {"speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_eagle_topk": 1},
    ):
        cfg = resolve_args(profile, {"model_path": "m", **flags})
        model = accept_length(profile, cfg, "chat", 0.0)
        each = [
            request_accept_length(profile, cfg, "chat", 0.0, prompt=f"question {i}", position=n)
            for i in range(50)
            for n in range(1, profile.climb_window + 1)
        ]
        assert statistics.fmean(each) == pytest.approx(model, rel=0.01)
        assert statistics.stdev(each) > 0.05 * model  # and they do differ
    plain = resolve_args(profile, {"model_path": "m"})
    assert request_accept_length(profile, plain, "chat", 0.0, prompt="q", position=1) == 1.0
