"""How a trial a run asked for ends: one path for every record.

Whatever ended the trial (a measurement, a launch failure, a rejection, a transient host
failure, a stop signal, a claim another worker won), `TrialFinisher.finish` stores the
record the same way: the server log and bench JSON attached as artifacts, the record
told (COMPLETE or FAIL, by `ending_of`), its parameters queued again where the ending
asks for it, and one line in the events log. When the storage stays away the record is
kept in a pending file (`autospec.study.files.PendingResults`) and `StudyStopped` is
raised: the server is torn down by then, and the next run stores the result first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import optuna

from autospec.records import INTERRUPTED, STORAGE_AWAY_ERRORS, WITHDRAWN, StorageUnavailable, TrialRecord, TrialStore
from autospec.study.files import Artifacts, EventLog, PendingResults
from autospec.study.processes import recovery
from autospec.study.request import StudyStopped

__all__ = ["TrialFinisher", "Ending", "ending_of", "TRANSIENT_OUTCOMES", "event_line"]

# Launch failures caused by the host, not the configuration (another program took the
# port between picking and binding it): retried, never recorded as infeasible.
TRANSIENT_OUTCOMES = ("port_in_use",)


@dataclass(frozen=True)
class Ending:
    """How a record ends its trial: told FAIL (`failed`: samplers and the budget ignore
    it) rather than COMPLETE, and whether its parameters are queued again (`retried`)."""

    failed: bool = False
    retried: bool = False


def ending_of(record: TrialRecord) -> Ending:
    """A transient host failure or a stop signal: FAIL and queued again; a withdrawn claim:
    FAIL, never retried; anything else: COMPLETE (infeasible outcomes included)."""
    if record.outcome in TRANSIENT_OUTCOMES or record.outcome == INTERRUPTED:
        return Ending(failed=True, retried=True)
    if record.outcome == WITHDRAWN:
        return Ending(failed=True)
    return Ending()


def event_line(number: int, record: TrialRecord) -> str:
    """The events-log line of a finished trial."""
    secs = " ".join(f"{k}={v:.1f}s" for k, v in record.seconds.items())
    values = "" if record.values is None else " values=" + ",".join(f"{v:.1f}" for v in record.values)
    reason = f" reason={record.reason!r}" if record.reason else ""
    return (
        f"trial {number}: outcome={record.outcome} launched={record.launched}{values} {secs}{reason} "
        f"candidate={dict(record.candidate)}"
    )


class TrialFinisher:
    """Stores the records of one run's trials (see the module docstring); `log` reports a
    line to the user and the events log."""

    def __init__(
        self, store: TrialStore, pending: PendingResults, artifacts: Artifacts, events: EventLog, log: Callable[[str], None]
    ) -> None:
        self.store = store
        self.pending = pending
        self.artifacts = artifacts
        self.events = events
        self._log = log

    def finish(self, trial: optuna.Trial, record: TrialRecord, note: str = "") -> Ending:
        """End `trial` with `record`; `note` is added to its events line. Raises
        `StudyStopped` when the storage stays away (the record is kept pending)."""
        ending = ending_of(record)
        number = trial.number
        if record.log_path:  # a courtesy: an absent storage, or a trial another worker's
            # recovery ended meanwhile (Optuna 5.1 refuses attributes on a finished trial; the
            # tell below then says so), does not stop the run here
            with contextlib.suppress(*STORAGE_AWAY_ERRORS, optuna.exceptions.UpdateFinishedTrialError):
                self.artifacts.upload(trial, record.log_path)
        try:
            stored = (self.store.tell_failed if ending.failed else self.store.tell)(trial, record)
        except StorageUnavailable as exc:
            path = self.pending.save(number, record, failed=ending.failed)
            self.events.write(event_line(number, record) + f" (storage away: kept in {path})")
            raise StudyStopped(
                f"{exc}; trial {number}'s server is torn down and its result is kept in {path}, "
                "recorded when the same command runs again"
            ) from None
        if stored.outcome != record.outcome:  # another worker's recovery ended it first
            self._log(
                f"trial {number} was ended by another worker ({stored.outcome}) before this tuner stored its "
                f"result ({record.outcome}); that worker queued it again, this result is in the events file only"
            )
        elif ending.retried and recovery.requeue(self.store, stored, self.store.read()):
            note += "; its parameters are queued again"
        self.events.write(event_line(number, record) + note)
        return ending
