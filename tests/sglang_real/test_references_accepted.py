"""The reference points' launches as sglang 0.5.23's own resolver reads them (CPU, config-only
tiny models): no speculation is no speculative algorithm; SGLang's defaults are what its
resolver fills in for a Llama target (5, 4, 8); --speculative-adaptive starts at steps 3 with
a chain (draft 4)."""

from __future__ import annotations

import pytest

from autospec.config import parse_search_space
from autospec.launcher import flag_words
from autospec.study.proposing.references import reference_candidate, reference_names

pytestmark = pytest.mark.sglang


def test_every_reference_of_an_eagle_space_passes_sglangs_resolver_with_its_own_choices(preflight, tiny_models):
    space = parse_search_space(
        {
            "server": {
                "flags": {
                    "model_path": tiny_models["target"],
                    "speculative_algorithm": "EAGLE",
                    "speculative_draft_model_path": tiny_models["eagle"],
                    "speculative_eagle_topk": 1,
                }
            },
            "params": {
                "speculative_num_steps": {"type": "int", "low": 1, "high": 6},
                "mem_fraction_static": {"type": "float", "low": 0.7, "high": 0.9, "step": 0.1},
            },
        }
    )
    names = reference_names(space)
    assert names == ["no_speculation", "sglang_defaults", "adaptive"]
    argvs = []
    for name in names:
        candidate = reference_candidate(name, space, space.server.flags)
        flags = {k: v for k, v in {**space.server.flags, **candidate}.items() if v is not None}
        argvs.append(flag_words(flags))
    no_spec, defaults, adaptive = preflight.check_many(argvs)
    for verdict in (no_spec, defaults, adaptive):
        assert verdict.ok, verdict.reason
    assert no_spec.resolved["speculative_algorithm"] is None
    shape = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    assert tuple(defaults.resolved[k] for k in shape) == (5, 4, 8)  # _auto_choose_speculative_params, LlamaForCausalLM
    assert adaptive.resolved["speculative_adaptive"] is True
    assert tuple(adaptive.resolved[k] for k in shape) == (3, 1, 4)
    assert all("--mem-fraction-static" not in argv and "--speculative-num-steps" not in argv for argv in argvs)
