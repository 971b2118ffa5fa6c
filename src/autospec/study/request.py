"""What one study run is asked to do, what it answers, how it can end early, and what it
reports while it works (the `Observer` protocol and a silent one)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autospec.config import SearchSpace
from autospec.errors import RuntimeFailure
from autospec.feasibility import PreflightOracle
from autospec.launcher import Launcher
from autospec.records import TrialRecord
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION
from autospec.study.processes.stopping import StopSignals
from autospec.study.slots import Slot
from autospec.study.weights_fit import ModelSize

__all__ = [
    "OptimizeRequest",
    "OptimizeResult",
    "StopReason",
    "StudyInterrupted",
    "StudyStopped",
    "STORAGE_PATIENCE_S",
    "Observer",
    "NullObserver",
]

STORAGE_PATIENCE_S = 120.0  # how long a storage that is away is waited for before the run stops


class StudyInterrupted(RuntimeFailure):
    """The user stopped the study; everything measured is stored."""

    exit_code = 130


class StudyStopped(RuntimeFailure):
    """The run stopped because its storage stayed away; the current result is kept in a
    pending file and stored by the next run."""


@dataclass
class OptimizeRequest:
    """Everything one run needs. `signals` is the stop policy a CLI signal handler feeds
    (a fresh one when None); `launcher`, `preflight` and `to_argv` default to a plain
    launcher, no preflight and no argv conversion."""

    space: SearchSpace
    study_name: str
    n_trials: int
    command: Sequence[str]
    studies_dir: Path = Path("studies")
    storage: str | None = None
    sampler: str = "model"
    seed: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: Launcher | None = None
    preflight: PreflightOracle | None = None
    to_argv: Callable[[Mapping[str, Any]], list[str]] | None = None
    sglang_version: str = DEFAULT_SGLANG_VERSION
    baseline: bool = False
    references: bool | None = None  # measure the reference points (None: the space file, else the budget decides)
    timeout_s: float | None = None
    learn: bool = True
    remeasure: bool = False
    ready_timeout_s: float | None = None
    signals: StopSignals | None = None
    storage_patience_s: float = STORAGE_PATIENCE_S
    allow_foreign_gpu_memory: bool = False
    confirm: int | None = None  # at most this many of n_trials confirm the picks (--confirm); None: a quarter
    race: bool = True  # stop measuring clearly dominated configurations early (autospec.study.racing)
    slot: Slot | None = None  # the GPU slot this run's servers use (autospec.study.slots); None: all GPUs
    hardware: str | None = None  # what the servers run on, e.g. "NVIDIA H200 x1" (memory lessons are kept per hardware)
    machine: str | None = None  # the machine key of this run's servers (`autospec.records.machines`)
    study_options: Mapping[str, Any] | None = None  # stored with a new study for `autospec worker` (cli.workers)
    model_size: ModelSize | None = None  # checkpoint sizes and GPUs, for the weights-do-not-fit line

    def placement(self) -> dict[str, Any]:
        """Where this run's servers run: stored on each trial (reports, recovery) and used
        to keep memory lessons to the hardware they were learned on."""
        placement: dict[str, Any] = {"hardware": self.hardware}
        if self.machine is not None:
            placement["machine"] = self.machine
        if self.slot is not None:
            placement["slot"] = self.slot.as_dict()
        return placement


class StopReason(str, enum.Enum):
    """Why a run ended without an exception."""

    TARGET = "target"  # the study holds its launched trials (and its confirmation relaunches)
    TIMEOUT = "timeout"  # ``--timeout`` passed: no new trial was started
    EXHAUSTED = "exhausted"  # nothing launchable is left in the space


@dataclass
class OptimizeResult:
    study_name: str
    storage: str
    launched: int
    target: int
    stopped_because: StopReason


class Observer(Protocol):
    """Progress of a run (`autospec.cli.render.Progress` draws it)."""

    def study_started(
        self, study_name: str, done: int, target: int, measured: Mapping[int, Sequence[float]] | None = None
    ) -> None:
        """`measured`: trial number -> objective values of the feasible launches already in the study."""

    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None: ...
    def phase(self, name: str) -> None: ...
    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None: ...
    def not_launched(self, candidate: Mapping[str, Any], outcome: str, reason: str) -> None:
        """A proposal answered without a launch (rejected, skipped or duplicate)."""

    def message(self, text: str) -> None: ...
    def finished(self) -> None:
        """The run ended, whichever way."""


class NullObserver:
    def study_started(
        self, study_name: str, done: int, target: int, measured: Mapping[int, Sequence[float]] | None = None
    ) -> None:
        pass

    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None:
        pass

    def phase(self, name: str) -> None:
        pass

    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None:
        pass

    def not_launched(self, candidate: Mapping[str, Any], outcome: str, reason: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def finished(self) -> None:
        pass
