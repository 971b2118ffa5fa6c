"""Making a study whole again after a tuner died.

- `recover`: for every trial of this host whose tuner is gone (PID dead, a zombie, or
  reused by another process; `identity.is_same_process`), stops what is left of its
  server (`leftovers.stop_trial_leftovers`). A RUNNING such trial gets its server log
  attached, is failed (outcome ``stale``) and its parameters are queued again (marker
  ``retry_of``), so it is retried, not lost and not counted twice. FAIL trials left
  without a retry by an earlier crash get one too. Works for every storage, journal
  files included.
- `fail_stale_heartbeats`: RDB storages also have heartbeats, which catch trials whose
  tuner died on another host.

A parameter set whose trial was running each time the tuner died `MAX_STALE_RETRIES`
times in a row is not queued again: it may be what kills the tuner (or the host).
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Callable, Mapping, Sequence

import optuna

from autospec.launcher import Launcher
from autospec.records import ORPHANED, STALE, WITHDRAWN, Markers, StoredTrial, TrialRecord, TrialStore
from autospec.study.claims import StudyLock
from autospec.study.files import Artifacts
from autospec.study.processes.identity import find_launch_processes, host_name, is_same_process
from autospec.study.processes.stopping import stop_trial_leftovers

__all__ = [
    "MAX_STALE_RETRIES",
    "ORPHAN_AGE_S",
    "recover",
    "recover_others",
    "fail_stale_heartbeats",
    "requeue",
    "needs_recovery",
    "Heartbeat",
]

MAX_STALE_RETRIES = 3
# A RUNNING trial without a worker record (the tuner died between `ask` and recording
# itself, a window of milliseconds) is taken as orphaned once it is this old; a younger
# one may belong to a tuner that is recording itself right now.
ORPHAN_AGE_S = 60.0
_FAIL = optuna.trial.TrialState.FAIL
_RUNNING = optuna.trial.TrialState.RUNNING
_ENDED_BY = {
    STALE: "the tuner stopped while this trial ran (killed, crashed or the host went down)",
    ORPHANED: "the tuner stopped before it recorded itself on this trial",
}


def _stale_depth(t: StoredTrial, by_number: Mapping[int, StoredTrial]) -> int:
    """How many trials in a row, ending with `t`, ran these parameters when the tuner died."""
    depth, seen = 0, set()
    current: StoredTrial | None = t
    while current is not None and current.number not in seen:
        seen.add(current.number)
        if current.outcome not in (STALE, ORPHANED):
            break
        depth += 1
        parent = current.markers.retry_of
        current = by_number.get(parent) if parent is not None else None
    return depth


def requeue(store: TrialStore, t: StoredTrial, trials: Sequence[StoredTrial]) -> bool:
    """Queue `t`'s parameters again (marker ``retry_of``; a confirmation relaunch stays
    one, ``confirm_of``, a reference point one, ``reference``, and a control one, ``control``:
    else the control policy, seeing no control queued, would queue a second) unless a retry of it
    already exists, it has no parameters, or they stopped the tuner `MAX_STALE_RETRIES`
    times in a row. Idempotent; returns True when it queued."""
    if any(o.markers.retry_of == t.number for o in trials):
        return False
    params = t.retry_params
    if not params or _stale_depth(t, {o.number: o for o in trials}) > MAX_STALE_RETRIES:
        return False
    m = t.markers
    store.enqueue(params, Markers(retry_of=t.number, confirm_of=m.confirm_of, reference=m.reference, control=m.control))
    return True


def needs_recovery(trials: Sequence[StoredTrial], heartbeat: bool) -> bool:
    """Whether `recover` (or, with `heartbeat`, `fail_stale_heartbeats`) may have work: a
    RUNNING trial whose tuner on this host is gone, one without a tuner record older than
    `ORPHAN_AGE_S`, or (heartbeat storages) any RUNNING trial of another host. A cheap
    look, so that live workers do not scan the process table before every trial."""
    host = host_name()
    for t in trials:
        if t.state != _RUNNING:
            continue
        if t.worker is None:
            if _age_s(t) > ORPHAN_AGE_S:
                return True
        elif t.worker.get("host") != host:
            if heartbeat:
                return True
        elif not is_same_process(t.worker):
            return True
    return False


def _age_s(t: StoredTrial) -> float:
    if t.started is None:
        return float("inf")
    now = datetime.datetime.now(t.started.tzinfo) if t.started.tzinfo else datetime.datetime.now()
    return (now - t.started).total_seconds()


def _end(store: TrialStore, t: StoredTrial, outcome: str, artifacts: Artifacts | None) -> bool:
    log_path = t.server.get("log_path") if t.server is not None else None
    if artifacts is not None and isinstance(log_path, str) and log_path:
        with contextlib.suppress(Exception):  # an artifact is a courtesy; recovery must go on
            artifacts.upload(store.frozen(t), log_path, storage=store.storage)
    record = TrialRecord(
        outcome=outcome,
        candidate=t.params,
        reason=_ENDED_BY[outcome],
        launched=t.server is not None,
        log_path=log_path if isinstance(log_path, str) else None,
    )
    return store.end(t, record)


def recover(store: TrialStore, launcher: Launcher, artifacts: Artifacts | None = None) -> list[str]:
    """Make the study whole after a tuner died (see the module docstring). Log lines."""
    lines: list[str] = []
    host = host_name()
    trials = store.read()
    mine = [t for t in trials if t.worker is not None and t.worker.get("host") == host]
    found = find_launch_processes(t.worker.get("launch_id") for t in mine if t.worker is not None)
    failed_now: list[StoredTrial] = []
    for t in mine:
        assert t.worker is not None
        if is_same_process(t.worker):
            continue  # a tuner still running (or this one): its trials are its own
        line = stop_trial_leftovers(t.number, t.worker, t.server, found, launcher)
        if line:
            lines.append(line)
        if t.state == _RUNNING and _end(store, t, STALE, artifacts):
            failed_now.append(t)
            lines.append(f"trial {t.number} was running when the tuner stopped; failed it")
    for t in trials:
        if t.state == _RUNNING and t.worker is None and _age_s(t) > ORPHAN_AGE_S and _end(store, t, ORPHANED, artifacts):
            failed_now.append(t)
            lines.append(f"trial {t.number} was left running without a tuner; failed it")
    return lines + _ensure_retries(store, failed_now)


def _ensure_retries(store: TrialStore, failed_now: Sequence[StoredTrial]) -> list[str]:
    """Every trial failed just now, and every FAIL trial autospec ran (also those an
    earlier crash left without a retry), gets one retry."""
    lines: list[str] = []
    trials = store.read()
    just_failed = {t.number for t in failed_now}
    by_number = {t.number: t for t in trials}
    for t in trials:
        if t.state != _FAIL or (t.worker is None and t.number not in just_failed) or t.outcome == WITHDRAWN:
            continue
        if requeue(store, t, trials):
            lines.append(f"queued the parameters of trial {t.number} again: {t.retry_params}")
            trials = store.read()
        elif t.number in just_failed and _stale_depth(by_number[t.number], by_number) > MAX_STALE_RETRIES:
            lines.append(
                f"not retrying the parameters of trial {t.number}: the tuner stopped while they ran "
                f"{MAX_STALE_RETRIES + 1} times in a row"
            )
    return lines


def fail_stale_heartbeats(store: TrialStore) -> list[str]:
    """RDB storages: fail RUNNING trials whose heartbeat stopped (their tuner died, on any
    host) with Optuna's own check, and queue their parameters again. Log lines."""
    before = {t.trial_id for t in store.read(states=(_RUNNING,))}
    if not before:
        return []
    store.retry("fail trials whose heartbeat stopped", lambda: optuna.storages.fail_stale_trials(store.study))
    failed = [t for t in store.read(states=(_FAIL,)) if t.trial_id in before]
    lines = [f"trial {t.number}: its tuner stopped sending heartbeats; failed it" for t in failed]
    return lines + _ensure_retries(store, failed)


class Heartbeat:
    """Records a heartbeat for the running trial (RDB storages) from a daemon thread."""

    def __init__(self, beat: Callable[[], None] | None, interval: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(beat, interval), daemon=True)
        if beat is not None:
            beat()
            self._thread.start()

    def _run(self, beat: Callable[[], None], interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # a transient DB error must not kill the trial
                beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def recover_others(
    trials: Sequence[StoredTrial],
    store: TrialStore,
    lock: StudyLock,
    launcher: Launcher,
    artifacts: Artifacts | None,
    heartbeat: bool,
) -> list[str] | None:
    """Fail and retry the trials of workers that died (on this host: by process identity;
    on any host, with an RDB storage's `heartbeat`: by heartbeat), under the study's
    `lock` so that two workers never retry the same trial twice. Returns the lines to
    report, or None when `trials` show nothing to recover (it did not look)."""
    if not needs_recovery(trials, heartbeat=heartbeat):
        return None
    with lock.held():
        lines = recover(store, launcher, artifacts)
        if heartbeat:
            lines += fail_stale_heartbeats(store)
    return lines
