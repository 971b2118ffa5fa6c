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
