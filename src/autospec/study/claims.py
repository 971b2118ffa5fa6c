"""Launch claims: ``--trials N`` means exactly N launched trials however many workers share
the study, and no configuration is launched by two workers at once.

A worker that asked for a trial *claims* it before launching anything: under the
study's lock (`StudyLock`) it reads the study and records itself on the trial (its
worker record) only when

- the launched trials plus the trials other workers have claimed (RUNNING with a worker
  record; confirmation relaunches included, they count in N) are fewer than N, and
- no other claimed trial runs the same configuration.

Otherwise the trial is *withdrawn* (FAIL, outcome ``withdrawn``; samplers ignore it and
it is never retried) and `Claim.reason` says why. A claim ends with its trial (told, failed,
or failed by recovery when its worker died), so a dead worker's claim is released by the
recovery that fails its trial, which runs under the same lock.

The lock: PostgreSQL ``pg_advisory_lock`` and MySQL ``GET_LOCK`` on a connection of the
storage's own engine (released by the database when the worker dies); SQLite and
journal files: ``flock`` on a file beside the storage file (released by the kernel).
In-memory storages (one process) need none.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from autospec.records import StoredTrial, TrialStore

__all__ = ["StudyLock", "Claim", "decide_claim", "claimed_by_others", "claim_trial"]

_RUNNING = optuna.trial.TrialState.RUNNING


def claimed_by_others(trials: Sequence[StoredTrial], own_number: int | None = None) -> list[StoredTrial]:
    """RUNNING trials other than `own_number` that a worker claimed (its worker record
    is on them), confirmation relaunches included."""
    return [t for t in trials if t.state == _RUNNING and t.worker is not None and t.number != own_number]


@dataclass(frozen=True)
class Claim:
    """The answer to a claim: granted, or the reason it was withdrawn."""

    granted: bool
    reason: str = ""


def decide_claim(
    trials: Sequence[StoredTrial], own_number: int, params: Mapping[str, Any], target: int, counts_toward_target: bool = True
) -> Claim:
    """May trial `own_number` (with `params`) launch, given the study's `trials` now and
    `target` launched trials (see the module docstring)? Pure."""
    others = claimed_by_others(trials, own_number)
    same = next((t for t in others if dict(t.params) == dict(params)), None)
    if same is not None:
        return Claim(False, f"trial {same.number} of another worker runs the same configuration")
    if counts_toward_target:
        launched = sum(1 for t in trials if t.counts_as_launch)
        if launched + len(others) >= target:
            return Claim(
                False, f"the study's {target} launches are taken ({launched} launched, {len(others)} running on other workers)"
            )
    return Claim(True)


class StudyLock:
    """A lock shared by every worker of one study (see the module docstring)."""

    def __init__(self, storage: optuna.storages.BaseStorage, study_name: str, local_path: Path | None) -> None:
        self._storage = storage
        self._key = int.from_bytes(hashlib.sha256(f"autospec:{study_name}".encode()).digest()[:8], "big", signed=True)
        self._name = f"autospec:{hashlib.sha256(study_name.encode()).hexdigest()[:48]}"
        # not "<file>.lock": Optuna's JournalFileSymlinkLock uses that name (Optuna 5.0)
        self._file = local_path.with_name(local_path.name + ".autospec-lock") if local_path is not None else None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block (blocking until it is free)."""
        if self._file is not None:
            with open(self._file, "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
            return
        engine = getattr(self._storage, "engine", None)
        dialect = engine.dialect.name if engine is not None else ""
        if dialect not in ("postgresql", "mysql"):
            yield  # in-memory (one process); other databases are refused by open_storage
            return
        from sqlalchemy import text

        assert engine is not None
        take, give = (
            ("SELECT pg_advisory_lock(:key)", "SELECT pg_advisory_unlock(:key)")
            if dialect == "postgresql"
            else ("SELECT GET_LOCK(:name, -1)", "SELECT RELEASE_LOCK(:name)")
        )
        args = {"key": self._key, "name": self._name}
        with engine.connect() as conn:
            conn.execute(text(take), args)
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text(give), args)
                conn.commit()


def claim_trial(
    store: TrialStore,
    lock: StudyLock,
    trial: optuna.Trial,
    target: int,
    counts_toward_target: bool,
    worker: Mapping[str, Any],
    withdraw: Callable[[str], None],
) -> bool:
    """Claim the asked `trial` for this worker: under the study's lock, record `worker` on
    it if `decide_claim` grants it, else call `withdraw(reason)` (still under the lock).
    A trial not taken from the queue (another worker took the queued proposal between
    this worker's look and its ask) is withdrawn as well. A trial another worker has
    already claimed is left to it, untouched: Optuna 5.1 can hand one queued trial to two
    processes of an SQLite study (its pop reads WAITING and then writes RUNNING, and
    SQLite takes no row lock), and both then ask to claim the same number. The first may also
    have withdrawn it, which ends it with no worker record: an ended trial is left as well.
    True when claimed."""
    queued = store.was_queued(trial)
    with lock.held():
        if store.worker_of(trial) is not None or store.is_finished(trial):
            return False
        if queued:
            reason = decide_claim(store.read(), trial.number, trial.params, target, counts_toward_target).reason
        else:
            reason = "another worker took the queued proposal first"
        if not reason:
            store.record_worker(trial, worker)
            return True
        withdraw(reason)
    return False
