"""The files of a study: where they live, the events log, the artifacts, pending results.

Beside the storage file (or in ``--studies-dir`` when the storage is a server)::

    <name>.db                       SQLite storage (the default storage)
    <name>-trials/trial-NNNN/       server.log and bench.json of each trial
    <name>-artifacts/               Optuna FileSystemArtifactStore (optuna-dashboard shows it)
    <name>-events.log               one line per trial outcome and recovery action
    <name>-pending/                 results measured while the storage was away (`PendingResults`)

Shared by every study of a studies folder: ``.sim-gpu/`` (the simulator's recorded GPU
memory) and ``.preflight/`` (cached answers of SGLang's argument resolver).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from autospec.records import TrialRecord, TrialStore

__all__ = ["StudyLayout", "EventLog", "Artifacts", "PendingResults", "sim_gpu_state_dir", "preflight_cache_dir"]

SERVER_LOG = "server.log"  # in each trial's folder
BENCH_JSON = "bench.json"


@dataclass(frozen=True)
class StudyLayout:
    """The files of study `name`; `folder` holds them (see the module docstring)."""

    folder: Path
    name: str
    studies_dir: Path

    @classmethod
    def beside(cls, storage_file: Path | None, studies_dir: Path, name: str) -> StudyLayout:
        """The layout of a study stored in `storage_file` (None: a database server)."""
        folder = storage_file.parent if storage_file is not None else studies_dir
        return cls(folder=folder, name=name, studies_dir=studies_dir)

    @staticmethod
    def default_storage_file(studies_dir: Path, name: str) -> Path:
        """The SQLite file used when no storage is given."""
        return studies_dir / f"{name}.db"

    @property
    def trials_dir(self) -> Path:
        return self.folder / f"{self.name}-trials"

    def trial_dir(self, number: int) -> Path:
        return self.trials_dir / f"trial-{number:04d}"

    def server_log(self, number: int) -> Path:
        return self.trial_dir(number) / SERVER_LOG

    def bench_json(self, number: int) -> Path:
        return self.trial_dir(number) / BENCH_JSON

    def capacity_dir(self, number: int) -> Path:
        """Where `autospec capacity` saves trial `number`'s capacity curve."""
        return self.folder / f"{self.name}-capacity" / f"trial-{number:04d}"

    @property
    def artifacts_dir(self) -> Path:
        return self.folder / f"{self.name}-artifacts"

    @property
    def events_log(self) -> Path:
        return self.folder / f"{self.name}-events.log"

    @property
    def pending_dir(self) -> Path:
        return self.folder / f"{self.name}-pending"

    @property
    def sim_gpu_state_dir(self) -> Path:
        return sim_gpu_state_dir(self.studies_dir)


def sim_gpu_state_dir(studies_dir: Path) -> Path:
    """The simulator's recorded GPU memory, shared by the studies of `studies_dir`."""
    return studies_dir / ".sim-gpu"


def preflight_cache_dir(studies_dir: Path) -> Path:
    """Cached answers of SGLang's argument resolver, shared by the studies of `studies_dir`."""
    return studies_dir / ".preflight"


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

    FILES = ((SERVER_LOG, "text/plain"), (BENCH_JSON, "application/json"))

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
                    artifact_store=self.store,
                    file_path=str(path),
                    study_or_trial=trial,
                    mimetype=mimetype,
                    storage=storage,
                )


class PendingResults:
    """The pending results of one study, one JSON file per trial in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save(self, number: int, record: TrialRecord, *, failed: bool = False) -> Path:
        """Keep `record` of trial `number` (to be told FAIL when `failed`); the file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        entry = {
            "number": number,
            "failed": failed,
            "attrs": record.to_attrs(),
            "values": record.values,
            "constraints": record.constraints,
        }
        path = self.folder / f"trial-{number:04d}.json"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".trial-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return path

    def replay(self, store: TrialStore) -> list[str]:
        """Write every pending result into `store`; log lines. A result whose trial is no
        longer running (another process failed it meanwhile) is dropped: that trial's
        retry measures it again."""
        lines: list[str] = []
        for path in sorted(self.folder.glob("trial-*.json")) if self.folder.is_dir() else []:
            entry = self._load(path)
            if entry is None:
                lines.append(f"ignored the unreadable pending result {path}")
                path.unlink(missing_ok=True)
                continue
            number = int(entry["number"])
            record = TrialRecord.from_attrs(entry["attrs"], entry.get("values"), entry.get("constraints"))
            if record is None:
                path.unlink(missing_ok=True)
                continue
            if store.is_finished(number):
                lines.append(f"trial {number} was finished meanwhile; dropped the result kept in {path.name}")
            elif entry.get("failed"):
                store.tell_failed(number, record)
                lines.append(f"recorded trial {number} (kept while the storage was away) as failed")
            else:
                store.tell(number, record)
                lines.append(f"recorded trial {number} (measured while the storage was away): outcome {record.outcome}")
            path.unlink(missing_ok=True)
        return lines

    @staticmethod
    def _load(path: Path) -> dict[str, Any] | None:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and isinstance(entry.get("number"), int) else None
