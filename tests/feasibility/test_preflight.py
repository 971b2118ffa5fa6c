"""Preflight against a stand-in sglang package: subprocess protocol, verdicts, caches, failures."""

from __future__ import annotations

import sys

import pytest

from autospec.errors import RuntimeFailure
from autospec.feasibility import Preflight, PreflightError
from autospec.feasibility.preflight import RESOLVED_KEYS, _drop_host_port

from .fake_sglang import python_with, write_fake_sglang

EAGLE = [
    "--model-path",
    "m",
    "--speculative-algorithm",
    "EAGLE",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "7",
]


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory):
    return write_fake_sglang(tmp_path_factory.mktemp("fake-sglang"))


@pytest.fixture
def preflight(fake_root):
    return Preflight(python_with(fake_root), timeout_s=30)


def count_runs(preflight: Preflight, monkeypatch) -> list[list[str]]:
    """Record the probe modes each subprocess is started with."""
    calls: list[list[str]] = []
    real = preflight._run

    def spy(args, **kw):
        calls.append(list(args))
        return real(args, **kw)

    monkeypatch.setattr(preflight, "_run", spy)
    return calls


def algo(name: str, *extra: str) -> list[str]:
    return ["--model-path", "m", "--speculative-algorithm", name, *extra]


def test_available_reports_the_version_from_package_metadata(preflight):
    assert preflight.available() == (True, "")
    assert preflight.sglang_version() == "0.5.99"
    assert preflight.accelerator() == "none"


def test_version_falls_back_to_the_module_attribute_without_metadata(tmp_path):
    root = write_fake_sglang(tmp_path, flavour="0.5.16", version=None)
    assert Preflight(python_with(root)).sglang_version() == "0.5.16"


def test_not_importable_is_reported_once_and_check_refuses(monkeypatch):
    pre = Preflight((sys.executable,))  # autospec's own venv has no sglang
    calls = count_runs(pre, monkeypatch)
    ok, reason = pre.available()
    assert not ok and "sglang is not importable" in reason and "\n" not in reason
    assert pre.available() == (ok, reason) and len(calls) == 1
    assert pre.sglang_version() is None
    with pytest.raises(PreflightError, match="not available"):
        pre.check(EAGLE)


def test_missing_interpreter_is_not_available(tmp_path):
    ok, reason = Preflight((str(tmp_path / "no-python"),)).available()
    assert not ok and "was not found" in reason


def test_ok_verdict_carries_sglang_rewrites_and_the_assumed_device(preflight):
    verdict = preflight.check(EAGLE)
    assert verdict.ok and verdict.source == "preflight"
    assert verdict.resolved["speculative_num_draft_tokens"] == 4  # topk == 1 -> steps + 1
    assert verdict.resolved["page_size"] == 1
    # No GPU here: the probe appended --device cuda, so the default backend is the GPU host's call.
    assert verdict.hardware_dependent and "--device cuda assumed" in verdict.reason


def test_explicit_backend_makes_an_ok_verdict_hardware_independent(preflight):
    verdict = preflight.check(EAGLE + ["--attention-backend", "triton"])
    assert verdict.ok and not verdict.hardware_dependent and verdict.reason == ""


def test_resolved_holds_the_spec_keys_and_the_named_flags_only(preflight):
    resolved = preflight.check(EAGLE + ["--tp-size", "2"]).resolved
    assert resolved["tp_size"] == 2 and resolved["model_path"] == "m"
    assert "random_seed" not in resolved  # resolved by SGLang, but neither named nor a spec key
    assert set(resolved) <= set(RESOLVED_KEYS) | {"model_path", "tp_size", "device"}


def test_rejection_reason_is_sglangs_own_message(preflight):
    verdict = preflight.check(algo("BAD"))
    assert verdict.status == "rejected" and verdict.reason == "bad algorithm"
    assert verdict.rule == "sglang_resolver" and not verdict.hardware_dependent


def test_parser_rejection_names_the_argument(preflight):
    verdict = preflight.check(EAGLE + ["--no-such-flag", "1"])
    assert verdict.status == "rejected" and verdict.rule == "sglang_cli_parser"
    assert verdict.reason == "unrecognized arguments: --no-such-flag 1"


