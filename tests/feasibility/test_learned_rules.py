"""Learned infeasibility: each memory failure has its own monotone direction."""

from __future__ import annotations

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
