"""Learned infeasibility: each memory failure has its own monotone direction."""

from __future__ import annotations

import pytest

from autospec.feasibility.learned import LearnedRules

BASE = {"model_path": "m", "tp_size": 4, "speculative_num_steps": 4, "speculative_eagle_topk": 1}


def cfg(mem, draft, **extra):
    return {**BASE, "mem_fraction_static": mem, "speculative_num_draft_tokens": draft, **extra}


def test_kv_pool_failure_skips_less_memory_and_more_draft_tokens_only():
    rules = LearnedRules()
    rules.record_failure(cfg(0.80, 8), "kv_pool_too_small")
    assert rules.explain(cfg(0.80, 8))[0] == "learned_kv_pool_too_small"
    assert rules.explain(cfg(0.76, 10)) is not None  # less memory, bigger drafts: worse
    assert rules.explain(cfg(0.84, 8)) is None  # more memory might fit
    assert rules.explain(cfg(0.80, 6)) is None  # fewer draft tokens might fit
    assert rules.explain(cfg(0.70, 8, tp_size=8)) is None  # other hardware layout: not comparable


def test_cuda_graph_failure_points_the_other_way():
    rules = LearnedRules()
    rules.record_failure(cfg(0.90, 8, cuda_graph_max_bs=32), "cuda_graph_oom")
    assert rules.explain(cfg(0.92, 8, cuda_graph_max_bs=32))[0] == "learned_cuda_graph_oom"
    assert rules.explain(cfg(0.90, 10, cuda_graph_max_bs=64)) is not None
    assert rules.explain(cfg(0.86, 8, cuda_graph_max_bs=32)) is None  # more headroom
    assert rules.explain(cfg(0.90, 8, cuda_graph_max_bs=16)) is None  # smaller graphs


def test_weights_oom_rules_out_every_memory_setting_of_that_layout():
    rules = LearnedRules()
    rules.record_failure(cfg(0.8, 5), "weights_oom")
    assert rules.explain(cfg(0.95, 2)) is not None
    assert rules.explain(cfg(0.95, 2, tp_size=8)) is None


def test_other_failures_teach_nothing():
    rules = LearnedRules()
    rules.record_failure(cfg(0.8, 5), "crashed")
    assert rules.explain(cfg(0.8, 5)) is None


def test_capacity_fit_skips_configs_predicted_below_a_kv_failure():
    rules = LearnedRules()
    # tokens = 1e6 * mem - 80k * draft - 300k (a linear pool, like the seed's)
    for mem, draft in [(0.80, 2), (0.84, 3), (0.88, 4), (0.84, 5)]:
        rules.record_success(cfg(mem, draft), {"max_total_num_tokens": 1e6 * mem - 80e3 * draft - 300e3})
    predicted = rules.predict_tokens(cfg(0.86, 3))
    assert abs(predicted - (860e3 - 240e3 - 300e3)) < 1.0
    rules.record_failure(cfg(0.70, 6), "kv_pool_too_small")  # predicted pool -80k
    assert rules.explain(cfg(0.72, 7))[0] in ("learned_kv_pool_too_small", "learned_kv_capacity")
    # fewer draft tokens but predicted *less* KV than the failure (-100k < -80k): skipped by the fit
    assert rules.explain(cfg(0.60, 5))[0] == "learned_kv_capacity"
    assert rules.explain(cfg(0.90, 3)) is None


def test_no_prediction_without_spread():
    rules = LearnedRules()
    for _ in range(4):
        rules.record_success(cfg(0.8, 3), {"max_total_num_tokens": 100})
    assert rules.predict_tokens(cfg(0.7, 3)) is None


def startup(tokens, available=20.0, pre=90.0, gb_per_token=1e-4, graph=None):
    facts = {
        "max_total_num_tokens": tokens,
        "kv_cache_tokens": tokens,
        "kv_cache_gb": tokens * gb_per_token,
        "gpu_mem_before_load_gb": pre,
        "available_gpu_mem_gb": available,
    }
    if graph is not None:
        facts["cuda_graph_gb"] = graph
    return facts


