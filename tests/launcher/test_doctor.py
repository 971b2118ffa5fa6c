from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from autospec.cli.doctor import hf_cache_dirs
from autospec.cli.main import main
from autospec.launcher import SimGpuProbe
from autospec.launcher.doctor import (
    check_sglang,
    foreign_gpu_holders,
    render_text,
    resolve_model_path,
    run_doctor,
)


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """`autospec.cli.main.main` turns SIGTERM/SIGHUP into KeyboardInterrupt; undo it after each test."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def hold(directory: Path, pid: int, mem_mb: float, gpus=(0,), cmdline="python -m sglang.launch_server") -> None:
    (directory / f"{pid}.json").write_text(json.dumps({"pid": pid, "gpus": list(gpus), "mem_mb": mem_mb, "cmdline": cmdline}))


def test_foreign_holders_sum_over_gpus_and_skip_excluded(tmp_path):
    hold(tmp_path, os.getpid(), 1000.0, gpus=(0, 1), cmdline="sglang::scheduler")
    probe = SimGpuProbe(tmp_path)
    assert foreign_gpu_holders(probe) == [(os.getpid(), "sglang::scheduler", 2000.0)]
    assert foreign_gpu_holders(probe, exclude_pids=[os.getpid()]) == []


def test_fake_python_reports_version_and_import(tmp_path):
    site = tmp_path / "site" / "sglang"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("__version__ = '0.5.23'\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    status = check_sglang(str(python))
    assert status.importable and status.version == "0.5.23"


def test_python_without_sglang_and_missing_python(tmp_path):
    bare = tmp_path / "bare-python"  # no site-packages, so no sglang whatever is installed here
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    status = check_sglang(str(bare))
    assert not status.importable and "sglang" in status.error
    missing = check_sglang(str(tmp_path / "nope"))
    assert not missing.importable and "not found" in missing.error


def test_model_path_resolution(tmp_path):
    local = tmp_path / "model"
    local.mkdir()
    assert not resolve_model_path(str(local)).resolves  # no config.json yet
    (local / "config.json").write_text("{}")
    assert resolve_model_path(str(local)).where == "local directory"
    cache = tmp_path / "hub"
    snapshot = cache / "models--Qwen--Qwen3-8B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    found = resolve_model_path("Qwen/Qwen3-8B", [tmp_path / "other", cache])
    assert found.resolves and found.where == "Hugging Face cache" and found.location == str(snapshot)
    missing = resolve_model_path("Qwen/Other", [cache])
    assert not missing.resolves and "huggingface-cli download Qwen/Other" in missing.problem
    assert not resolve_model_path(str(tmp_path / "absent" / "x" / "y")).resolves


def test_hf_cache_dirs_follow_the_environment(tmp_path):
    dirs = hf_cache_dirs({"HF_HUB_CACHE": "/a", "HF_HOME": "/b", "XDG_CACHE_HOME": "/c"})
    assert dirs == [Path("/a"), Path("/b/hub"), Path("/c/huggingface/hub")]


def test_report_without_nvml_says_so_in_one_line():
    report = run_doctor(None, probe_error="nvidia-ml-py is not installed")
    text = render_text(report)
    assert text.splitlines()[0] == "GPUs: not visible (nvidia-ml-py is not installed); GPU checks skipped"
    assert report.ok


def test_report_lists_holders_as_a_problem(tmp_path):
    hold(tmp_path, os.getpid(), 16600.0)
    report = run_doctor(SimGpuProbe(tmp_path), gpu_source="simulator")
    assert not report.ok
    text = render_text(report)
    assert f"PID {os.getpid()} on GPU 0: 16600 MiB  python -m sglang.launch_server" in text
    assert report.as_dict()["holders"][0]["pid"] == os.getpid()


def test_cli_doctor_json_with_simulated_gpus(tmp_path, capsys):
    hold(tmp_path, os.getpid(), 500.0)
    code = main(
        ["doctor", "--json", "--no-sglang", "--sim-gpu-state-dir", str(tmp_path), "--model-path", str(tmp_path / "missing-model")]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 1
    assert data["gpu_source"] == "simulator" and data["gpus"][0]["used_mb"] == 500.0
    assert data["holders"][0]["pid"] == os.getpid()
    assert data["model"]["resolves"] is False


def test_cli_doctor_clean_host(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    code = main(["doctor", "--no-sglang", "--sim-gpu-state-dir", str(tmp_path / "gpu"), "--model-path", str(tmp_path / "m")])
    out = capsys.readouterr().out
    assert code == 0 and out.strip().endswith("OK")
    assert "Processes holding GPU memory: none" in out


def test_cli_doctor_rejects_bad_gpu_list(capsys):
    assert main(["doctor", "--gpus", "0,x", "--no-sglang"]) == 2
    assert "--gpus" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["doctor", "--help"]])
def test_cli_doctor_help(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 0
    assert "--model-path" in capsys.readouterr().out


def test_cli_doctor_lists_the_slots_optimize_would_use(tmp_path, capsys):
    code = main(["doctor", "--no-sglang", "--sim-gpu-state-dir", str(tmp_path / "gpu"), "--gpus", "0-4", "--gpus-per-trial", "2"])
    out = capsys.readouterr().out
    assert code in (0, 1)  # no model given: the slots are printed either way
    assert "slot 0: GPU 0,1, ports 30000-30099" in out and "slot 1: GPU 2,3" in out
    assert "unused: GPU 4" in out
    main(["doctor", "--no-sglang", "--sim-gpu-state-dir", str(tmp_path / "gpu"), "--gpus", "0,0", "--json"])
    slots = json.loads(capsys.readouterr().out)["slots"]
    assert [(s["gpus"], s["shared"]) for s in slots] == [([0], True), ([0], True)]
