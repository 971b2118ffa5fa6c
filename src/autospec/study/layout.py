"""Where the files of one study live, in one place.

Beside the storage file (or in ``--studies-dir`` when the storage is a server)::

    <name>.db                       SQLite storage (the default storage)
    <name>-trials/trial-NNNN/       server.log and bench.json of each trial
    <name>-artifacts/               Optuna FileSystemArtifactStore (optuna-dashboard shows it)
    <name>-events.log               one line per trial outcome and recovery action
    <name>-pending/                 results measured while the storage was away (study.pending)

Shared by every study of a studies folder: ``.sim-gpu/`` (the simulator's recorded GPU
memory) and ``.preflight/`` (cached answers of SGLang's argument resolver).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["StudyLayout"]


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
        return self.trial_dir(number) / "server.log"

    def bench_json(self, number: int) -> Path:
        return self.trial_dir(number) / "bench.json"

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
        return self.studies_dir / ".sim-gpu"

    @property
    def preflight_cache_dir(self) -> Path:
        return self.studies_dir / ".preflight"