def test_one_launch_predicts_the_pool_along_mem_fraction_from_the_log():
    rules = LearnedRules()
    # 90 GB before loading, 1e-4 GB per token: +0.01 mem-fraction = +9,000 tokens.
    rules.record_success(cfg(0.80, 4), startup(100_000))
    assert rules.predict_tokens(cfg(0.82, 4)) == pytest.approx(118_000)
    assert rules.predict_tokens(cfg(0.80, 2)) is None  # fewer drafts: slope unknown, no guess
    # 55,000 predicted at 0.75: more than halfway from nothing to the 100,000 that worked
    assert rules.explain(cfg(0.75, 4)) is None
    # 10,000 predicted at 0.70: the model has never seen so small a pool work; a launch
    # may only go halfway (50,000) into what it is unsure of
    assert rules.explain(cfg(0.70, 4))[0] == "learned_kv_capacity"
    assert rules.explain(cfg(0.68, 5))[0] == "learned_kv_capacity"  # at most -8,000: cannot


def test_two_draft_values_fit_the_per_draft_token_cost():
    rules = LearnedRules()
    rules.record_success(cfg(0.80, 2), startup(180_000))
    rules.record_success(cfg(0.80, 4), startup(100_000))  # 40,000 tokens per draft token
    assert rules.predict_tokens(cfg(0.80, 6)) == pytest.approx(20_000)
    assert rules.explain(cfg(0.80, 7))[0] == "learned_kv_capacity"
    assert rules.explain(cfg(0.90, 7)) is None


def test_the_unsure_band_halves_with_every_launch():
    """Between the largest pool that failed and the smallest that worked, a launch may go
    halfway: it either works (the band's top moves down) or fails (its bottom moves up)."""
    rules = LearnedRules()
    rules.record_success(cfg(0.80, 4), startup(100_000))  # +9,000 tokens per 0.01 of mem-fraction
    assert rules.explain(cfg(0.75, 4)) is None  # 55,000: above 50,000, halfway from 0 to 100,000
    rules.record_success(cfg(0.75, 4), startup(55_000))
    assert rules.explain(cfg(0.72, 4)) is None  # 28,000: above 27,500, halfway to 55,000
    rules.record_failure(cfg(0.72, 4), "kv_pool_too_small")  # 28,000 was too small after all
    assert rules.explain(cfg(0.73, 4))[0] == "learned_kv_capacity"  # 37,000: below halfway (41,500) from 28,000 to 55,000
    assert rules.explain(cfg(0.74, 4)) is None  # 46,000: above it


def test_headroom_after_init_predicts_cuda_graph_failures_at_higher_mem_fraction():
    rules = LearnedRules()
    rules.record_success(cfg(0.80, 4), startup(100_000, available=9.0))  # 9 GB free after init
    assert rules.predict_available_gb(cfg(0.85, 4)) == pytest.approx(4.5)
    assert rules.explain(cfg(0.85, 4)) is None  # 4.5 GB: halfway from nothing to the 9 GB that worked
    assert rules.explain(cfg(0.86, 4))[0] == "learned_graph_headroom"  # 3.6 GB: deeper into the unknown
    assert rules.explain(cfg(0.92, 4))[0] == "learned_graph_headroom"  # -1.8 GB left
    rules.record_success(cfg(0.85, 4), startup(145_000, available=4.5))
    assert rules.explain(cfg(0.87, 4)) is None  # 2.7 GB: above halfway (2.25) to 4.5
    rules.record_failure(cfg(0.87, 4), "cuda_graph_oom")  # 2.7 GB was not enough
    assert rules.explain(cfg(0.86, 4)) is None  # 3.6 GB: above halfway (3.6) between 2.7 and 4.5
    assert rules.explain(cfg(0.865, 4))[0] in ("learned_cuda_graph_oom", "learned_graph_headroom")


