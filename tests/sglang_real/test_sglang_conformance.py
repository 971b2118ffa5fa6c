"""autospec against the real sglang 0.5.23 (CPU only): verdicts, argv, and the strings we rely on.

1. For a table of configurations (rewritten, accepted, rejected, hardware-dependent), the
   static rules give SGLang's own verdict, message and resolved values.
2. Every argv autospec generates from the default search-space values parses with SGLang's
   own CLI parser.
3. Every SGLang string the launcher's classifier and startup parser rely on, and every
   SGLang message the static rules mirror, still occurs in the installed sglang source.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from autospec.feasibility import check_static, rules_for

from .conftest import SGLANG_VERSION

pytestmark = pytest.mark.sglang

SPEC_KEYS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "page_size",
    "max_running_requests",
)


def launch_argv(flags: dict[str, Any]) -> list[str]:
    """The server argv autospec's launcher builds for these flags (command words dropped)."""
    from autospec.launcher.request import LaunchRequest, build_argv

    command = ("sglang-server",)
    request = LaunchRequest(command=command, flags=flags, log_path=Path(tempfile.gettempdir()) / "unused.log")
    return build_argv(request, port=30000)[len(command) :]


def eagle(steps, topk, draft, algo="EAGLE", **extra):
    return {
        "speculative_algorithm": algo,
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": draft,
        **extra,
    }


def dflash(block, **extra):
    return {"speculative_algorithm": "DFLASH", "speculative_dflash_block_size": block, "attention_backend": "triton", **extra}


TRITON16 = {"attention_backend": "triton", "page_size": 16}
DP2 = {"enable_dp_attention": True, "dp_size": 2, "tp_size": 2}

# (name, flags without model paths, static verdict: "ok" or rule id, SGLang's resolver: ok | rejected | hardware)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("mtp_chain_rewritten", eagle(3, 1, 7, "NEXTN", **TRITON16), "ok", "ok"),
    ("eagle_chain_1_step", eagle(1, 1, 2), "ok", "ok"),
    ("eagle3_chain", eagle(5, 1, 6, "EAGLE3", attention_backend="triton"), "ok", "ok"),
    ("tree_triton_paged", eagle(3, 4, 8, **TRITON16), "ok", "ok"),
    ("tree_flashinfer_paged", eagle(3, 4, 8, attention_backend="flashinfer", page_size=16), "ok", "ok"),
    ("tree_fa3_paged", eagle(3, 4, 8, attention_backend="fa3", page_size=16), "ok", "ok"),
    (
        "tree_torch_native_paged",
        eagle(3, 4, 8, attention_backend="torch_native", page_size=16),
        "topk_gt1_page_size_backend",
        "rejected",
    ),
    ("tree_flashmla_forced_pages", eagle(3, 4, 8, attention_backend="flashmla"), "topk_gt1_page_size_backend", "rejected"),
    ("tree_at_its_size", eagle(2, 2, 7, **TRITON16), "ok", "ok"),
    ("tree_too_many_drafts", eagle(2, 2, 8, **TRITON16), "draft_tokens_exceed_tree", "ok"),
    ("ngram_triton_paged", {"speculative_algorithm": "NGRAM", **TRITON16}, "ngram_page_size_backend", "rejected"),
    (
        "ngram_flashinfer_paged",
        {"speculative_algorithm": "NGRAM", "attention_backend": "flashinfer", "page_size": 16},
        "ok",
        "ok",
    ),
    ("ngram_triton_unpaged", {"speculative_algorithm": "NGRAM", "attention_backend": "triton"}, "ok", "ok"),
    (
        "ngram_custom_breadth",
        {
            "speculative_algorithm": "NGRAM",
            "attention_backend": "triton",
            "speculative_ngram_max_bfs_breadth": 4,
            "speculative_num_draft_tokens": 8,
        },
        "ok",
        "ok",
    ),
    (
        "ngram_dp_attention",
        {"speculative_algorithm": "NGRAM", "attention_backend": "triton", **DP2},
        "ngram_dp_attention",
        "rejected",
    ),
    (
        "standalone_dp_attention",
        eagle(3, 1, 4, "STANDALONE", attention_backend="triton", **DP2),
        "standalone_dp_attention",
        "rejected",
    ),
    ("standalone_dp_size_1", eagle(3, 1, 4, "STANDALONE", attention_backend="triton", enable_dp_attention=True), "ok", "ok"),
    ("eagle_dp_attention", eagle(3, 1, 4, attention_backend="triton", **DP2), "ok", "ok"),
    ("eagle_pipeline", eagle(3, 1, 4, attention_backend="triton", pp_size=2), "pp_speculative_prefill_only", "rejected"),
    ("eagle3_pipeline", eagle(3, 1, 4, "EAGLE3", attention_backend="triton", pp_size=2), "pp_speculative", "rejected"),
    (
        "eagle_pipeline_prefill_node",
        eagle(3, 1, 4, attention_backend="triton", pp_size=2, disaggregation_mode="prefill"),
        "ok",
        "ok",
    ),
    ("topk_without_steps", {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 2}, "partial_spec_params", "rejected"),
    ("steps_without_topk", {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3}, "topk_unset", "rejected"),
    ("trtllm_mha_chain", eagle(3, 1, 4, attention_backend="trtllm_mha"), "ok", "hardware"),
    ("trtllm_mha_tree", eagle(3, 4, 8, attention_backend="trtllm_mha"), "trtllm_mha_topk", "hardware"),
    ("no_speculation", {**TRITON16, "tp_size": 4, "mem_fraction_static": 0.8}, "ok", "ok"),
    ("eagle_all_auto", {"speculative_algorithm": "EAGLE", "attention_backend": "triton"}, "ok", "ok"),
    ("chain_with_running_requests", eagle(3, 1, 4, attention_backend="triton", max_running_requests=32), "ok", "ok"),
    ("dflash_block_zero", dflash(0), "dflash_block_size_positive", "rejected"),
    ("dflash_block_differs", dflash(8, speculative_num_draft_tokens=4), "dflash_block_size_mismatch", "rejected"),
]


