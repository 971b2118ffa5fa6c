"""The PreflightOracle contract: both implementations, the simulator's batch checks, and
the gate's use of an oracle."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pytest

from autospec.feasibility import Preflight, PreflightError, PreflightOracle, Verdict, check_static
from autospec.feasibility.gate import FeasibilityGate
from autospec.feasibility.sim_preflight import SimPreflight
from autospec.launcher import flag_words

SIM = (sys.executable, "-m", "autospec.sim", "--sim-noise", "off")
CHAIN = {
    "model_path": "sim",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
PAGED_TREE = {
    **CHAIN,
    "speculative_eagle_topk": 4,
    "speculative_num_draft_tokens": 8,
    "page_size": 16,
    "attention_backend": "triton",
}  # the seed profile's SGLang (0.5.10): flashinfer or fa3 only
TYPO = ["--model-path", "sim", "--speculative-num-stepz", "3"]


def test_both_preflights_are_oracles():
    assert isinstance(SimPreflight(SIM), PreflightOracle)
    assert isinstance(Preflight((sys.executable,)), PreflightOracle)


def test_sim_check_many_answers_in_order_and_resolves_each_argv_once(monkeypatch):
    pre = SimPreflight(SIM)
    resolved: list[list[str]] = []
    real = pre._resolve
    monkeypatch.setattr(pre, "_resolve", lambda argv: resolved.append(argv) or real(argv))
    ok, rejected = flag_words(CHAIN), flag_words(PAGED_TREE)
    verdicts = pre.check_many([ok, rejected, TYPO, ok])
    assert [v.status for v in verdicts] == ["ok", "rejected", "rejected", "ok"]
    assert all(v.source == "preflight" for v in verdicts)
    assert verdicts[0].resolved["speculative_num_draft_tokens"] == 4
    assert "only supported for the 'flashinfer' backend" in verdicts[1].reason
    assert "unrecognized arguments: --speculative-num-stepz" in verdicts[2].reason
    assert verdicts[3] == verdicts[0] and len(resolved) == 3
    assert pre.check(rejected) == verdicts[1] and len(resolved) == 3  # cached


def test_sim_resolver_that_cannot_run_is_a_preflight_error_not_a_verdict(tmp_path):
    with pytest.raises(PreflightError, match="could not start"):
        SimPreflight((str(tmp_path / "no-python"), "-m", "autospec.sim")).check(TYPO)
    sleeper = (sys.executable, "-c", "import time; time.sleep(30)", "autospec.sim")
    with pytest.raises(PreflightError, match=r"did not answer within 0\.5 s"):
        SimPreflight(sleeper, timeout_s=0.5).check_many([TYPO])


@pytest.mark.parametrize(
    "profile, version", [(None, "0.5.10"), ("llama31-8b-eagle3-1x-h100", "0.5.16"), ("deepseek-v3-mtp-8x-h200", "0.5.23")]
)
def test_sim_preflight_speaks_for_the_profiles_sglang_version(profile, version):
    pre = SimPreflight(SIM + (("--sim-profile", profile) if profile else ()))
    assert pre.sglang_version() == version
    assert pre.available() == (True, "")


def test_static_rules_of_the_sims_version_agree_with_its_resolver():
    # the seed profile imitates 0.5.10, which refuses paged trees on triton; 0.5.23's rules
    # (what a sim study used to apply) would let them through to a launch that fails
    pre = SimPreflight(SIM)
    assert not pre.check(flag_words(PAGED_TREE)).ok
    assert not check_static(PAGED_TREE, pre.sglang_version()).ok
    assert check_static(PAGED_TREE, "0.5.23").ok


def test_sim_preflight_with_an_unreadable_profile_is_unavailable(tmp_path):
    pre = SimPreflight(SIM + ("--sim-profile", str(tmp_path / "missing.toml")))
    ok, why = pre.available()
    assert not ok and "could not say its SGLang version" in why
    with pytest.raises(PreflightError, match=r"missing\.toml"):
        pre.sglang_version()


class RecordingOracle:
    """An oracle that rejects argvs naming page_size and records every call."""

    def __init__(self, broken: bool = False, batch_saves_time: bool = True) -> None:
        self.calls: list[tuple[str, int]] = []
        self.broken = broken
        self.batch_saves_time = batch_saves_time

    def available(self) -> tuple[bool, str]:
        return True, ""

    def sglang_version(self) -> str | None:
        return None

    def check(self, argv: Sequence[str]) -> Verdict:
        self.calls.append(("check", 1))
        return self._verdict(argv)

    def check_many(self, argvs: Sequence[Sequence[str]]) -> list[Verdict]:
        self.calls.append(("check_many", len(argvs)))
        return [self._verdict(argv) for argv in argvs]

    def _verdict(self, argv: Sequence[str]) -> Verdict:
        if self.broken:
            raise PreflightError("the resolver crashed")
        if "--page-size" in argv:
            return Verdict(status="rejected", reason="no pages here", source="preflight")
        return Verdict(status="ok", source="preflight", resolved={"speculative_num_draft_tokens": 4})


def test_gate_prefetches_the_statically_feasible_in_one_batch_and_asks_per_candidate():
    oracle = RecordingOracle()
    gate = FeasibilityGate(preflight=oracle, to_argv=flag_words)
    statically_rejected = {**CHAIN, "speculative_eagle_topk": 0, "speculative_num_steps": None}
    assert gate.prefetch([CHAIN, {**CHAIN, "page_size": 1}, statically_rejected]) == 2
    assert oracle.calls == [("check_many", 2)]
    assert gate.verdict({**CHAIN, "page_size": 1}).reason == "no pages here"
    assert gate.verdict(CHAIN).status == "ok"


def test_no_prefetch_when_a_batch_costs_as_much_as_single_checks():
    oracle = RecordingOracle(batch_saves_time=False)
    gate = FeasibilityGate(preflight=oracle, to_argv=flag_words)
    assert gate.prefetch([CHAIN, {**CHAIN, "page_size": 1}]) == 0 and oracle.calls == []
    assert gate.verdict({**CHAIN, "page_size": 1}).status == "rejected"
    assert oracle.calls == [("check", 1)]
    assert SimPreflight(SIM).batch_saves_time is False and Preflight((sys.executable,)).batch_saves_time is True


def test_a_broken_oracle_leaves_the_static_rules_in_charge():
    gate = FeasibilityGate(preflight=RecordingOracle(broken=True), to_argv=flag_words)
    assert gate.prefetch([CHAIN]) == 0
    verdict = gate.verdict({**CHAIN, "page_size": 1})
    assert verdict.status == "ok" and verdict.source == "static"


class _SkipEverything:
    """Learned rules that would skip every configuration."""

    def explain(self, resolved):
        return "headroom", "predicted to fail at init"


def test_a_confirmation_relaunch_of_a_measured_server_is_not_skipped_by_rules_learned_since():
    from autospec.feasibility.gate import FeasibilityGate

    flags = {
        "model_path": "m",
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
    }
    gate = FeasibilityGate(rules=_SkipEverything())
    assert gate.verdict(flags, reuse=False).status == "skipped"  # never measured: the rule stands
    gate.remember(7, gate.argument_verdict(flags).resolved, [100.0, 900.0], {}, {})
    assert gate.verdict(flags).status == "skipped"  # a proposal: the rule comes first
    assert gate.verdict(flags, reuse=False).ok  # a relaunch of trial 7's server: it started and was measured