def test_check_server_args_runs_after_resolution(preflight):
    verdict = preflight.check(EAGLE + ["--pp-size", "2"])
    assert verdict.status == "rejected" and verdict.rule == "sglang_check_server_args"
    assert verdict.reason == "pp and speculation do not mix"


def test_hardware_message_is_flagged(preflight):
    verdict = preflight.check(algo("HOPPER"))
    assert verdict.status == "rejected" and verdict.hardware_dependent
    assert verdict.reason.startswith("hardware-dependent (resolved on a host without a GPU")
    assert verdict.reason.endswith("This backend requires Hopper (SM90) GPUs.")


def test_old_flavour_resolves_at_construction_and_dumps_with_asdict(tmp_path):
    pre = Preflight(python_with(write_fake_sglang(tmp_path, flavour="0.5.16")))
    verdict = pre.check(EAGLE)
    assert verdict.ok and verdict.resolved["speculative_num_draft_tokens"] == 4
    assert pre.check(EAGLE + ["--pp-size", "2"]).rule == "sglang_check_server_args"


def test_many_argvs_share_one_subprocess_and_stay_in_order(preflight, monkeypatch):
    calls = count_runs(preflight, monkeypatch)
    preflight.available()
    verdicts = preflight.check_many([algo("BAD"), EAGLE, algo("NOISE"), EAGLE])
    assert [v.status for v in verdicts] == ["rejected", "ok", "ok", "ok"]
    assert [c[0] for c in calls] == ["version", "batch"]


def test_warm_learns_availability_and_resolves_a_batch_in_one_interpreter(preflight, monkeypatch):
    calls = count_runs(preflight, monkeypatch)
    assert preflight.warm([EAGLE, algo("BAD")]) == (True, "")
    assert preflight.sglang_version() is not None
    verdicts = preflight.check_many([algo("BAD"), EAGLE + ["--port", "30001"]])  # answered from the warm batch
    assert [v.status for v in verdicts] == ["rejected", "ok"]
    assert [c[0] for c in calls] == ["version-batch"]


def test_warm_reports_a_missing_sglang_without_answers(monkeypatch, tmp_path):
    missing = Preflight((str(tmp_path / "no-python"),), timeout_s=5)
    ok, why = missing.warm([EAGLE])
    assert not ok and "was not found" in why


def test_each_argv_sees_a_clean_environment(preflight):
    verdicts = preflight.check_many([algo("LEAK"), algo("LEAK", "--tp-size", "2")])
    assert all(v.ok for v in verdicts), [v.reason for v in verdicts]


def test_answers_are_cached_in_memory_ignoring_host_and_port(preflight, monkeypatch):
    first = preflight.check(EAGLE)
    calls = count_runs(preflight, monkeypatch)
    again = preflight.check(EAGLE + ["--host", "127.0.0.1", "--port=31000"])
    assert again == first and calls == []


def test_file_cache_survives_a_new_preflight(fake_root, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = Preflight(python_with(fake_root), cache_dir=cache).check(EAGLE)
    assert len(list(cache.glob("preflight-*.json"))) == 1
    fresh = Preflight(python_with(fake_root), cache_dir=cache)
    calls = count_runs(fresh, monkeypatch)
    assert fresh.check(EAGLE) == first
    assert [c[0] for c in calls] == ["version"]


def test_crash_in_a_batch_keeps_earlier_answers_and_raises(preflight):
    with pytest.raises(PreflightError, match="died"):
        preflight.check_many([EAGLE, algo("CRASH"), algo("BAD")])
    assert preflight._cached(preflight._key(EAGLE)) is not None


def test_a_hanging_resolver_times_out(fake_root):
    pre = Preflight(python_with(fake_root), timeout_s=30, per_argv_s=0)
    pre.available()  # with time to spare, so only the hanging resolution meets the limit
    pre.timeout_s = 3
    with pytest.raises(PreflightError, match="did not answer within 3 s") as info:
        pre.check(algo("SLEEP"))
    assert isinstance(info.value, RuntimeFailure)


def test_host_and_port_words_are_dropped():
    argv = ["--host", "127.0.0.1", "--tp-size", "2", "--port", "3000", "--host=x", "--port=1"]
    assert _drop_host_port(argv) == ["--tp-size", "2"]
