"""Fixtures for end-to-end studies against the simulator (real subprocesses)."""

from __future__ import annotations

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


def storage_spec(backend: str, study: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The --storage value for `backend` ("sqlite", "journal" or "postgres", the last from
    the PostgreSQL fixture) with the study's files under tmp_path/studies."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'studies' / study}.db"
    if backend == "journal":
        return str(tmp_path / "studies" / f"{study}.log")
    return request.getfixturevalue("postgres_url")
