"""End to end through a real study: `autospec optimize --sim` (simulator subprocesses, the
benchmark client, Optuna storage) and then pareto, export, report and import on what it
stored."""

from __future__ import annotations

import json
import os
import shlex
import signal

import optuna
import pytest
import yaml

from autospec.cli.main import main
from simspace import processes_mentioning, sim_space_text

pytestmark = pytest.mark.slow

SPACE = sim_space_text(baseline=True)

SIM = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture(scope="module")
def sim_study(tmp_path_factory):
    """A 4-trial simulator study (baseline first); fails if a simulator outlives it."""
    folder = tmp_path_factory.mktemp("simstudy")
    space = folder / "space.toml"
    space.write_text(SPACE)
    studies = folder / "studies"
    args = ["--study", "e2e", "--studies-dir", str(studies)]
    try:
        assert main(["optimize", "--space", str(space), *args, "--trials", "4", "--seed", "5", "--baseline", *SIM]) == 0
    finally:
        left = processes_mentioning(str(folder))
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert not left, f"simulator processes left running: {left}"
    return args, studies


def test_pareto_export_and_report_on_a_real_study(sim_study, tmp_path, capsys):
    args, studies = sim_study
    study = optuna.load_study(study_name="e2e", storage=f"sqlite:///{studies / 'e2e.db'}")
    capsys.readouterr()
    assert main(["pareto", *args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"] == 0 and doc["front"]
    front_numbers = [row["number"] for row in doc["front"]]
    first = doc["table"][0]
    assert first["objectives"]["output_tok_s@c1"]["half_width"] > 0  # bootstrap interval from real requests
    assert first["max_running_requests"] > 0 and first["accept_length"]["value"] > 1
    assert {w["kind"] for row in doc["table"] for w in row["warnings"]} >= {"few-samples"}  # 2 requests per level

    # cmd: the recorded flags of the knee, with SGLang's entry point instead of the simulator's
    knee = doc["recommendations"]["knee"]["number"]
    assert knee in front_numbers
    assert main(["export", *args, "--pick", "knee", "--format", "cmd", "--port", "31000"]) == 0
    text = capsys.readouterr().out
    argv = shlex.split("".join(line for line in text.splitlines(True) if not line.startswith("#")).replace("\\\n", " "))
    recorded = study.trials[knee].user_attrs["server_args"]
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    assert not any(w.startswith("--sim") for w in argv)
    for flag in ("--model-path", "--speculative-num-steps", "--mem-fraction-static", "--page-size"):
        assert argv[argv.index(flag) + 1] == recorded[recorded.index(flag) + 1]
    assert argv[-4:] == ["--host", "127.0.0.1", "--port", "31000"]

    out = tmp_path / "deploy.yaml"
    assert main(["export", *args, "--pick", "throughput", "--format", "yaml", "-o", str(out)]) == 0
    doc_yaml = yaml.safe_load(out.read_text())
    assert doc_yaml["speculative-algorithm"] == "NEXTN" and doc_yaml["port"] == 30000
    assert main(["export", *args, "--pick", "latency", "--format", "systemd"]) == 0
    assert "ExecStart=/usr/bin/env python3 -m sglang.launch_server" in capsys.readouterr().out
    assert main(["export", *args, "--format", "adaptive"]) == 0
    ladder = json.loads(capsys.readouterr().out)
    assert set(k for k in ladder if k.isdigit()) == {"1", "4"}

    report = tmp_path / "report"
    assert main(["report", *args, "-o", str(report)]) == 0
    assert (report / "pareto.png").stat().st_size > 10_000 and (report / "concurrency.png").stat().st_size > 10_000
    assert "## Recommendations" in (report / "report.md").read_text()


def test_import_of_another_study_keeps_values_and_feasibility(sim_study, tmp_path, capsys):
    _args, studies = sim_study
    space = studies.parent / "space.toml"
    target = ["--study", "seeded", "--studies-dir", str(tmp_path / "studies"), "--space", str(space)]
    assert main(["import", *target, "--from-study", "e2e", "--from-storage", f"sqlite:///{studies / 'e2e.db'}"]) == 0
    assert "imported" in capsys.readouterr().out
    seeded = optuna.load_study(study_name="seeded", storage=f"sqlite:///{tmp_path / 'studies' / 'seeded.db'}")
    source = optuna.load_study(study_name="e2e", storage=f"sqlite:///{studies / 'e2e.db'}")
    complete = [t for t in source.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(seeded.trials) == len(complete)
    assert all(t.user_attrs["imported"]["source"] == "study e2e" and t.user_attrs["launched"] is False for t in seeded.trials)
    assert [t.constraints.get("feasible") for t in seeded.trials] == [t.constraints.get("feasible") for t in complete]
    assert main(["pareto", "--study", "seeded", "--studies-dir", str(tmp_path / "studies")]) == 0
    assert "I (imported)" in capsys.readouterr().out
