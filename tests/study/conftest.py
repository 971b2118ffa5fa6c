"""Fixtures for end-to-end studies against the simulator (real subprocesses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from simspace import kill_all, processes_mentioning, sim_space_text

FAST_SPACE = sim_space_text(topk=(1, 2))


SIM_ARGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture
def fast_space(tmp_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_SPACE)
    return path




def storage_spec(backend: str, study: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The --storage value for `backend` ("sqlite", "journal" or "postgres", the last from
    the PostgreSQL fixture) with the study's files under tmp_path/studies."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'studies' / study}.db"
    if backend == "journal":
        return str(tmp_path / "studies" / f"{study}.log")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def no_leftover_sims(tmp_path: Path):
    """Fails the test if it leaves a simulator process running (and kills it)."""
    yield
    left = processes_mentioning(str(tmp_path))
    kill_all(left, os.killpg)
    assert not left, f"simulator processes left running: {sorted(left)}"