def with_models(flags: dict[str, Any], models: dict[str, str]) -> dict[str, Any]:
    algo = flags.get("speculative_algorithm")
    draft = {"EAGLE3": models["eagle3"], "STANDALONE": models["target"], "NGRAM": None}.get(algo, models["eagle"])
    full = {"model_path": models["target"], **flags}
    if algo and draft:
        full["speculative_draft_model_path"] = draft
    return full


@pytest.fixture(scope="module")
def verdicts(preflight, tiny_models):
    """(case, static verdict, SGLang's verdict) for every case, resolved in one subprocess."""
    flags = [with_models(case[1], tiny_models) for case in CASES]
    sglang = preflight.check_many([launch_argv(f) for f in flags])
    static = [check_static(f, SGLANG_VERSION) for f in flags]
    return {case[0]: (case, s, p) for case, s, p in zip(CASES, static, sglang)}


DSPARK = {"speculative_algorithm": "DSPARK", "attention_backend": "triton"}
# DSPARK's hook imports `openai` before it validates; the CPU env may lack it. (rule, flags)
DSPARK_CASES = [
    ("dspark_block_size_positive", {**DSPARK, "speculative_dspark_block_size": 0}),
    ("dspark_draft_is_gamma_plus_one", {**DSPARK, "speculative_dspark_block_size": 4, "speculative_num_draft_tokens": 4}),
]


def test_the_table_is_large_and_covers_every_outcome():
    assert len(CASES) >= 20
    assert {c[3] for c in CASES} == {"ok", "rejected", "hardware"}
    rejecting = {r.id for r in rules_for(SGLANG_VERSION) if r.effect == "reject"}
    covered = {c[2] for c in CASES} | {rule for rule, _ in DSPARK_CASES}
    assert rejecting <= covered, rejecting - covered


