"""What one study run is asked to do, what it answers, and how it can end early."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autospec.config import SearchSpace
from autospec.errors import RuntimeFailure
from autospec.feasibility import PreflightOracle
from autospec.launcher import Launcher
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION
from autospec.study.signals import StopSignals
from autospec.study.slots import Slot

__all__ = ["OptimizeRequest", "OptimizeResult", "StudyInterrupted", "StudyStopped", "STORAGE_PATIENCE_S"]

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
    timeout_s: float | None = None
    learn: bool = True
    remeasure: bool = False
    ready_timeout_s: float | None = None
    signals: StopSignals | None = None
    storage_patience_s: float = STORAGE_PATIENCE_S
    allow_foreign_gpu_memory: bool = False
    confirm: int = 0  # relaunches of front configurations once n_trials are launched (--confirm)
    race: bool = True  # stop measuring clearly dominated configurations early (autospec.study.racing)
    slot: Slot | None = None  # the GPU slot this run's servers use (autospec.study.slots); None: all GPUs
    hardware: str | None = None  # what the servers run on, e.g. "NVIDIA H200 x1" (memory lessons are kept per hardware)
    study_options: Mapping[str, Any] | None = None  # stored with a new study for `autospec worker` (cli.workers)


@dataclass
class OptimizeResult:
    study_name: str
    storage: str
    launched: int
    target: int
    stopped_because: str  # "target" | "timeout" | "exhausted"
