"""Static rules: each rule against the SGLang message it mirrors, per version, and the table itself.

Expected messages are copied from SGLang's source (release named in each case), not built
from autospec's templates, so a template typo fails here.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from autospec.errors import ConfigError
from autospec.feasibility import (
    RULES,
    check_static,
    dp_attention_enabled,
    max_draft_tokens,
    resolve_static,
    rules_for,
)


def eagle(steps=3, topk=1, draft=4, algo="EAGLE", **extra):
    flags = {
        "speculative_algorithm": algo,
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft,
    }
    flags.update(extra)
    return flags


def ngram(**extra):
    return {"speculative_algorithm": "NGRAM", **extra}


TREE_ON_PAGES_OLD = (
    "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results for "
    "paged attention backends. This combination is only supported for the 'flashinfer' backend."
)

# (sglang version, flags, rule id, SGLang's message as it prints it)
REJECTIONS = [
    (
        "0.5.23",
        eagle(3, 4, 8, attention_backend="torch_native", page_size=16),
        "topk_gt1_page_size_backend",
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', 'triton'); "
        "got attention_backend='torch_native'. Use page_size == 1 or one of those backends.",
    ),
    ("0.5.12", eagle(3, 4, 8, attention_backend="triton", page_size=16), "topk_gt1_page_size_backend", TREE_ON_PAGES_OLD),
    ("0.5.5", eagle(3, 4, 8, attention_backend="fa3", page_size=16), "topk_gt1_page_size_backend", TREE_ON_PAGES_OLD),
    (
        "0.5.23",
        eagle(3, 4, 8, attention_backend="trtllm_mha", page_size=16),
        "trtllm_mha_topk",
        "trtllm_mha backend only supports topk = 1 for speculative decoding.",
    ),
    (
        "0.5.4",
        eagle(3, 2, 4, decode_attention_backend="trtllm_mha"),
        "trtllm_mha_topk",
        "trtllm_mha backend only supports topk = 1 for speculative decoding.",
    ),
    (
        "0.5.23",
        ngram(attention_backend="triton", page_size=16),
        "ngram_page_size_backend",
        "speculative_eagle_topk(10) > 1 with page_size(16) > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend.",
    ),
    (
        "0.5.23",
        ngram(enable_dp_attention=True, dp_size=2, tp_size=2),
        "ngram_dp_attention",
        "Currently ngram speculative decoding does not support dp attention.",
    ),
    (
        "0.5.23",
        eagle(algo="STANDALONE", attn_dp_size=2, tp_size=2),
        "standalone_dp_attention",
        "Currently standalone speculative decoding does not support dp attention.",
    ),
    (
        "0.5.10",
        eagle(pp_size=2),
        "pp_speculative",
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked prefill.",
    ),
    (
        "0.5.16",
        ngram(pp_size=2),
        "pp_speculative",
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
    ),
    (
        "0.5.23",
        eagle(algo="EAGLE3", pp_size=2),
        "pp_speculative",
        "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding",
    ),
    (
        "0.5.23",
        eagle(algo="NEXTN", pp_size=2),
        "pp_speculative_prefill_only",
        "PP + speculative decoding (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)",
    ),
    ("0.5.23", eagle(topk=None), "topk_unset", "'>' not supported between instances of 'NoneType' and 'int'"),
]


@pytest.mark.parametrize("version,flags,rule,message", REJECTIONS, ids=[f"{r[2]}@{r[0]}" for r in REJECTIONS])
def test_rejection_mirrors_sglangs_message(version, flags, rule, message):
    verdict = check_static(flags, version)
    assert (verdict.status, verdict.source, verdict.rule) == ("rejected", "static", rule)
    assert verdict.reason.startswith(message)


def test_bare_assert_gets_an_explanation():
    verdict = check_static(eagle(steps=None, topk=2, draft=None), "0.5.23")
    assert (verdict.status, verdict.rule) == ("rejected", "partial_spec_params")
    assert "set all three or none" in verdict.reason


@pytest.mark.parametrize(
    "version,backend",
    [
        ("0.5.4", "flashinfer"),
        ("0.5.6", "fa3"),
        ("0.5.13", "triton"),
        ("0.5.23", "triton"),
        ("0.5.23", "fa3"),
    ],
)
def test_tree_on_pages_is_allowed_on_the_backends_of_that_version(version, backend):
    assert check_static(eagle(3, 4, 8, attention_backend=backend, page_size=16), version).ok


def test_tree_without_pages_is_allowed_on_any_backend():
    assert check_static(eagle(3, 4, 8, attention_backend="torch_native", page_size=1), "0.5.4").ok


def test_topk1_rewrites_draft_tokens_to_steps_plus_one():
    verdict = check_static(eagle(3, 1, 7, algo="NEXTN"), "0.5.23")
    assert verdict.ok and verdict.rule is None and verdict.reason == ""
    assert verdict.resolved["speculative_algorithm"] == "EAGLE"
    assert verdict.resolved["speculative_num_draft_tokens"] == 4
    # Two candidates that differ only in draft tokens are the same server.
    assert resolve_static(eagle(3, 1, 2), "0.5.23") == resolve_static(eagle(3, 1, 9), "0.5.23")


def test_spec_defaults_are_filled_in():
    resolved = resolve_static(eagle(), "0.5.23")
    assert resolved["page_size"] == 1 and resolved["max_running_requests"] == 48
    assert resolve_static(eagle(max_running_requests=32), "0.5.23")["max_running_requests"] == 32
    assert "max_running_requests" not in resolve_static({"page_size": 16}, "0.5.23")


def test_ngram_topk_and_defaults_follow_the_version():
    new = resolve_static(ngram(speculative_eagle_topk=1), "0.5.23")
    assert (new["speculative_eagle_topk"], new["speculative_num_draft_tokens"], new["speculative_num_steps"]) == (10, 12, 1)
    custom = resolve_static(ngram(speculative_ngram_max_bfs_breadth=4, speculative_num_draft_tokens=8), "0.5.23")
    assert (custom["speculative_eagle_topk"], custom["speculative_num_steps"]) == (4, 2)
    old = resolve_static(ngram(speculative_ngram_max_match_window_size=9), "0.5.4")
    assert old["speculative_num_draft_tokens"] == 9 and old.get("speculative_num_steps") is None
    assert resolve_static(ngram(), "0.5.13").get("speculative_num_steps") is None


def test_ngram_on_pages_needs_flashinfer():
    assert check_static(ngram(attention_backend="flashinfer", page_size=16), "0.5.23").ok
    assert check_static(ngram(attention_backend="triton", page_size=1), "0.5.23").ok


@pytest.mark.parametrize(
    "flags,expected",
    [
        ({"enable_dp_attention": True, "dp_size": 1}, False),  # dp_size 1 turns it off
        ({"enable_dp_attention": True, "dp_size": 2}, True),
        ({"dp_size": 2}, False),
        ({"attn_dp_size": 4}, True),
    ],
)
def test_dp_attention_detection(flags, expected):
    assert dp_attention_enabled(flags) is expected


def test_speculation_with_dp_attention_is_fine_for_eagle():
    assert check_static(eagle(enable_dp_attention=True, dp_size=2, tp_size=2), "0.5.23").ok
    assert check_static(eagle(algo="STANDALONE", enable_dp_attention=True, dp_size=1), "0.5.23").ok


def test_pipeline_parallelism_with_eagle_on_a_prefill_node_is_allowed_since_0_5_21():
    flags = eagle(pp_size=2, disaggregation_mode="prefill")
    assert check_static(flags, "0.5.23").ok
    assert check_static(flags, "0.5.20").rule == "pp_speculative"
    assert check_static({"pp_size": 2}, "0.5.4").ok  # no speculation


@pytest.mark.parametrize("steps,topk,expected", [(1, 1, 2), (5, 1, 6), (1, 4, 5), (2, 2, 7), (3, 4, 37)])
def test_max_draft_tokens(steps, topk, expected):
    assert max_draft_tokens(steps, topk) == expected


def test_draft_tokens_beyond_the_tree_are_rejected_though_sglang_accepts_them():
    assert check_static(eagle(2, 2, 7), "0.5.23").ok
    verdict = check_static(eagle(2, 2, 8), "0.5.23")
    assert (verdict.status, verdict.rule) == ("rejected", "draft_tokens_exceed_tree")
    assert "speculative_num_draft_tokens=8 is more than the 7 tokens" in verdict.reason
    assert check_static(ngram(speculative_num_draft_tokens=64), "0.5.23").ok  # not an EAGLE tree


def test_backend_page_size_rewrites_run_before_the_tree_check():
    # flashmla forces page_size 64, so a tree is rejected even when page_size 1 was asked for.
    verdict = check_static(eagle(3, 4, 8, attention_backend="flashmla", page_size=1), "0.5.23")
    assert verdict.rule == "topk_gt1_page_size_backend" and verdict.resolved["page_size"] == 64
    assert resolve_static({"attention_backend": "trtllm_mla", "page_size": 16}, "0.5.23")["page_size"] == 64
    assert resolve_static({"attention_backend": "trtllm_mha", "page_size": 128}, "0.5.16")["page_size"] == 64
    assert resolve_static({"attention_backend": "trtllm_mha", "page_size": 128}, "0.5.23")["page_size"] == 128


def test_hardware_dependent_verdicts_are_marked_not_rejected():
    verdict = check_static(eagle(attention_backend="trtllm_mha"), "0.5.23")
    assert verdict.ok and verdict.hardware_dependent and verdict.rule == "trtllm_mha_needs_gpu"
    assert verdict.reason == (
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), "
        "or SM120 GPUs. Please use a different prefill backend."
    )
    assert (
        "Blackwell GPUs (SM100). Please use a different backend."
        in check_static(eagle(attention_backend="trtllm_mha"), "0.5.4").reason
    )
    unset = check_static(eagle(3, 4, 8, page_size=16), "0.5.23")
    assert unset.ok and unset.hardware_dependent and "attention backend unset" in unset.reason


def test_sglang_order_decides_which_message_wins():
    both = ngram(attention_backend="triton", page_size=16, enable_dp_attention=True, dp_size=2)
    assert check_static(both, "0.5.23").rule == "ngram_page_size_backend"
    first = eagle(3, 4, 8, algo="STANDALONE", attention_backend="torch_native", page_size=16, attn_dp_size=2)
    assert check_static(first, "0.5.23").rule == "standalone_dp_attention"


def test_resolve_static_applies_rewrites_even_when_a_rule_rejects():
    resolved = resolve_static(eagle(3, 1, 9, algo="NEXTN", pp_size=2), "0.5.23")
    assert resolved["speculative_algorithm"] == "EAGLE" and resolved["speculative_num_draft_tokens"] == 4


def test_no_speculation_is_ok_and_untouched():
    verdict = check_static({"tp_size": 4, "page_size": 16, "mem_fraction_static": 0.8}, "0.5.23")
    assert verdict.ok and verdict.resolved == {"tp_size": 4, "page_size": 16, "mem_fraction_static": 0.8}


def test_a_bad_version_is_a_config_error():
    with pytest.raises(ConfigError, match="not a version number"):
        check_static(eagle(), "latest")


# --- the table itself -------------------------------------------------------------------


def test_every_row_was_read_against_releases_inside_its_own_range():
    for rule in RULES:
        assert rule.checked, rule.id
        for version in rule.checked:
            assert rule.applies_to(Version(version)), (rule.id, rule.versions, version)


def test_rows_sharing_an_id_never_overlap():
    versions = [f"0.5.{minor}" for minor in range(0, 30)] + ["0.4.10", "0.5.12.post1", "0.6.0"]
    for version in versions:
        ids = [rule.id for rule in rules_for(version)]
        assert len(ids) == len(set(ids)), version


def test_every_rejection_names_what_sglang_says():
    for rule in RULES:
        if rule.effect == "reject":
            assert rule.message or (rule.error_type == "AssertionError" and rule.hint), rule.id
            assert rule.origin in ("sglang", "python", "autospec")
        if rule.origin == "autospec" and rule.effect == "reject":
            assert "SGLang accepts" in rule.message  # says why SGLang's resolver will not catch it


def test_every_rule_id_is_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "feasibility.md").read_text(encoding="utf-8")
    assert [rule.id for rule in RULES if f"`{rule.id}`" not in doc] == []


DFLASH = {"speculative_algorithm": "DFLASH", "speculative_dflash_block_size": 8}
DSPARK = {"speculative_algorithm": "DSPARK", "speculative_dspark_block_size": 4}


@pytest.mark.parametrize(
    "flags, rule, message",
    [
        ({**DFLASH, "speculative_dflash_block_size": 0}, "dflash_block_size_positive", "got 0."),
        ({**DFLASH, "speculative_num_draft_tokens": 4}, "dflash_block_size_mismatch", "speculative_dflash_block_size=8."),
        ({**DSPARK, "speculative_dspark_block_size": 0}, "dspark_block_size_positive", "got 0."),
        ({**DSPARK, "speculative_num_draft_tokens": 4}, "dspark_draft_is_gamma_plus_one", "(= 5 for gamma=4)"),
    ],
)
def test_block_sizes_of_dflash_and_dspark_are_checked_as_in_sglang_0_5_23(flags, rule, message):
    verdict = check_static(flags, "0.5.23")
    assert (verdict.status, verdict.rule) == ("rejected", rule)
    assert message in verdict.reason
    assert check_static(flags, "0.5.16").rule != rule  # checked against 0.5.23 only


def test_dflash_block_size_is_its_draft_token_count_and_a_matching_pair_is_accepted():
    assert check_static(DFLASH, "0.5.23").resolved["speculative_num_draft_tokens"] == 8
    assert check_static({**DFLASH, "speculative_num_draft_tokens": 8}, "0.5.23").ok
    assert check_static({**DSPARK, "speculative_num_draft_tokens": 5}, "0.5.23").ok
