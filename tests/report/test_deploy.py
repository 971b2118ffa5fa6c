"""Deployments: flags from a recorded argv, the simulator's command replaced, imported
trials completed from a launched one, and each format's quoting."""

from __future__ import annotations

import shlex

import pytest
import yaml

from autospec.errors import UsageError
from autospec.report import deployment_for, render_cmd, render_systemd, render_yaml
from autospec.report.data import StudyData, TrialView, parse_objective
from autospec.report.deploy import split_argv


def test_split_argv_reads_values_switches_lists_and_inline_values():
    words, flags = split_argv(
        [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--trust-remote-code",
            "--cuda-graph-bs",
            "1",
            "2",
            "4",
            "--mem-fraction-static=0.85",
            "--port",
            "30000",
            "--enable-x",
        ]
    )
    assert words == ["python", "-m", "sglang.launch_server"]
    assert flags == {
        "model_path": "m",
        "trust_remote_code": True,
        "cuda_graph_bs": [1, 2, 4],
        "mem_fraction_static": 0.85,
        "port": 30000,
        "enable_x": True,
    }


def _trial(number=1, **kw) -> TrialView:
    base = dict(
        number=number,
        state="complete",
        kind="front",
        flags={"speculative_num_steps": 4},
        values=[1.0, 2.0],
        measured=True,
        outcome="ok",
        launched=True,
    )
    return TrialView(**{**base, **kw})


def _data(*trials: TrialView) -> StudyData:
    return StudyData("s", [parse_objective("output_tok_s@c1", "maximize")], list(trials))


SIM_ARGV = [
    "/venv/bin/python3",
    "-m",
    "autospec.sim",
    "--sim-load-seconds",
    "2",
    "--sim-time-scale",
    "1",
    "--sim-gpu-state-dir",
    "/tmp/x",
    "--model-path",
    "Qwen/Q",
    "--tp-size",
    "4",
    "--speculative-num-steps",
    "4",
    "--mem-fraction-static",
    "0.9",
    "--host",
    "127.0.0.1",
    "--port",
    "41234",
]


def test_a_simulated_trial_exports_sglangs_command_without_simulator_flags():
    t = _trial(server_args=SIM_ARGV)
    d = deployment_for(_data(t), t, host="0.0.0.0", port=8000)
    assert d.command == ("python3", "-m", "sglang.launch_server")
    assert d.flags == {"model_path": "Qwen/Q", "tp_size": 4, "speculative_num_steps": 4, "mem_fraction_static": 0.9}
    assert d.all_flags()["host"] == "0.0.0.0" and d.all_flags()["port"] == 8000
    assert any("simulator" in line for line in d.summary)


def test_the_recorded_command_is_kept_unless_replaced_and_overrides_apply():
    argv = [
        "/opt/venv/bin/python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--disable-radix-cache",
        "--speculative-num-steps",
        "3",
        "--port",
        "1",
    ]
    t = _trial(server_args=argv)
    d = deployment_for(_data(t), t)
    assert d.command == ("/opt/venv/bin/python", "-m", "sglang.launch_server")
    d = deployment_for(
        _data(t),
        t,
        command=["sglang", "serve"],
        overrides={"disable_radix_cache": None, "model_path": "/models/real", "tp_size": 2},
    )
    assert d.command == ("sglang", "serve")
    assert d.flags == {"model_path": "/models/real", "speculative_num_steps": 3, "tp_size": 2}


def test_an_imported_trial_takes_fixed_flags_from_a_launched_trial():
    launched = _trial(
        1,
        server_args=[
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--tp-size",
            "4",
            "--speculative-num-steps",
            "2",
        ],
    )
    imported = _trial(2, launched=False, imported={"source": "x"}, flags={"speculative_num_steps": 5})
    d = deployment_for(_data(launched, imported), imported)
    assert d.flags == {"model_path": "m", "tp_size": 4, "speculative_num_steps": 5}
    alone = _data(imported)
    with pytest.raises(UsageError, match="--flag model_path="):
        deployment_for(alone, imported)


def test_cmd_is_one_shell_command_that_round_trips():
    t = _trial(
        server_args=[
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "/models/my model",
            "--chat-template",
            "a'b",
            "--enable-x",
        ]
    )
    text = render_cmd(deployment_for(_data(t), t, port=9000))
    body = "".join(line for line in text.splitlines(True) if not line.startswith("#")).replace("\\\n", " ")
    assert shlex.split(body) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/my model",
        "--chat-template",
        "a'b",
        "--enable-x",
        "--host",
        "127.0.0.1",
        "--port",
        "9000",
    ]


def test_yaml_keeps_types_and_quotes_what_yaml_would_misread():
    t = _trial(
        server_args=[
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3.5-122B-A10B-FP8",
            "--served-model-name",
            "true",
            "--chat-template",
            "x: y",
            "--tp-size",
            "4",
            "--mem-fraction-static",
            "0.84",
            "--enable-x",
            "--cuda-graph-bs",
            "1",
            "8",
        ]
    )
    text = render_yaml(deployment_for(_data(t), t))
    doc = yaml.safe_load(text)
    assert doc == {
        "model-path": "Qwen/Qwen3.5-122B-A10B-FP8",
        "served-model-name": "true",
        "chat-template": "x: y",
        "tp-size": 4,
        "mem-fraction-static": 0.84,
        "enable-x": True,
        "cuda-graph-bs": [1, 8],
        "host": "127.0.0.1",
        "port": 30000,
    }
    assert "# Run: python -m sglang.launch_server --config THIS_FILE.yaml" in text


def test_systemd_escapes_specifiers_variables_and_spaces():
    t = _trial(server_args=["python3", "-m", "sglang.launch_server", "--model-path", "/m/100%", "--api-key", "a$b c"])
    text = render_systemd(deployment_for(_data(t), t))
    exec_start = text[text.index("ExecStart=") : text.index("Restart=")]
    assert exec_start.startswith("ExecStart=/usr/bin/env python3 -m sglang.launch_server \\\n")
    assert '--model-path "/m/100%%"' in exec_start
    assert '--api-key "a$$b c"' in exec_start
    assert "KillMode=control-group" in text and "[Install]" in text
