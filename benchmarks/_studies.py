"""Shared by the benchmark scripts: run `autospec optimize --sim` studies as
subprocesses (exactly what a user runs) and read them back from their storage."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna

from autospec.cli.common import load_space


def run_study(
    folder: Path,
    name: str,
    *,
    trials: int,
    seed: int,
    sampler: str = "model",
    space: str = "default",
    extra: Sequence[str] = (),
    time_scale: float = 1.0,
    load_seconds: float = 0.5,
) -> tuple[optuna.Study, float]:
    """Run one study to completion; return it and the wall seconds it took."""
    argv = [
        sys.executable,
        "-m",
        "autospec.cli.main",
        "optimize",
        "--sim",
        "--quiet",
        "--trials",
        str(trials),
        "--seed",
        str(seed),
        "--sampler",
        sampler,
        "--space",
        space,
        "--study",
        name,
        "--studies-dir",
        str(folder),
        "--sim-time-scale",
        f"{time_scale:g}",
        "--sim-load-seconds",
        f"{load_seconds:g}",
        # search quality is measured on the search alone (reference points would take 3 launches)
        *([] if "--references" in extra else ["--no-references"]),
        *extra,
    ]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"study {name} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}\n{proc.stdout.strip()[-3000:]}")
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{folder / (name + '.db')}")
    return study, wall


def full_flags(space_name: str, candidate: dict[str, Any]) -> dict[str, Any]:
    space = load_space(space_name)
    return {**space.server.flags, **candidate}


def dump(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=1, default=str))
