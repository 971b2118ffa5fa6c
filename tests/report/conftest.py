"""Fixtures: `made`, the standard hand-made study (see factory.py; built once per session,
read-only), `made_copy` (a private copy to change), and `data`, its snapshot."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from .factory import Made, build_study


@pytest.fixture(scope="session")
def made(tmp_path_factory) -> Made:
    return build_study(tmp_path_factory.mktemp("standard"))


@pytest.fixture
def made_copy(made: Made, tmp_path: Path) -> Made:
    studies = tmp_path / "studies"
    studies.mkdir()
    shutil.copy(made.studies_dir / f"{made.name}.db", studies / f"{made.name}.db")
    return replace(made, studies_dir=studies, storage=f"sqlite:///{studies / (made.name + '.db')}")


@pytest.fixture(scope="session")
def data(made: Made):
    from autospec.report import snapshot

    return snapshot(made.load())
