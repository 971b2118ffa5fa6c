"""The trial in flight (`InFlight`) and what becomes of it when a stop signal comes
(`record_interrupted`): recorded as FAIL, outcome "interrupted", and queued again by the
finisher, so the next run retries it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from autospec.launcher import Launcher
from autospec.records import INTERRUPTED, TrialRecord, TrialStore
from autospec.study.files import EventLog
from autospec.study.finishing import TrialFinisher
from autospec.study.processes.recovery import Heartbeat
from autospec.study.processes.stopping import stop_stragglers

__all__ = ["InFlight", "interrupted_record", "record_interrupted"]


@dataclass
class InFlight:
    """The trial in flight: asked and claimed, maybe launched, not yet told."""

    trial: optuna.Trial
    candidate: dict[str, Any]
    launch_id: str
    started: float
    confirm_of: int | None = None  # a confirmation relaunch of this trial's configuration
    reference: str | None = None  # a reference point outside the search (`proposing.references`)
    phase: str = "ask"
    log_path: Path | None = None
    beat: Heartbeat | None = None
    idle_before_launch: float | None = None  # seconds the GPU was free before this launch


def interrupted_record(current: InFlight, second_signal: bool) -> TrialRecord:
    """The record of the trial in flight when a stop signal came (outcome "interrupted")."""
    how = "server killed at once by a second signal" if second_signal else "server torn down"
    if current.log_path is None:
        how = "no server was running"
    return TrialRecord(
        outcome=INTERRUPTED,
        candidate=current.candidate,
        reason=f"stopped by a signal during {current.phase}; {how}",
        launched=current.log_path is not None,
        log_path=str(current.log_path) if current.log_path else None,
    )


def record_interrupted(
    current: InFlight, store: TrialStore, finisher: TrialFinisher, launcher: Launcher, events: EventLog, second_signal: bool
) -> str:
    """Record the interrupted trial as FAIL ("interrupted") with its server log, and
    queue its parameters again (stopping what is left of its server first). Returns a note
    for the message ("" when all went well); the caller tells the run the trial is over."""
    if current.beat is not None:
        current.beat.stop()
    trial = current.trial
    try:
        straggler = stop_stragglers(current.launch_id, launcher)
        if straggler:
            events.write(straggler)
        if store.is_finished(trial):
            return ""
        record = interrupted_record(current, second_signal)
        finisher.finish(trial, record, note=f" (after {time.monotonic() - current.started:.1f}s)")
        return ""
    except Exception as exc:  # the storage may be what failed; the next run recovers the trial
        return f" (trial {trial.number} could not be recorded: {type(exc).__name__}; the next run retries it)"
