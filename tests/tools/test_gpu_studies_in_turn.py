"""tools/gpu/studies_in_turn.sh: several GPU studies in turn inside one device command, each from
its state and with the time still left. Run against a stand-in for run_study.sh beside it that
records what it was given and writes the files run_study.sh writes."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

from .gpu_scripts import GPU_TOOLS

FAKE_RUN_STUDY = """#!/bin/bash
# records its arguments and environment, writes what run_study.sh writes into OUT_DIR ($3)
echo "$STUDY|$TRIALS|$SEED|$EXTRA_ARGS|${SPACE:-}|$DEADLINE|$LAUNCH_S|$MIN_LAUNCH_S|$2|$WARM_UP_MARK" >>"$CALLS"
mkdir -p "$3"; echo "$STUDY state" >"$3/study-state.tar.xz"; echo gpu >"$3/nvml.csv"
echo "${CONSOLE:-}" >"$3/console.log"
"""
LAUNCHED = "[3/35] trial 2 steps=6 topk=1 draft=7 | ok out@c1 702.1 agg@c32 9363.9 (87s)"  # as autospec prints it


def _setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tools = tmp_path / "gpu"
    tools.mkdir()
    shutil.copy(GPU_TOOLS / "studies_in_turn.sh", tools)
    (tools / "run_study.sh").write_text(FAKE_RUN_STUDY)
    (tmp_path / "models").mkdir()
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(tmp_path / "calls"), "MODELS": str(tmp_path / "models")}
    return tools, env


def _spec(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _run(tools: Path, env: dict[str, str], out: Path, *specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(tools / "studies_in_turn.sh"), "archive", str(out), *specs],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _calls(env: dict[str, str]) -> list[list[str]]:
    calls = Path(env["CALLS"])
    return [line.split("|") for line in calls.read_text().splitlines()] if calls.exists() else []


def test_each_study_runs_in_turn_from_its_state_with_the_time_left(tmp_path):
    tools, env = _setup(tmp_path)
    grid = _spec(tmp_path, "grid.env", 'STUDY=grid TRIALS=35 SEED=38 STATE=st/g EXTRA_ARGS="--sampler random --confirm 0"\n')
    sampled = _spec(tmp_path, "sampled.env", "STUDY=sampled TRIALS=40 STATE=st/s SPACE=sampled.toml\n")
    result = _run(tools, {**env, "TOTAL": "900", "LAUNCH_S": "100", "FIRST_LAUNCH_S": "250"}, tmp_path / "out", grid, sampled)
    assert result.returncode == 0, result.stderr
    (g, s) = _calls(env)
    assert g[:5] == ["grid", "35", "38", "--sampler random --confirm 0", ""] and g[8] == "st/g"
    assert s[:5] == ["sampled", "40", "3", "", "sampled.toml"] and s[8] == "st/s"
    # no launch has run on the machine yet: the first may take FIRST_LAUNCH_S, and autospec 30 s to start
    assert g[6:8] == ["100", "280"] and s[6:8] == ["100", "280"]  # the grid's study launched nothing
    assert 0 <= int(g[5]) - int(s[5]) <= 5 and int(g[5]) <= 900  # each gets what is left of TOTAL
    for study in ("grid", "sampled"):
        assert sorted(f.name for f in (tmp_path / "out" / study).iterdir()) == ["logs.tar", "study-state.tar.xz"]
        assert (tmp_path / "out" / study / "study-state.tar.xz").read_text() == f"{study} state\n"
        with tarfile.open(tmp_path / "out" / study / "logs.tar") as tar:
            assert {Path(n).name for n in tar.getnames()} >= {"console.log", "nvml.csv"}


def test_once_a_launch_finished_on_the_machine_the_next_study_is_given_a_warm_launch(tmp_path):
    tools, env = _setup(tmp_path)
    grid = _spec(tmp_path, "grid.env", "STUDY=grid TRIALS=35 STATE=st/g\n")
    sampled = _spec(tmp_path, "sampled.env", "STUDY=sampled TRIALS=40 STATE=st/s\n")
    assert _run(tools, {**env, "LAUNCH_S": "100", "CONSOLE": LAUNCHED}, tmp_path / "out", grid, sampled).returncode == 0
    assert [c[7] for c in _calls(env)] == ["330", "130"]
    # where no trial fits on a fresh machine, run_study.sh may warm it up and mark it; once warm, it is not asked to
    assert [c[9] for c in _calls(env)] == [str(tmp_path / "models" / ".launched"), ""]
    assert (tmp_path / "models" / ".launched").exists()  # a later command on the warm machine knows it too


def test_no_study_starts_without_time_for_one_launch(tmp_path):
    tools, env = _setup(tmp_path)
    spec = _spec(tmp_path, "grid.env", "STUDY=grid TRIALS=35 STATE=st/g\n")
    result = _run(tools, {**env, "TOTAL": "300", "FIRST_LAUNCH_S": "300"}, tmp_path / "out", spec)
    assert result.returncode == 0 and _calls(env) == []
    assert "grid: " in result.stdout and "under one launch (300s); not started" in result.stdout


def test_a_bad_study_file_is_one_line_and_runs_nothing(tmp_path):
    tools, env = _setup(tmp_path)
    good = _spec(tmp_path, "grid.env", "STUDY=grid TRIALS=35 STATE=st/g\n")
    missing = _run(tools, env, tmp_path / "out", good, str(tmp_path / "none.env"))
    assert missing.returncode == 2 and _calls(env) == []
    expected = f"studies_in_turn: no study file {tmp_path / 'none.env'}; write one with STUDY=, TRIALS=, STATE="
    assert missing.stderr.strip() == expected
    incomplete = _run(tools, env, tmp_path / "out", _spec(tmp_path, "x.env", "STUDY=x TRIALS=3\n"))
    assert incomplete.returncode == 2 and "sets no STUDY, TRIALS or STATE" in incomplete.stderr and _calls(env) == []