def test_dspark_block_rules_match_sglangs_resolver_where_it_can_run(preflight, tiny_models):
    """SGLang 0.5.23 rejects these with the rule's message, or (no `openai` in this env)
    fails importing it first: then only the static verdict and the source text are checked."""
    flags = [with_models(f, tiny_models) for _, f in DSPARK_CASES]
    answers = preflight.check_many([launch_argv(f) for f in flags])
    rules = {r.id: r for r in rules_for(SGLANG_VERSION)}
    for (rule_id, _), full, sglang in zip(DSPARK_CASES, flags, answers, strict=True):
        static = check_static(full, SGLANG_VERSION)
        assert (static.status, static.rule) == ("rejected", rule_id), static.reason
        assert sglang.status == "rejected", sglang.reason
        assert sglang.reason in (rules[rule_id].sglang_message(static.resolved), "No module named 'openai'")


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_static_verdict_matches_sglangs_resolver(name, verdicts):
    (_, flags, static_expect, sglang_expect), static, sglang = verdicts[name]
    rules = {r.id: r for r in rules_for(SGLANG_VERSION)}
    if static_expect == "ok":
        assert static.ok, static.reason
    else:
        assert (static.status, static.rule) == ("rejected", static_expect), static.reason

    if sglang_expect == "ok":
        assert sglang.ok, sglang.reason
        for key in SPEC_KEYS:  # what autospec resolved, SGLang resolved the same way
            if static.resolved.get(key) is not None:
                assert sglang.resolved[key] == static.resolved[key], key
        if "attention_backend" in flags:
            assert sglang.resolved["attention_backend"] == flags["attention_backend"]
    elif sglang_expect == "rejected":
        assert sglang.status == "rejected" and not sglang.hardware_dependent, sglang.reason
        rule = rules[static.rule]
        message = rule.sglang_message(static.resolved)
        if message:
            assert sglang.reason == message
        else:  # a bare assert: SGLang says nothing, the probe names the place
            assert sglang.reason.startswith(f"{rule.error_type} at "), sglang.reason
    else:  # hardware: SGLang refuses it on this host for want of the right GPU
        assert sglang.status == "rejected" and sglang.hardware_dependent, sglang.reason
        note = rules["trtllm_mha_needs_gpu"].sglang_message(flags)
        assert sglang.reason.endswith(note)
        assert static.hardware_dependent


def test_draft_bound_is_a_rule_sglangs_arguments_do_not_check(verdicts):
    _, static, sglang = verdicts["tree_too_many_drafts"]
    assert sglang.ok and static.rule == "draft_tokens_exceed_tree"


def test_answers_do_not_depend_on_what_the_batch_resolved_before(preflight, tiny_models, verdicts):
    from autospec.feasibility import Preflight

    names = ("eagle_pipeline_prefill_node", "ngram_triton_paged", "mtp_chain_rewritten")
    fresh = Preflight(preflight.python, timeout_s=preflight.timeout_s)
    # A different batch, in another order: each answer must not depend on what ran before it.
    again = fresh.check_many([launch_argv(with_models(verdicts[n][0][1], tiny_models)) for n in names])
    assert again == [verdicts[n][2] for n in names]


# --- 2. argv conformance with SGLang's own parser ------------------------------------------

PARSE_SCRIPT = r"""
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
def refuse(message):
    raise ValueError(message)
parser.error = refuse
failures = []
for line in sys.stdin:
    argv = json.loads(line)
    try:
        parser.parse_args(argv)
    except (ValueError, SystemExit) as exc:
        failures.append([argv, str(exc)])
print("PARSE_RESULT " + json.dumps(failures))
"""

# sglang 0.5.23 knows only --cuda-graph-max-bs-decode (0.5.16 had --cuda-graph-max-bs as an
# alias; 0.5.20 dropped it, and argparse then calls the old name ambiguous).
FIXED_FLAGS = {"attention_backend": "triton", "page_size": 16, "tp_size": 4, "cuda_graph_max_bs_decode": 32}


