"""Speculative flags sglang 0.5.23 added, against its own resolver (CPU only), autospec's
static rules and the simulator: --speculative-attention-mode and
--speculative-draft-kv-cache-dtype."""

from __future__ import annotations

import sys

import pytest

from autospec.feasibility import check_static
from autospec.feasibility.sim_preflight import SimPreflight

from .conftest import SGLANG_VERSION
from .test_sglang_conformance import eagle, launch_argv, with_models

pytestmark = pytest.mark.sglang

# a 0.5.23 profile, so the simulator answers as that release
SIM = (sys.executable, "-m", "autospec.sim", "--sim-profile", "deepseek-v3-mtp-8x-h200")
CHAIN = eagle(3, 1, 4, attention_backend="triton")


@pytest.fixture(scope="module")
def sim() -> SimPreflight:
    return SimPreflight(SIM)


def test_attention_mode_prefill_and_decode_are_accepted_and_kept(preflight, tiny_models, sim):
    """sglang 0.5.23 `Spec.speculative_attention_mode`: choices prefill | decode, default
    prefill; its resolver rewrites prefill to decode only for tokenspeed_mla, SM100 NVFP4
    KV and Kimi-K3 (hardware/models the static rules do not model): no argument-time rule."""
    cases = [with_models(CHAIN, tiny_models)] + [
        with_models({**CHAIN, "speculative_attention_mode": mode}, tiny_models) for mode in ("prefill", "decode")
    ]
    answers = preflight.check_many([launch_argv(f) for f in cases])
    # the probe reports the resolved value of the flags it was given
    assert [a.resolved.get("speculative_attention_mode") for a in answers[1:]] == ["prefill", "decode"]
    for flags, answer in zip(cases, answers, strict=True):
        assert answer.ok, answer.reason
        assert check_static(flags, SGLANG_VERSION).ok
        assert sim.check(launch_argv(flags)).ok


def test_an_attention_mode_outside_the_choices_is_refused_by_both_parsers(preflight, tiny_models, sim):
    flags = with_models({**CHAIN, "speculative_attention_mode": "verify"}, tiny_models)
    real = preflight.check(launch_argv(flags))
    simulated = sim.check(launch_argv(flags))
    assert real.status == simulated.status == "rejected"
    wording = "argument --speculative-attention-mode: invalid choice: 'verify'"
    assert wording in real.reason and wording in simulated.reason


def test_every_draft_kv_dtype_choice_is_accepted_at_argument_time(preflight, tiny_models, sim):
    """sglang 0.5.23 `Spec.speculative_draft_kv_cache_dtype`: choices auto, fp8_e5m2,
    fp8_e4m3, bf16, bfloat16; the resolver rejects none of them (fp8_e5m2 fails on a CPU
    device only when the draft's pool is made, `configure_kv_cache_dtype`), so there is no
    static rule. The simulator (a 0.5.23 profile) accepts them all too."""
    dtypes = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16")
    cases = [with_models({**CHAIN, "speculative_draft_kv_cache_dtype": d}, tiny_models) for d in dtypes]
    answers = preflight.check_many([launch_argv(f) for f in cases])
    for dtype, flags, answer in zip(dtypes, cases, answers, strict=True):
        assert answer.ok, (dtype, answer.reason)
        assert answer.resolved.get("speculative_draft_kv_cache_dtype") == dtype
        assert check_static(flags, SGLANG_VERSION).ok
        simulated = sim.check(launch_argv(flags))
        assert simulated.ok, simulated.reason
        assert simulated.resolved.get("speculative_draft_kv_cache_dtype") == dtype


def test_a_draft_kv_dtype_outside_the_choices_is_refused_by_both_parsers(preflight, tiny_models, sim):
    flags = with_models({**CHAIN, "speculative_draft_kv_cache_dtype": "fp4_e2m1"}, tiny_models)
    real, simulated = preflight.check(launch_argv(flags)), sim.check(launch_argv(flags))
    wording = "argument --speculative-draft-kv-cache-dtype: invalid choice: 'fp4_e2m1'"
    assert real.status == simulated.status == "rejected"
    assert wording in real.reason and wording in simulated.reason


def test_the_draft_pool_sizing_the_memory_model_follows_is_in_the_installed_source(sglang_source):
    """`autospec.model.draft_kv`: EAGLE's draft is charged at the target's per-token bytes x
    draft layers / target layers; DFLASH's at its own dtype, summed with the target's."""
    for fragment in (
        "self._cell_size * draft_num_layers / int(num_layers)",
        "return int(target_cell_size_per_token) + int(draft_cell_size_per_token)",
        "get_spec().speculative_draft_kv_cache_dtype",
    ):
        assert fragment in sglang_source, fragment
