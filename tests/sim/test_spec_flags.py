"""Speculative flags of sglang 0.5.23 the simulator takes as that release does:
--speculative-attention-mode (prefill | decode, default prefill; no effect the simulator models)."""

from __future__ import annotations

import pytest

from autospec.sim import load_profile, resolve_args
from autospec.sim.args import parse_command_line
from autospec.sim.server_args import build_server_args

CHAIN = [
    "--model-path",
    "m",
    "--tp-size",
    "8",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
]


def _reported(*extra: str) -> dict:
    profile = load_profile("deepseek-v3-mtp-8x-h200")  # a 0.5.23 profile
    command = parse_command_line([*CHAIN, *extra], environ={})
    return build_server_args(profile, resolve_args(profile, command.flags), command, seed=0)


def test_the_attention_mode_is_reported_as_given_and_prefill_when_unset():
    assert _reported()["speculative_attention_mode"] == "prefill"
    assert _reported("--speculative-attention-mode", "decode")["speculative_attention_mode"] == "decode"


def test_an_attention_mode_outside_sglangs_choices_exits_2_with_argparses_line(capsys):
    with pytest.raises(SystemExit) as exc:
        parse_command_line([*CHAIN, "--speculative-attention-mode", "verify"], environ={})
    assert exc.value.code == 2
    assert "argument --speculative-attention-mode: invalid choice: 'verify'" in capsys.readouterr().err
