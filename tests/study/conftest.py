"""Fixtures for end-to-end studies against the simulator (real subprocesses)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from simspace import processes_mentioning, sim_space_text

FAST_SPACE = sim_space_text(topk=(1, 2))


SIM_ARGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture
def fast_space(tmp_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_SPACE)
    return path




@pytest.fixture
def no_leftover_sims(tmp_path: Path):
    """Fails the test if it leaves a simulator process running (and kills it)."""
    yield
    left = processes_mentioning(str(tmp_path))
    for pid in left:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"simulator processes left running: {sorted(left)}"
