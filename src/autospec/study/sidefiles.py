"""Files a study writes beside its storage: the event log and the artifact store."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import optuna

__all__ = ["EventLog", "Artifacts"]


class EventLog:
    """Append-only text log of the study, one timestamped line per event (fsynced, so a
    line written before a crash survives it)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"[{stamp}] {line}\n")
            fh.flush()
            os.fsync(fh.fileno())


class Artifacts:
    """Server log and bench JSON of each trial, in an Optuna FileSystemArtifactStore
    (optuna-dashboard shows them on the trial's page)."""

    FILES = (("server.log", "text/plain"), ("bench.json", "application/json"))

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.store = optuna.artifacts.FileSystemArtifactStore(str(base))

    def upload(self, trial: optuna.Trial | optuna.trial.FrozenTrial, log_path: str, storage: Any = None) -> None:
        """Attach the files next to `log_path` to a trial that is still RUNNING (a
        FrozenTrial needs its `storage`)."""
        folder = Path(log_path).parent
        for name, mimetype in self.FILES:
            path = folder / name
            if path.is_file():
                optuna.artifacts.upload_artifact(
                    artifact_store=self.store, file_path=str(path), study_or_trial=trial, mimetype=mimetype,
                    storage=storage,
                )
