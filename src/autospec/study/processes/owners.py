"""Whose server is this? The owner of a GPU-holding process, read from its environment.

Every server a study launches inherits, besides its launch ID (`identity.LAUNCH_ID_ENV`),
the study's name, the trial number, the storage (as a URL another directory can use;
passwords removed) and the identity of the tuner that launched it. Children that left the
process group inherit them too. So a process holding GPU memory can be named without
opening any study: "the server of trial 4 of study S in STORAGE, whose tuner is gone",
and the command that stops it safely can be printed (`stop_command`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from autospec.launcher.proctree import is_alive
from autospec.study.processes.identity import LAUNCH_ID_ENV

__all__ = ["ServerOwner", "owner_env", "owner_of", "OWNER_ENV"]

OWNER_ENV = {
    "study": "AUTOSPEC_STUDY",
    "trial": "AUTOSPEC_TRIAL",
    "storage": "AUTOSPEC_STORAGE",
    "tuner_pid": "AUTOSPEC_TUNER_PID",
    "tuner_start": "AUTOSPEC_TUNER_START",  # seconds since boot (`proctree`)
}


@dataclass(frozen=True)
class ServerOwner:
    """The study trial a server process belongs to."""

    launch_id: str
    study: str
    trial: int | None
    storage: str
    tuner_pid: int | None
    tuner_start: float | None

    @property
    def tuner_alive(self) -> bool:
        """The tuner that launched it still runs (so the server is in use, not left over)."""
        return self.tuner_pid is not None and is_alive(self.tuner_pid, self.tuner_start)

    def stop_command(self) -> str:
        """The command that stops what this study left behind, the safe way (recovery:
        verified identity, TERM then KILL, wait for GPU memory)."""
        return shlex.join(["autospec", "recover", "--study", self.study, "--storage", self.storage])

    def describe(self) -> str:
        trial = f"trial {self.trial} of " if self.trial is not None else ""
        tuner = f"whose tuner (pid {self.tuner_pid}) still runs" if self.tuner_alive else "whose tuner is gone"
        return f"the server of {trial}study {self.study!r} in {self.storage}, {tuner}"


def owner_env(study: str, trial: int, storage: str, launch_id: str, tuner_pid: int, tuner_start: float | None) -> dict[str, str]:
    """The environment that marks a server as launched by this tuner for this trial."""
    env = {
        LAUNCH_ID_ENV: launch_id,
        OWNER_ENV["study"]: study,
        OWNER_ENV["trial"]: str(trial),
        OWNER_ENV["storage"]: storage,
        OWNER_ENV["tuner_pid"]: str(tuner_pid),
    }
    if tuner_start is not None:
        env[OWNER_ENV["tuner_start"]] = repr(tuner_start)
    return env


def _number(text: str | None, kind: type) -> int | float | None:
    try:
        return kind(text) if text else None
    except ValueError:
        return None


def owner_from_environ(environ: Mapping[str, str]) -> ServerOwner | None:
    """The owner named in a process environment, or None (not a server autospec launched)."""
    launch_id = environ.get(LAUNCH_ID_ENV)
    study = environ.get(OWNER_ENV["study"])
    if not launch_id or not study:
        return None
    trial = _number(environ.get(OWNER_ENV["trial"]), int)
    pid = _number(environ.get(OWNER_ENV["tuner_pid"]), int)
    started = _number(environ.get(OWNER_ENV["tuner_start"]), float)
    return ServerOwner(
        launch_id,
        study,
        int(trial) if trial is not None else None,
        environ.get(OWNER_ENV["storage"], ""),
        int(pid) if pid is not None else None,
        float(started) if started is not None else None,
    )


def owner_of(pid: int) -> ServerOwner | None:
    """The owner of process `pid`, or None (not ours, gone, or its environment is not
    readable from here, e.g. another user's process)."""
    try:
        return owner_from_environ(psutil.Process(pid).environ())
    except (psutil.Error, OSError):
        return None
