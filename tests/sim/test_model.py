"""The pure model: SGLang's rewrites and rejections, the memory model, acceptance, step
cost, prompt classification and profile validation."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from autospec.sglang_facts import max_draft_tokens
from autospec.sim import (
    ArgumentRejected,
    ProfileError,
    accept_length,
    accept_length_distribution,
    classify_prompt,
    init_outcome,
    list_profiles,
    load_profile,
    predict,
    prefill_seconds,
    resolve_args,
    step_seconds,
)
from autospec.sim.acceptance import acceptance_per_depth, tree_shape
from autospec.sim.config import version_at_least
from autospec.sim.memory import draft_tree_invalid
from autospec.sim.profile import profile_from_dict

SEED = load_profile()


def at_version(version: str, profile=SEED):
    return dataclasses.replace(profile, sglang_version=version)


def mtp(steps: int, topk: int = 1, draft: int | None = None, **extra) -> dict:
    return {
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": steps + 1 if draft is None else draft,
        **extra,
    }


def cfg_for(flags: dict, profile=SEED):
    return resolve_args(profile, flags)


# ------------------------------------------------------------------ rewrites


def test_nextn_is_rewritten_to_eagle_and_defaults_come_from_the_profile():
    cfg = cfg_for(mtp(3))
    assert cfg.speculative_algorithm == "EAGLE"
    assert (cfg.attention_backend, cfg.page_size, cfg.tp_size) == ("triton", 16, 4)
    assert cfg.mem_fraction_static == SEED.mem_fraction_static
    assert cfg.max_running_requests is None  # not set by the user; the 48 reset is the memory model's
    assert "max_running_requests" in cfg.as_dict() and "notes" not in cfg.as_dict()


def test_topk_one_forces_draft_tokens_to_steps_plus_one():
    cfg = cfg_for(mtp(2, 1, draft=7))
    assert cfg.speculative_num_draft_tokens == 3
    assert any("adjusted to speculative_num_steps + 1" in note for note in cfg.notes)


def test_all_three_unset_take_the_profiles_automatic_choice():
    cfg = cfg_for({"speculative_algorithm": "NEXTN"})
    assert (cfg.speculative_num_steps, cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens) == SEED.auto_spec
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    cfg = cfg_for({"speculative_algorithm": "EAGLE3"}, llama)
    assert (cfg.speculative_num_steps, cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens) == (5, 4, 8)


def test_max_running_requests_reset_note_follows_the_version_wording():
    assert cfg_for(mtp(3)).notes[0] == (
        "Max running requests is reset to 48 for speculative decoding. "
        "You can override this by explicitly setting --max-running-requests."
    )
    assert cfg_for(mtp(3), at_version("0.5.4")).notes[0] == "Max running requests is reset to 48 for speculative decoding."
    assert not any("Max running" in n for n in cfg_for(mtp(3, max_running_requests=20)).notes)


def test_no_speculation_has_zero_spec_fields():
    cfg = cfg_for({"mem_fraction_static": 0.8})
    assert cfg.speculative_algorithm is None and cfg.speculative_num_draft_tokens == 0
    assert accept_length(SEED, cfg, "chat", 0.0) == 1.0
    assert accept_length_distribution(SEED, cfg, "chat", 0.0) == [1.0]


def test_ngram_takes_topk_from_bfs_breadth_and_twelve_draft_tokens():
    profile = at_version("0.5.16", load_profile("llama31-8b-eagle3-1x-h100"))
    cfg = resolve_args(profile, {"speculative_algorithm": "NGRAM"})
    assert (cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens) == (10, 12)


# ------------------------------------------------------------------ rejections


def rejection(flags: dict, profile=SEED) -> ArgumentRejected:
    with pytest.raises(ArgumentRejected) as info:
        resolve_args(profile, flags)
    return info.value


def test_tree_with_paged_triton_is_rejected_in_the_seeds_version():
    err = rejection(mtp(3, 4, 8))
    assert str(err) == (
        "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend."
    )
    assert err.traceback_line.startswith("ValueError: speculative_eagle_topk > 1")
    resolve_args(SEED, mtp(3, 4, 8, attention_backend="flashinfer"))  # flashinfer is fine
    resolve_args(SEED, mtp(3, 4, 8, page_size=1))  # and so is page_size 1


@pytest.mark.parametrize(
    ("version", "backend", "accepted"),
    [
        ("0.5.4", "fa3", False),
        ("0.5.6", "fa3", True),
        ("0.5.12", "triton", False),
        ("0.5.13", "triton", True),
        ("0.5.23", "flashmla", False),
    ],
)
def test_which_backends_accept_paged_trees_depends_on_the_version(version, backend, accepted):
    flags = mtp(3, 4, 8, attention_backend=backend)
    if accepted:
        resolve_args(at_version(version), flags)
    else:
        rejection(flags, at_version(version))


def test_newest_tree_message_names_the_backend():
    err = rejection(mtp(3, 4, 8, attention_backend="flashmla"), at_version("0.5.16"))
    assert str(err) == (
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', 'triton'); "
        "got attention_backend='flashmla'. Use page_size == 1 or one of those backends."
    )


def test_trtllm_mha_allows_only_topk_one():
    err = rejection(mtp(3, 2, 6, attention_backend="trtllm_mha", page_size=1))
    assert str(err) == "trtllm_mha backend only supports topk = 1 for speculative decoding."
    resolve_args(SEED, mtp(3, 1, attention_backend="trtllm_mha"))


def test_ngram_with_pages_needs_flashinfer():
    err = rejection({"speculative_algorithm": "NGRAM", "attention_backend": "triton", "page_size": 16})
    assert str(err) == (
        "speculative_eagle_topk(10) > 1 with page_size(16) > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend."
    )  # the wording of data/real-sglang-0.5.16-h200/ngram.log
    resolve_args(SEED, {"speculative_algorithm": "NGRAM", "attention_backend": "flashinfer", "page_size": 16})


def test_standalone_and_ngram_reject_dp_attention_but_eagle_does_not():
    assert (
        str(rejection({"speculative_algorithm": "STANDALONE", "enable_dp_attention": True, "dp_size": 2}))
        == "Currently standalone speculative decoding does not support dp attention."
    )
    assert (
        str(rejection({"speculative_algorithm": "NGRAM", "enable_dp_attention": True, "dp_size": 2, "page_size": 1}))
        == "Currently ngram speculative decoding does not support dp attention."
    )
    resolve_args(SEED, mtp(3, enable_dp_attention=True, dp_size=2))
    # SGLang turns --enable-dp-attention off with dp_size 1 (the shared table's dp_attention_enabled)
    resolve_args(SEED, {"speculative_algorithm": "NGRAM", "enable_dp_attention": True, "page_size": 1})


def test_partial_spec_flags_fail_like_sglang():
    err = rejection({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 2})
    assert err.exc_type == "AssertionError" and err.traceback_line == "AssertionError"
    err = rejection({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3})
    assert err.exc_type == "TypeError"


def test_pipeline_parallelism_with_speculation_by_version():
    flags = mtp(3, pp_size=2)
    assert str(rejection(flags)) == (
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked prefill."
    )
    assert (
        str(rejection(flags, at_version("0.5.11")))
        == "Pipeline parallelism is not compatible with overlap schedule, speculative decoding"
    )
    assert (
        str(rejection(flags, at_version("0.5.16")))
        == "Pipeline parallelism is not compatible with overlap schedule, speculative decoding"
    )
    assert rejection(flags).exc_type == "AssertionError"


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_pipeline_parallel_eagle_runs_only_on_a_prefill_node_from_0_5_21(version):
    # 0.5.23 check_server_args (validation_hook.py:160-164), run for real: NEXTN and EAGLE with
    # --pp-size 2 fail unless --disaggregation-mode prefill; other algorithms never pass
    profile = at_version(version)
    for algo in ("NEXTN", "EAGLE"):
        err = rejection({**mtp(3, pp_size=2), "speculative_algorithm": algo}, profile)
        assert str(err) == "PP + speculative decoding (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)"
        assert err.exc_type == "AssertionError"
    assert resolve_args(profile, mtp(3, pp_size=2, disaggregation_mode="prefill")).pp_size == 2
    only_eagle = "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding"
    for flags in (
        {**mtp(3, pp_size=2), "speculative_algorithm": "EAGLE3"},
        {**mtp(3, pp_size=2), "speculative_algorithm": "STANDALONE"},
        mtp(3, pp_size=2, disaggregation_mode="prefill", enable_multi_layer_eagle=True),
        {"speculative_algorithm": "NGRAM", "attention_backend": "flashinfer", "pp_size": 2},
    ):
        assert str(rejection(flags, profile)) == only_eagle
    resolve_args(profile, {"pp_size": 2})  # no speculation: fine


def test_oversized_draft_tree_is_accepted_at_argument_time_but_fails_at_init():
    flags = mtp(2, 2, 8, attention_backend="flashinfer", page_size=1)  # SGLang's limit: 1 + 2 + 1 * 4 = 7
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    outcome = init_outcome(llama, resolve_args(llama, flags))
    assert outcome.status == "invalid_draft_tree"
    assert outcome.message.startswith("Exception: Capture cuda graph failed: selected index k out of range")


def test_draft_tree_bound_is_sglangs_not_steps_times_topk():
    # organize_draft_results picks draft - 1 of topk + (steps - 1) * topk^2 candidates (0.5.23)
    assert [max_draft_tokens(s, k) for s, k in ((1, 1), (5, 1), (1, 4), (2, 2), (3, 4), (2, 8))] == [2, 6, 5, 7, 37, 73]
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    for steps, topk in ((2, 2), (3, 2), (2, 4)):
        old, limit = steps * topk + 1, max_draft_tokens(steps, topk)
        for draft in range(old + 1, limit + 1):  # between the two bounds: starts now
            cfg = resolve_args(llama, mtp(steps, topk, draft, attention_backend="flashinfer", page_size=1))
            assert not draft_tree_invalid(cfg) and init_outcome(llama, cfg).ok, (steps, topk, draft)
        cfg = resolve_args(llama, mtp(steps, topk, limit + 1, attention_backend="flashinfer", page_size=1))
        assert draft_tree_invalid(cfg) and init_outcome(llama, cfg).status == "invalid_draft_tree"


def test_nodes_beyond_steps_times_topk_cost_but_add_no_acceptance():
    # At each depth only the topk children of the accepted parent can match, so a tree gains
    # nothing from nodes past steps * topk + 1; they are verified (and captured) all the same.
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    flags = dict(attention_backend="flashinfer", page_size=1)
    full, bigger = (resolve_args(llama, mtp(3, 4, d, **flags)) for d in (13, 37))
    for workload in ("synthetic", "chat", "code"):
        assert accept_length(llama, bigger, workload, 0.0) == pytest.approx(accept_length(llama, full, workload, 0.0))
    assert tree_shape(llama, bigger, "chat", 0.0) == [4, 4, 4]
    assert sum(accept_length_distribution(llama, bigger, "chat", 0.0)) == pytest.approx(1.0)
    assert step_seconds(llama, bigger, 16) > step_seconds(llama, full, 16)
    at_c1 = [predict(llama, {**mtp(3, 4, d, **flags), "model_path": "m"}, 1, "chat") for d in (13, 37)]
    assert all(p.ok for p in at_c1) and at_c1[1].per_request_tok_s < at_c1[0].per_request_tok_s


def test_ngram_has_no_eagle_tree_bound():
    # NGRAM verifies its trie in its own worker: SGLang's default (12 draft tokens, breadth
    # 10, steps 12 // 10 = 1) starts, although 12 > 1 + 10
    ngram_profile = load_profile("llama31-8b-eagle3-1x-h100")
    cfg = resolve_args(ngram_profile, {"speculative_algorithm": "NGRAM", "attention_backend": "flashinfer"})
    assert (cfg.speculative_num_steps, cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens) == (1, 10, 12)
    assert not draft_tree_invalid(cfg) and init_outcome(ngram_profile, cfg).status != "invalid_draft_tree"


def test_more_gpus_than_the_profile_has_fail_like_a_missing_cuda_device():
    llama = load_profile("llama31-8b-eagle3-1x-h100")  # one GPU
    assert llama.gpu_count == 1
    for flags in (mtp(3, tp_size=4), mtp(3, tp_size=2), {"pp_size": 2}):  # (0.5.16: no speculation with PP)
        outcome = init_outcome(llama, resolve_args(llama, flags))
        assert outcome.status == "too_few_gpus" and not outcome.ok
        assert outcome.message.splitlines()[:2] == [
            "torch.AcceleratorError: CUDA error: invalid device ordinal",
            "GPU device may be out of range, do you have enough GPUs?",
        ]  # torch 2.11 on a 1-GPU H200, torch.cuda.set_device(1)
        assert outcome.weights_gb == 0 and outcome.gpu_mem_used_gb == 0 and outcome.max_total_num_tokens == 0
    assert init_outcome(llama, resolve_args(llama, {**mtp(3), "tp_size": 1})).ok
    assert predict(llama, {**mtp(3), "model_path": "m", "tp_size": 4}, 1).init == "too_few_gpus"
    # the seed profile has four GPUs: tp 4, or tp 2 x pp 2, fit; tp 4 x pp 2 does not
    assert init_outcome(SEED, cfg_for(mtp(3, tp_size=4))).status != "too_few_gpus"
    assert init_outcome(SEED, cfg_for({"tp_size": 2, "pp_size": 2})).status != "too_few_gpus"
    assert init_outcome(SEED, cfg_for({"tp_size": 4, "pp_size": 2})).status == "too_few_gpus"


# ------------------------------------------------------------------ memory


def test_more_steps_shrink_the_pool_by_a_fixed_slice_per_step():
    pools = [init_outcome(SEED, cfg_for(mtp(s))).max_total_num_tokens for s in (1, 2, 3, 4)]
    drops = [a - b for a, b in itertools.pairwise(pools)]
    assert all(75_000 < d < 85_000 for d in drops)
    assert all(p % 16 == 0 for p in pools)  # rounded down to page_size


def test_kv_pool_too_small_in_both_directions_with_the_versions_message():
    low = init_outcome(SEED, cfg_for(mtp(3, mem_fraction_static=0.3)))
    deep = init_outcome(SEED, cfg_for(mtp(10)))
    for outcome in (low, deep):
        assert outcome.status == "kv_pool_too_small"
        assert outcome.max_total_num_tokens == 0
    assert deep.message == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.85"
    )
    old = init_outcome(at_version("0.5.4"), cfg_for(mtp(10)))
    assert old.message.endswith("Current value: self.server_args.mem_fraction_static=0.85")
    new = init_outcome(at_version("0.5.12"), cfg_for(mtp(10)))
    assert new.message == "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


def test_0516_wording_when_weights_leave_nothing():
    profile = at_version("0.5.16")
    outcome = init_outcome(profile, resolve_args(profile, mtp(3, mem_fraction_static=0.2)))
    assert outcome.status == "kv_pool_too_small"
    assert outcome.message.startswith(
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.2. "
        "Raise --mem-fraction-static above 0."
    )
    assert outcome.message.endswith("If using speculative decoding, draft weights are now counted.")
    minimum = float(outcome.message.split("available/pre = ")[1].split(")")[0])
    assert minimum == pytest.approx((SEED.weights_gb + SEED.draft_weights_gb) / 4 / (SEED.gpu_mem_gb - 1.0), abs=1e-4)


def test_too_little_headroom_fails_cuda_graph_capture():
    high = init_outcome(SEED, cfg_for(mtp(3, mem_fraction_static=0.95)))
    assert high.status == "cuda_graph_oom"
    assert high.message.startswith("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate ")
    assert "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)" in high.message
    # at a fraction that works, a big graph batch with a wide tree runs out of headroom
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    ok = init_outcome(llama, resolve_args(llama, mtp(5, 4, 8, mem_fraction_static=0.9)))
    big = init_outcome(llama, resolve_args(llama, mtp(5, 4, 8, mem_fraction_static=0.9, cuda_graph_max_bs=256)))
    assert (ok.status, big.status) == ("ok", "cuda_graph_oom")
    assert "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)" in big.message  # 0.5.16 wording


def test_weights_that_do_not_fit_fail_while_loading():
    outcome = init_outcome(SEED, cfg_for(mtp(3, tp_size=1)))
    assert outcome.status == "weights_oom"
    assert outcome.message.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 ")


def test_running_requests_capped_by_the_pool_and_by_the_user():
    assert init_outcome(SEED, cfg_for(mtp(3))).max_running_requests == 17
    assert init_outcome(SEED, cfg_for(mtp(3, max_running_requests=8))).max_running_requests == 8
    # asking for fewer slots frees the per-slot draft state, so the pool grows
    assert (
        init_outcome(SEED, cfg_for(mtp(3, max_running_requests=24))).max_total_num_tokens
        > init_outcome(SEED, cfg_for(mtp(3))).max_total_num_tokens
    )


def test_ok_outcome_accounts_memory():
    o = init_outcome(SEED, cfg_for(mtp(3)))
    assert o.status == "ok" and o.message == ""
    assert o.gpu_mem_used_gb + o.available_gpu_mem_gb == pytest.approx(SEED.gpu_mem_gb, abs=0.02)
    assert o.weights_gb == pytest.approx((118.0 + 2.4) / 4, abs=0.01)
    assert o.cuda_graph_gb > 0 and o.kv_cache_gb > 0 and o.context_len == SEED.context_len


# ------------------------------------------------------------------ acceptance


def chain_formula(a: list[float]) -> float:
    return 1.0 + sum(math.prod(a[: i + 1]) for i in range(len(a)))


@pytest.mark.parametrize("workload", ["synthetic", "chat", "code", "summarize"])
def test_topk_one_equals_the_chain_formula(workload):
    cfg = cfg_for(mtp(4))
    a = acceptance_per_depth(SEED, cfg, workload, 0.0)
    assert accept_length(SEED, cfg, workload, 0.0) == pytest.approx(chain_formula(a))


def test_more_draft_budget_never_lowers_acceptance():
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    for topk in (2, 4, 8):
        lengths = [accept_length(llama, resolve_args(llama, mtp(6, topk, d)), "chat", 0.0) for d in range(2, 17)]
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(lengths))
    chain = accept_length(llama, resolve_args(llama, mtp(4)), "chat", 0.0)
    tree = accept_length(llama, resolve_args(llama, mtp(4, 4, 12)), "chat", 0.0)
    assert tree > chain  # a wider tree with more nodes catches some misses


def test_tree_shape_respects_topk_steps_and_budget():
    llama = load_profile("llama31-8b-eagle3-1x-h100")
    shape = tree_shape(llama, resolve_args(llama, mtp(3, 2, 6)), "chat", 0.0)
    assert sum(shape) == 5 and len(shape) <= 3 and max(shape) <= 2


def test_temperature_lowers_acceptance():
    cfg = cfg_for(mtp(3))
    values = [accept_length(SEED, cfg, "chat", t) for t in (0.0, 0.5, 1.0)]
    assert values[0] > values[1] > values[2] >= 1.0


def test_predictable_workloads_accept_more():
    cfg = cfg_for(mtp(3))
    assert (
        accept_length(SEED, cfg, "synthetic", 0.0)
        > accept_length(SEED, cfg, "code", 0.0)
        > accept_length(SEED, cfg, "chat", 0.0)
        > accept_length(SEED, cfg, "summarize", 0.0)
    )


@pytest.mark.parametrize("flags", [mtp(1), mtp(5), mtp(3, 4, 8, page_size=1), mtp(6, 8, 16, page_size=1)])
def test_distribution_is_a_distribution_whose_mean_is_accept_length(flags):
    cfg = cfg_for(flags)
    for temperature in (0.0, 0.7):
        probs = accept_length_distribution(SEED, cfg, "code", temperature)
        assert len(probs) == cfg.speculative_num_draft_tokens and min(probs) >= 0.0
        assert sum(probs) == pytest.approx(1.0)
        mean = sum((k + 1) * p for k, p in enumerate(probs))
        assert mean == pytest.approx(accept_length(SEED, cfg, "code", temperature))


def test_unknown_workload_is_a_one_line_error():
    with pytest.raises(ValueError, match="unknown workload 'poetry'; use one of"):
        accept_length(SEED, cfg_for(mtp(3)), "poetry", 0.0)


# ------------------------------------------------------------------ step cost


def test_step_cost_grows_with_batch_steps_and_tree_width():
    c1, c3, c5 = (cfg_for(mtp(s)) for s in (1, 3, 5))
    times = [step_seconds(SEED, c3, b) for b in (1, 4, 16, 32)]
    assert times == sorted(times) and times[0] > SEED.floor_ms / 1000
    assert step_seconds(SEED, c1, 1) < step_seconds(SEED, c3, 1) < step_seconds(SEED, c5, 1)
    deepseek = load_profile("deepseek-v3-mtp-8x-h200")
    chain = step_seconds(deepseek, resolve_args(deepseek, mtp(3)), 16)
    tree = step_seconds(deepseek, resolve_args(deepseek, mtp(3, 4, 8)), 16)
    assert tree > chain


def test_moe_expert_traffic_saturates():
    deepseek = load_profile("deepseek-v3-mtp-8x-h200")
    cfg = resolve_args(deepseek, mtp(3))
    gains = [step_seconds(deepseek, cfg, b + 8) - step_seconds(deepseek, cfg, b) for b in (1, 16, 64)]
    assert gains[0] > gains[1] > gains[2] > 0  # each extra token touches fewer new experts


def test_prefill_cost_grows_with_tokens_and_sequences():
    cfg = cfg_for(mtp(3))
    assert prefill_seconds(SEED, cfg, 32, 1) < prefill_seconds(SEED, cfg, 32 * 16, 16) < prefill_seconds(SEED, cfg, 8192, 16)


# ------------------------------------------------------------------ prompts


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "synthetic"),
        (" ".join(str(i) for i in range(1, 33)), "synthetic"),
        ("w267 w217 w267 w217 w50 w486", "synthetic"),
        ("hello hello hello hello hello hello hello hello hello world", "synthetic"),
        ("Complete this function:\n```python\ndef add(a, b):\n    return a + b\n```", "code"),
        ("Summarise the following text in two sentences: the council met on Tuesday.", "summarize"),
        ("What is a good way to start learning to play the guitar as an adult?", "chat"),
    ],
)
def test_classify_prompt(text, kind):
    assert classify_prompt(text) == kind


# ------------------------------------------------------------------ profiles


def test_shipped_profiles_load():
    names = list_profiles()
    assert {"seed-qwen35-122b-4x-rtxpro6000", "llama31-8b-eagle3-1x-h100", "deepseek-v3-mtp-8x-h200"} <= set(names)
    for name in names:
        assert load_profile(name).name == name


def minimal_profile() -> dict:
    return {
        "sglang_version": "0.5.16",
        "model": {"name": "m", "params_b": 1.0, "weights_gb": 2.0, "context_len": 4096, "kv_bytes_per_token": 65536},
        "gpu": {"name": "g", "mem_gb": 24.0, "count": 1},
        "defaults": {"cuda_graph_max_bs": 16, "mem_fraction_static": 0.8},
        "memory": {"activation_gb": 1.0, "cuda_graph_base_gb": 0.1, "cuda_graph_gb_per_token": 0.001},
        "acceptance": {
            "base": {"synthetic": 0.9, "code": 0.8, "chat": 0.7, "summarize": 0.6},
            "decay": 0.9,
            "temperature_penalty": 0.2,
            "tree_gain": 0.3,
        },
        "cost": {
            "floor_ms": 5.0,
            "verify_ms_per_token": 0.01,
            "draft_step_ms": 0.3,
            "draft_ms_per_token": 0.01,
            "prefill_base_ms": 5.0,
            "prefill_ms_per_token": 0.01,
        },
        "timing": {"load_seconds": 1.0, "warmup_seconds": 0.5},
    }


def test_a_minimal_profile_is_valid_and_usable():
    profile = profile_from_dict(minimal_profile())
    cfg = resolve_args(profile, mtp(3))
    assert init_outcome(profile, cfg).status == "ok"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.pop("sglang_version"), "sglang_version is missing"),
        (lambda d: d["model"].pop("weights_gb"), "model.weights_gb is missing"),
        (lambda d: d["gpu"].update(mem_gb="lots"), "gpu.mem_gb must be a number"),
        (lambda d: d["defaults"].update(mem_fraction_static=1.5), "defaults.mem_fraction_static must be <= 1"),
        (lambda d: d["acceptance"]["base"].pop("code"), "acceptance.base must name exactly"),
        (lambda d: d["defaults"].update(attention_backend="magic"), "defaults.attention_backend is 'magic'"),
        (lambda d: d.update(extras={"x": 1}), "[extras] is not a known table"),
        (lambda d: d["defaults"].update(tp_size=2), "defaults.tp_size (2) exceeds gpu.count (1)"),
    ],
)
def test_bad_profiles_fail_with_one_line(mutate, fragment):
    raw = minimal_profile()
    mutate(raw)
    with pytest.raises(ProfileError) as info:
        profile_from_dict(raw, source="my.toml")
    message = str(info.value)
    assert fragment in message and "\n" not in message and message.startswith("simulator profile my.toml: ")


def test_missing_and_unknown_profile_files(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "nope.toml")
    with pytest.raises(ProfileError, match="no shipped simulator profile named 'nope'"):
        load_profile("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [", encoding="utf-8")
    with pytest.raises(ProfileError, match="is not valid TOML"):
        load_profile(bad)


@pytest.mark.parametrize(
    ("version", "minimum", "expected"),
    [
        ("0.5.16", "0.5.13", True),
        ("0.5.4", "0.5.13", False),  # numeric, not string order
        ("0.5.13", "0.5.13", True),
        ("0.5.16.post1", "0.5.16", True),
        ("0.5.13rc1", "0.5.13", False),  # a release candidate comes before its release
        ("0.6", "0.5.23", True),
    ],
)
def test_version_at_least_compares_releases(version, minimum, expected):
    assert version_at_least(version, minimum) is expected