def bundled_space_flags(models: dict[str, str], per_space: int = 40) -> list[dict[str, Any]]:
    """Configurations the bundled search spaces generate (an even sample of each grid)."""
    from autospec.cli.common import bundled_spaces, load_space
    from autospec.space import grid

    out = []
    for name in sorted(bundled_spaces()):
        space = load_space(name)
        points = list(grid(space))
        for point in points[:: max(1, len(points) // per_space)]:
            out.append(with_models({**space.server.flags, **point}, models))
    return out


def search_space_flags(models: dict[str, str]) -> list[dict[str, Any]]:
    """Default search-space values: steps 1..8, topk {1,2,4,8}, both ends of the draft range,
    mem_fraction_static 0.6..0.95, with the fixed flags of the shipped search spaces."""
    out = []
    for steps in range(1, 9):
        for topk in (1, 2, 4, 8):
            for draft in sorted({steps + 1, steps * topk + 1}):
                for mem in (0.6, 0.75, 0.95):
                    out.append(with_models(eagle(steps, topk, draft, mem_fraction_static=mem, **FIXED_FLAGS), models))
    return out


def test_every_generated_argv_parses_with_sglangs_parser(sglang_python, tiny_models):
    flag_sets = (
        search_space_flags(tiny_models) + bundled_space_flags(tiny_models) + [with_models(c[1], tiny_models) for c in CASES]
    )
    argvs = [launch_argv(flags) for flags in flag_sets]
    proc = subprocess.run(
        [sglang_python, "-c", PARSE_SCRIPT],
        input="".join(json.dumps(a) + "\n" for a in argvs),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PARSE_RESULT ")]
    assert lines, proc.stderr[-2000:]
    failures = json.loads(lines[-1][len("PARSE_RESULT ") :])
    problems = sorted({message for _, message in failures})
    assert not failures, f"{len(failures)} of {len(argvs)} argvs refused by sglang {SGLANG_VERSION}: {problems}"


# --- 3. strings autospec relies on still occur in the installed sglang ---------------------

# Literal pieces of the startup-fact regexes in autospec/launcher/startup.py that sglang
# 0.5.23 prints (its 0.5.10-and-earlier "Capture cuda graph end. Time elapsed:" is not here).
# 'available_gpu_mem' is written as a conditional expression before '=' in the scheduler.
STARTUP_FRAGMENTS = (
    "max_total_num_tokens=",
    "chunked_prefill_size=",
    "max_prefill_tokens=",
    "max_running_requests=",
    "context_len=",
    "available_gpu_mem",
    "KV Cache is allocated",
    "#tokens: ",
    "CUDA graph end. elapsed=",
    "Load weight end. elapsed=",
    "The server is fired up and ready to roll!",
)


def test_classifier_patterns_occur_in_sglang_source(sglang_source):
    from autospec.launcher.classify import FAILURE_PATTERNS, RUNTIME_EVENT_PATTERNS

    claimed = [p for p in (*FAILURE_PATTERNS, *RUNTIME_EVENT_PATTERNS) if p.in_sglang_source and SGLANG_VERSION in p.checked]
    assert claimed, "no classifier pattern claims to be sglang's own text"
    missing = [p.needle for p in claimed if p.needle not in sglang_source]
    assert not missing, f"sglang {SGLANG_VERSION} no longer contains: {missing}"


def test_startup_fact_fragments_occur_in_sglang_source(sglang_source):
    from autospec.launcher import startup

    patterns = getattr(startup, "STARTUP_PATTERNS", None)  # a public table, once the launcher has one
    fragments = (
        STARTUP_FRAGMENTS
        if patterns is None
        else tuple(p.needle for p in patterns if p.in_sglang_source and SGLANG_VERSION in p.checked)
    )
    missing = [f for f in fragments if f not in sglang_source]
    assert not missing, f"sglang {SGLANG_VERSION} no longer contains: {missing}"


def test_rule_messages_occur_in_sglang_source(sglang_source):
    pieces = []
    for rule in rules_for(SGLANG_VERSION):
        if rule.origin == "sglang" and rule.message:
            pieces += [(rule.id, p) for p in re.split(r"\{[^}]*\}", rule.message) if len(p) >= 4]
    assert len(pieces) >= 10
    missing = [(rule_id, p) for rule_id, p in pieces if p not in sglang_source]
    assert not missing, f"sglang {SGLANG_VERSION} no longer contains: {missing}"