def test_bigger_graphs_take_their_growth_out_of_the_predicted_headroom():
    rules = LearnedRules()
    # draft 4 at 0.90: 10 GB free after init, of which the CUDA graphs took 2 GB
    rules.record_success(cfg(0.90, 4), startup(300_000, available=10.0, graph=2.0))
    # draft 9 (graph units (9+1) vs (4+1): twice as big) at the same mem-fraction: 2 GB more
    assert rules.predict_available_gb(cfg(0.90, 9)) == pytest.approx(8.0)
    assert rules.predict_available_gb(cfg(0.90, 2)) == pytest.approx(10.0)  # smaller graphs: no credit taken
    # without the graph size in the log, bigger graphs than any seen are not predicted
    blind = LearnedRules()
    blind.record_success(cfg(0.90, 4), startup(300_000, available=10.0))
    assert blind.predict_available_gb(cfg(0.90, 9)) is None


def test_a_graph_oom_teaches_the_margin_whatever_the_draft():
    rules = LearnedRules()
    rules.record_success(cfg(0.92, 4), startup(300_000, available=5.7, graph=1.0))
    rules.record_failure(cfg(0.94, 4), "cuda_graph_oom")  # predicted 3.9 GB: not enough
    # draft 5 at 0.93 predicts 5.7 - 0.9 - 0.2 = 4.6 GB: above the 3.9 that failed, and
    # above halfway (4.8)? no: the model is unsure, it is skipped
    assert rules.explain(cfg(0.93, 5))[0] in ("learned_cuda_graph_oom", "learned_graph_headroom")
    assert rules.explain(cfg(0.92, 4)) is None  # what worked still runs


def test_a_hybrid_models_reserve_per_request_slot_is_fitted_when_slots_vary():
    rules = LearnedRules()
    # pool = 1e6 * mem - 1,000 * slots * draft - 300,000 (state per request slot and draft position)
    for mem, draft, slots in [(0.8, 2, 48), (0.8, 3, 32), (0.8, 2, 16), (0.8, 4, 16)]:
        flags = cfg(mem, draft, max_running_requests=slots)
        tokens = 1e6 * mem - 1_000 * slots * draft - 300e3
        rules.record_success(flags, startup(tokens, pre=100.0, gb_per_token=1e-4))
    # 6 draft tokens with 48 slots: a reserve never seen; the fit over slots x draft predicts it
    assert rules.predict_tokens(cfg(0.8, 6, max_running_requests=48)) == pytest.approx(800e3 - 288e3 - 300e3, rel=1e-6)


def test_reasons_never_print_a_negative_prediction():
    rules = LearnedRules()
    rules.record_success(cfg(0.80, 2), startup(180_000, available=9.0))
    rules.record_success(cfg(0.80, 4), startup(100_000, available=9.0))  # 40,000 tokens per draft token
    rules.record_failure(cfg(0.80, 6), "kv_pool_too_small")  # predicted 20,000 tokens: the limit
    # a pool predicted below zero: no room, not a negative count of tokens
    assert rules.predict_tokens(cfg(0.82, 7)) == pytest.approx(-2_000)
    rule, reason = rules.explain(cfg(0.82, 7))
    assert rule == "learned_kv_capacity" and reason.startswith("predicted to leave no room for the KV pool (")
    # a positive prediction at or below the failure's: the count is worth saying
    assert rules.predict_tokens(cfg(0.84, 7)) == pytest.approx(16_000)
    rule, reason = rules.explain(cfg(0.84, 7))
    assert rule == "learned_kv_capacity" and reason.startswith("predicted KV pool of 16,000 tokens is too small (")
    # headroom predicted below zero (9 GB - 0.15 x 90 GB): no memory left, not -4.50 GB
    headroom = LearnedRules()
    headroom.record_success(cfg(0.80, 4), startup(100_000, available=9.0))
    assert headroom.predict_available_gb(cfg(0.95, 4)) < 0
    rule, reason = headroom.explain(cfg(0.95, 4))
    assert rule == "learned_graph_headroom"
    assert reason.startswith("predicted to leave no memory for activations and CUDA graphs (")
    for text in (rules.explain(cfg(0.82, 7))[1], reason):
        assert "-" not in text.split("(")[0]
