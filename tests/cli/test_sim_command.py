"""The one simulator command line (optimize --sim and bench --sim), and its profile check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autospec.cli.main import main
from autospec.cli.wiring import sim_command
from autospec.errors import UsageError
from autospec.sim.profile import default_profile_path, list_profiles

NAMED = "llama31-8b-eagle3-1x-h100"  # its profile says sglang_version = "0.5.16"


def resolve_with(command: tuple[str, ...], *flags: str) -> dict:
    """What the simulator's resolver answers when started with `command`'s own flags."""
    assert command[1:3] == ("-m", "autospec.sim")
    argv = [command[0], "-m", "autospec.sim.resolve", *command[3:], "--model-path", "sim", *flags]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_flags_are_given_only_when_set_and_in_one_order(tmp_path):
    assert sim_command() == (sys.executable, "-m", "autospec.sim")
    assert sim_command(load_seconds=2, warmup_seconds=0.5, time_scale=0.2, noise=False, state_dir=tmp_path)[3:] == (
        "--sim-load-seconds",
        "2",
        "--sim-warmup-seconds",
        "0.5",
        "--sim-time-scale",
        "0.2",
        "--sim-noise",
        "off",
        "--sim-gpu-state-dir",
        str(tmp_path),
    )


def test_a_bundled_profile_name_reaches_the_simulator():
    assert NAMED in list_profiles()
    command = sim_command(profile=NAMED)
    assert command[-2:] == ("--sim-profile", NAMED)
    assert resolve_with(command)["sglang_version"] == "0.5.16"


def test_a_profile_file_is_passed_as_an_absolute_path(tmp_path, monkeypatch):
    copy = tmp_path / "mine.toml"
    copy.write_text(default_profile_path().read_text())
    monkeypatch.chdir(tmp_path)
    command = sim_command(profile="mine.toml")
    assert command[-1] == str(copy.resolve())
    assert resolve_with(command)["ok"] is True


def test_an_unknown_profile_is_one_line_naming_the_bundled_ones():
    with pytest.raises(UsageError) as info:
        sim_command(profile="no-such-profile")
    message = str(info.value)
    assert "\n" not in message and "'no-such-profile'" in message
    assert all(name in message for name in list_profiles())


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"time_scale": 0}, "--sim-time-scale 0 must be > 0"),
        ({"load_seconds": -1}, "--sim-load-seconds -1 must be >= 0"),
        ({"warmup_seconds": -0.5}, "--sim-warmup-seconds -0.5 must be >= 0"),
    ],
)
def test_impossible_times_are_usage_errors(kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        sim_command(**kwargs)


@pytest.mark.parametrize(
    "command",
    [
        ["optimize", "--sim", "--trials", "1"],
        ["bench", "--sim", "--concurrency", "1", "--quiet"],
    ],
)
def test_both_subcommands_refuse_an_unknown_profile_before_starting_anything(tmp_path, capsys, command):
    code = main(
        [
            *command,
            "--sim-profile",
            "no-such-profile",
            *(["--studies-dir", str(tmp_path / "s")] if command[0] == "optimize" else []),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert NAMED in err and "neither a file nor a bundled profile" in err
    assert not (tmp_path / "s").exists()


def test_help_of_both_subcommands_says_names_are_accepted(capsys):
    for command in ("optimize", "bench"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "bundled profile's name" in " ".join(capsys.readouterr().out.split())


def test_bench_launches_the_simulator_with_a_profile_name(tmp_path: Path, capsys):
    out_json = tmp_path / "b.json"
    code = main(
        [
            "bench",
            "--sim",
            "--sim-profile",
            NAMED,
            "--sim-noise",
            "off",
            "--sim-load-seconds",
            "0.1",
            "--sim-time-scale",
            "0.2",
            "--concurrency",
            "1",
            "--num-requests",
            "1",
            "--output-len",
            "4",
            "--server-log",
            str(tmp_path / "server.log"),
            "--json",
            str(out_json),
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().err
    argv = json.loads(out_json.read_text())["server"]["argv"]
    assert argv[argv.index("--sim-profile") + 1] == NAMED
