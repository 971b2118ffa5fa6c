from __future__ import annotations

from pathlib import Path

import pytest

from autospec.errors import UsageError
from autospec.launcher import LaunchRequest, build_argv, default_command, flag_words
from autospec.launcher.request import Redactor, child_environment, is_secret_name


def request(**overrides) -> LaunchRequest:
    values = dict(command=("python", "-m", "sglang.launch_server"), flags={}, log_path=Path("s.log"))
    values.update(overrides)
    return LaunchRequest(**values)


def test_flags_become_kebab_case_options_then_host_and_port():
    req = request(
        flags={
            "model_path": "/m",
            "speculative_num_steps": 3,
            "mem_fraction_static": 0.85,
            "enable_dp_attention": True,
            "disable_cuda_graph": False,
            "speculative_draft_model_path": None,
            "cuda_graph_bs": [1, 2, 4],
            "json_model_override_args": {"b": 1, "a": "x"},
        }
    )
    assert build_argv(req, 30001) == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/m",
        "--speculative-num-steps",
        "3",
        "--mem-fraction-static",
        "0.85",
        "--enable-dp-attention",
        "--cuda-graph-bs",
        "1",
        "2",
        "4",
        "--json-model-override-args",
        '{"a": "x", "b": 1}',
        "--host",
        "127.0.0.1",
        "--port",
        "30001",
    ]


def test_argv_placeholder_splices_flags_into_a_wrapper():
    req = request(command=("srun", "--gpus=4", "python", "-m", "sglang.launch_server", "{argv}", "--extra"), flags={"tp_size": 4})
    assert build_argv(req, 5) == [
        "srun",
        "--gpus=4",
        "python",
        "-m",
        "sglang.launch_server",
        "--tp-size",
        "4",
        "--host",
        "127.0.0.1",
        "--port",
        "5",
        "--extra",
    ]


FLAG_SETS = [
    {},
    {"model_path": "/m", "tp_size": 4},
    {
        "speculative_algorithm": "EAGLE",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "mem_fraction_static": 0.85,
    },
    {
        "enable_dp_attention": True,
        "disable_cuda_graph": False,
        "speculative_draft_model_path": None,
        "cuda_graph_bs": [1, 2, 4],
        "json_model_override_args": {"b": 1, "a": "x"},
        "empty_list": [],
    },
]


@pytest.mark.parametrize("flags", FLAG_SETS)
@pytest.mark.parametrize("command", [("python", "-m", "sglang.launch_server"), ("wrap", "{argv}", "--after")])
def test_flag_words_are_the_argv_without_command_host_and_port(flags, command):
    argv = build_argv(request(command=command, flags=flags, host="10.0.0.2"), 4321)
    words = flag_words(flags)
    if command[-1] == "--after":
        assert argv == ["wrap", *words, "--host", "10.0.0.2", "--port", "4321", "--after"]
    else:
        assert argv == [*command, *words, "--host", "10.0.0.2", "--port", "4321"]
    assert all(isinstance(word, str) for word in words)


def test_flag_words_keep_the_flags_order_and_drop_false_and_none():
    assert flag_words({"b_flag": True, "a_flag": 2, "off": False, "unset": None}) == ["--b-flag", "--a-flag", "2"]


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"port": 1}, "set by the launcher"),
        ({"model_path": "m", "host": "h"}, "set by the launcher"),
        ({"Model-Path": "/m"}, "snake_case"),
    ],
)
def test_flag_words_refuse_what_build_argv_refuses(flags, message):
    with pytest.raises(UsageError, match=message):
        flag_words(flags)


@pytest.mark.parametrize(
    "flags, message",
    [
        ({"port": 1}, "set by the launcher"),
        ({"host": "0.0.0.0"}, "set by the launcher"),
        ({"Model-Path": "/m"}, "snake_case"),
        ({"cuda_graph_bs": [[1]]}, "unsupported value"),
    ],
)
def test_bad_flags_are_usage_errors(flags, message):
    with pytest.raises(UsageError, match=message):
        build_argv(request(flags=flags), 1)


@pytest.mark.parametrize(
    "overrides",
    [
        {"command": ()},
        {"port": 70000},
        {"ready_timeout_s": 0},
        {"poll_interval_s": -1},
    ],
)
def test_invalid_requests_are_rejected(overrides):
    with pytest.raises(UsageError):
        request(**overrides)


def test_default_command_runs_sglang_with_the_given_python():
    assert default_command("/venv/bin/python") == ("/venv/bin/python", "-m", "sglang.launch_server")


@pytest.mark.parametrize(
    "name, secret",
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("MY_SECRET_THING", True),
        ("db_password", True),
        ("api_key", True),
        ("CUDA_VISIBLE_DEVICES", False),
        ("PATH", False),
        ("KEYBOARD", False),
    ],
)
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_explicit_secret_names_and_redaction_of_env_and_argv():
    req = request(
        env={"CORP_CRED": "abcd1234", "CUDA_VISIBLE_DEVICES": "0,1"},
        secret_env_names=frozenset({"CORP_CRED"}),
        flags={"api_key": "sk-12345"},
    )
    env = child_environment(req, base={"HF_TOKEN": "hf_zzzzzz", "PATH": "/bin"})
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["PYTHONUNBUFFERED"] == "1"
    redactor = Redactor.for_launch(req, env)
    assert redactor.text("token hf_zzzzzz cred abcd1234 path /bin") == "token *** cred *** path /bin"
    assert redactor.argv(["x", "--api-key", "sk-12345", "--api-key=sk-12345", "--tp-size", "2"]) == [
        "x",
        "--api-key",
        "***",
        "--api-key=***",
        "--tp-size",
        "2",
    ]
    assert req.redacted_env() == {"CORP_CRED": "***", "CUDA_VISIBLE_DEVICES": "0,1"}


def test_short_values_are_not_treated_as_secrets():
    assert Redactor(["1", "ab"]).text("a 1 ab b") == "a 1 ab b"
