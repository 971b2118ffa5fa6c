"""``python -m autospec.sim.resolve``: the simulator's resolver as a preflight oracle, and its
version query (no model path needed)."""

from __future__ import annotations

import json

from autospec.sim import resolve


def answer(capsys, *argv: str) -> tuple[int, dict]:
    code = resolve.main(list(argv))
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_version_query_needs_no_model_path_and_names_the_profiles_release(capsys):
    assert answer(capsys, "--sim-print-version") == (0, {"sglang_version": "0.5.10", "profile": "seed-qwen35-122b-4x-rtxpro6000"})
    code, out = answer(
        capsys,
        "--sim-noise",
        "off",
        "--sim-gpu-state-dir",
        "/tmp/x",
        "--sim-print-version",
        "--sim-profile",
        "deepseek-v3-mtp-8x-h200",
        "--tp-size",
        "8",
    )
    assert code == 0 and out["sglang_version"] == "0.5.23"


def test_version_query_with_an_unknown_profile_fails_in_one_line(capsys):
    assert resolve.main(["--sim-print-version", "--sim-profile", "no-such-profile"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autospec.sim: error: ") and err.count("\n") == 1


def test_resolving_still_answers_with_the_version(capsys):
    code, out = answer(
        capsys,
        "--sim-profile",
        "llama31-8b-eagle3-1x-h100",
        "--model-path",
        "m",
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "7",
    )
    assert code == 0 and out["ok"] and out["sglang_version"] == "0.5.16"
    assert out["resolved"]["speculative_num_draft_tokens"] == 7  # between steps*topk+1 and SGLang's 1+2+4


def _resolved(capsys, *flags: str) -> dict:
    code, out = answer(capsys, "--model-path", "m", "--tp-size", "4", *flags)
    assert code == 0
    return out


def test_speculative_adaptive_resolves_as_sglang_0_5_23_does(capsys):
    # EAGLE family, top-k unset: the middle of the default config's candidate steps (0, 1, 3, 5, 7), a chain
    out = _resolved(capsys, "--speculative-algorithm", "NEXTN", "--speculative-adaptive")
    assert out["ok"]
    assert [out["resolved"][k] for k in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")] == [
        3,
        1,
        4,
    ]
    out = _resolved(capsys, "--speculative-algorithm", "EAGLE", "--speculative-adaptive", "--speculative-num-steps", "5")
    assert out["resolved"]["speculative_num_steps"] == 5 and out["resolved"]["speculative_num_draft_tokens"] == 6
    # steps outside the candidates: SGLang's ValueError
    out = _resolved(capsys, "--speculative-algorithm", "EAGLE", "--speculative-adaptive", "--speculative-num-steps", "2")
    assert not out["ok"]
    assert out["error"] == (
        "--speculative-num-steps=2 is not in the adaptive config candidate_steps [0, 1, 3, 5, 7]. Pass one of those values."
    )


def test_speculative_adaptive_where_sglang_does_not_run_it_falls_back_to_static_parameters():
    from autospec.sim.arguments import resolve_args
    from autospec.sim.profile import default_profile_path, load_profile

    profile = load_profile(default_profile_path())
    flags = {"model_path": "m", "speculative_algorithm": "STANDALONE", "speculative_draft_model_path": "d"}
    static = resolve_args(profile, flags)
    adaptive = resolve_args(profile, {**flags, "speculative_adaptive": True})
    assert adaptive.speculative_num_steps == static.speculative_num_steps == 3
    assert any(n.startswith("speculative_adaptive disabled: speculative_algorithm=STANDALONE") for n in adaptive.notes)


def test_what_sglang_0_5_23_serves_but_the_simulator_does_not_model_is_refused_in_one_line(capsys):
    for flags, what in (
        (("--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"), "--speculative-algorithm DFLASH"),
        (("--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "4"), "--speculative-algorithm DSPARK"),
        (  # the default profile is sglang 0.5.10's: the draft KV dtype is modelled from 0.5.23
            ("--speculative-algorithm", "NEXTN", "--speculative-draft-kv-cache-dtype", "fp8_e4m3"),
            "--speculative-draft-kv-cache-dtype fp8_e4m3 with a profile of sglang 0.5.10",
        ),
    ):
        out = _resolved(capsys, *flags)
        assert not out["ok"]
        assert out["error"].startswith(f"the simulator does not model {what} (sglang 0.5.23 ")
        assert "--server-command" in out["error"] and "\n" not in out["error"]
    # the target's dtype for the draft is what the simulator serves anyway
    assert _resolved(capsys, "--speculative-algorithm", "NEXTN", "--speculative-draft-kv-cache-dtype", "auto")["ok"]
