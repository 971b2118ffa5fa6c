"""Fixtures for end-to-end studies against the simulator (real subprocesses)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from simspace import sim_space_text

FAST_SPACE = sim_space_text(topk=(1, 2))


SIM_ARGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture
def fast_space(tmp_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_SPACE)
    return path


def sim_pids(marker: str) -> set[int]:
    """PIDs of running simulator processes (python -m autospec.sim ...) whose command
    line contains `marker` (the test's tmp_path: its sims keep their GPU state there)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"autospec.sim" in cmd and any(marker.encode() in part for part in cmd):
            found.add(int(entry.name))
    return found


@pytest.fixture
def no_leftover_sims(tmp_path: Path):
    """Fails the test if it leaves a simulator process running (and kills it)."""
    yield
    left = sim_pids(str(tmp_path))
    for pid in left:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"simulator processes left running: {sorted(left)}"
