"""Making a study whole again after the tuner died, and its durable side files.

How processes are identified (never by name). Before a trial launches anything, the
tuner stores the system attribute ``autospec:worker`` = ``{host, pid, start_time,
launch_id}``: the tuner itself (a PID plus its start time in clock ticks since boot names
one process for the life of the host) and a random *launch ID* that it gives the server
in the environment variable ``AUTOSPEC_LAUNCH_ID``. Every process the server starts
inherits it, also children that leave the process group with ``setsid()``. Right after the
spawn it stores ``autospec:server`` = ``{host, pid, pgid, port, start_time, cmdline}``.
A process counts as a trial's server only if it runs on this host with the recorded start
time and either carries the trial's launch ID or still has the recorded command line.

- `recover`: for every trial of this host whose tuner is gone (PID dead, a zombie, or
  reused by another process), stops what is left of its server (TERM to the group and
  every process with its launch ID, KILL after the launcher's timeout, then waits for
  their GPU memory and port as a normal teardown does). A RUNNING such trial gets its
  server log attached, is failed (outcome ``stale``) and its parameters are enqueued again
  (user attribute ``retry_of``), so it is retried, not lost and not counted twice. FAIL
  trials left without a retry by an earlier crash get one too. Works for every storage,
  journal files included; RDB storages also have heartbeats (`fail_stale_heartbeats`)
  for trials of other hosts.
- `replay`: feeds earlier trials to the feasibility gate (learned failures, KV capacity,
  measurements for dedup), so a resumed study knows what the first run learned.
- `LIVE_SERVERS`: servers this process runs now, so a second Ctrl-C can SIGKILL them at
  once from the signal handler.
- `EventLog`: one line per trial outcome and recovery action, beside the storage.
- `Artifacts`: server log and benchmark JSON per trial in an Optuna artifact store.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

import optuna

from autospec.launcher import stop_process_group
from autospec.launcher.proctree import is_alive, read_cmdline, read_proc
from autospec.study.records import LAUNCH_FAILURES, SERVER_KEY, WORKER_KEY

__all__ = [
    "LAUNCH_ID_ENV",
    "LIVE_SERVERS",
    "LEFTOVER_TERM_TIMEOUT_S",
    "MAX_STALE_RETRIES",
    "ORPHAN_AGE_S",
    "Artifacts",
    "EventLog",
    "LiveServers",
    "fail_stale_heartbeats",
    "find_launch_processes",
    "new_launch_id",
    "process_start_time",
    "recover",
    "replay",
    "requeue",
    "same_process",
    "server_record",
    "stop_stragglers",
    "this_worker",
]

LAUNCH_ID_ENV = "AUTOSPEC_LAUNCH_ID"
# A parameter set whose trial was running each time the tuner died this many times in a
# row is not queued again: it may be what kills the tuner (or the host).
MAX_STALE_RETRIES = 3
# A RUNNING trial without a worker record (the tuner died between `ask` and recording
# itself, a window of milliseconds) is taken as orphaned once it is this old; a younger
# one may belong to a tuner that is recording itself right now.
ORPHAN_AGE_S = 60.0
# TERM grace for a leftover server before KILL. Its log reader (the dead tuner) is gone, so
# it may fail on its next log write instead of shutting down (the simulator does); KILL
# reaches every process of it (the group and each process with its launch ID), and the
# GPU memory is then waited for as in a normal teardown.
LEFTOVER_TERM_TIMEOUT_S = 2.0
_FAIL = optuna.trial.TrialState.FAIL
_RUNNING = optuna.trial.TrialState.RUNNING


# ---------------------------------------------------------------- process identity
def process_start_time(pid: int) -> int | None:
    """Start time of a running (non-zombie) `pid` in clock ticks since boot, or None."""
    info = read_proc(pid)
    return None if info is None or not is_alive(pid, info.starttime) else info.starttime


def new_launch_id() -> str:
    """A fresh random ID for one trial's server processes."""
    return uuid.uuid4().hex


def this_worker(launch_id: str | None = None) -> dict[str, Any]:
    """The ``autospec:worker`` record of this process for one trial."""
    pid = os.getpid()
    record: dict[str, Any] = {"host": socket.gethostname(), "pid": pid, "start_time": process_start_time(pid)}
    if launch_id:
        record["launch_id"] = launch_id
    return record


def server_record(info: Mapping[str, Any]) -> dict[str, Any]:
    """What is stored about a launched server so a later run can stop it safely."""
    pid = int(info["pid"])
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "pgid": int(info.get("pgid", pid)),
        "port": info.get("port"),
        "start_time": process_start_time(pid),
        "cmdline": read_cmdline(pid),
        "log_path": info.get("log_path"),
        "recorded_at": time.time(),
    }


def _environ_launch_id(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's process
        return None
    prefix = LAUNCH_ID_ENV.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace")
    return None


def find_launch_processes(launch_ids: Iterable[str]) -> dict[str, dict[int, int]]:
    """Running processes of this host that carry one of `launch_ids` in their environment:
    launch ID -> {pid: start time}. One pass over /proc; zombies are left out."""
    wanted = {i for i in launch_ids if i}
    found: dict[str, dict[int, int]] = {}
    if not wanted:
        return found
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        launch_id = _environ_launch_id(pid)
        if launch_id in wanted:
            start = process_start_time(pid)
            if start is not None:
                found.setdefault(launch_id, {})[pid] = start
    return found


def same_process(record: Mapping[str, Any] | None, launch_id: str | None = None) -> bool:
    """True when the recorded process still runs on this host and is the very same one:
    same PID and start time, and the same command line or the trial's launch ID."""
    if not isinstance(record, Mapping) or record.get("host") != socket.gethostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    start = process_start_time(pid)
    if start is None or start != record.get("start_time"):
        return False
    if "cmdline" not in record:  # a worker record: PID + start time is the identity
        return True
    return read_cmdline(pid) == record.get("cmdline") or (launch_id is not None and _environ_launch_id(pid) == launch_id)


# ---------------------------------------------------------------- trial bookkeeping
def _worker(t: optuna.trial.FrozenTrial) -> dict[str, Any] | None:
    w = t.system_attrs.get(WORKER_KEY)
    return w if isinstance(w, dict) else None


def _retry_params(t: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """Parameters to try again: those suggested so far, over any that were enqueued."""
    fixed = t.system_attrs.get("fixed_params")
    return {**(fixed if isinstance(fixed, dict) else {}), **t.params}


def _stale_depth(t: optuna.trial.FrozenTrial, by_number: Mapping[int, optuna.trial.FrozenTrial]) -> int:
    """How many trials in a row, ending with `t`, ran these parameters when the tuner died."""
    depth, seen = 0, set()
    current: optuna.trial.FrozenTrial | None = t
    while current is not None and current.number not in seen:
        seen.add(current.number)
        if current.user_attrs.get("outcome") not in ("stale", "orphaned"):
            break
        depth += 1
        parent = current.user_attrs.get("retry_of")
        current = by_number.get(parent) if isinstance(parent, int) else None
    return depth


def requeue(study: optuna.Study, t: optuna.trial.FrozenTrial, trials: Iterable[optuna.trial.FrozenTrial] | None = None) -> bool:
    """Enqueue `t`'s parameters again (user attribute ``retry_of``) unless a retry of it
    already exists, it has no parameters, or they stopped the tuner `MAX_STALE_RETRIES`
    times in a row. Idempotent; returns True when it enqueued."""
    all_trials = list(trials) if trials is not None else study.get_trials(deepcopy=False)
    if any(o.user_attrs.get("retry_of") == t.number for o in all_trials):
        return False
    params = _retry_params(t)
    if not params:
        return False
    if _stale_depth(t, {o.number: o for o in all_trials}) > MAX_STALE_RETRIES:
        return False
    study.enqueue_trial(params, user_attrs={"retry_of": t.number})
    return True


def _fail(study: optuna.Study, t: optuna.trial.FrozenTrial, outcome: str, reason: str) -> bool:
    """RUNNING -> FAIL with `outcome`; False when another process finished it first."""
    storage = study._storage
    try:
        storage.set_trial_user_attr(t._trial_id, "outcome", outcome)
        storage.set_trial_user_attr(t._trial_id, "reason", reason)
        storage.set_trial_user_attr(t._trial_id, "launched", isinstance(t.system_attrs.get(SERVER_KEY), dict))
        return bool(storage.set_trial_state_values(t._trial_id, state=_FAIL))
    except optuna.exceptions.UpdateFinishedTrialError:
        return False


def _age_s(t: optuna.trial.FrozenTrial) -> float:
    if t.datetime_start is None:
        return float("inf")
    start = t.datetime_start
    now = datetime.datetime.now(start.tzinfo) if start.tzinfo else datetime.datetime.now()
    return (now - start).total_seconds()


def _stop_leftovers(t: optuna.trial.FrozenTrial, worker: Mapping[str, Any], found: Mapping[str, Mapping[int, int]],
                    launcher: Any) -> str | None:
    """Stop the verified processes of `t`'s server; a log line, or None if none ran."""
    launch_id = worker.get("launch_id")
    procs: dict[int, int] = dict(found.get(launch_id, {})) if launch_id else {}
    server = t.system_attrs.get(SERVER_KEY)
    port = None
    leader = None
    if isinstance(server, dict):
        port = server.get("port")
        if same_process(server, launch_id):
            procs[int(server["pid"])] = int(server["start_time"])
            leader = int(server["pid"])
    if not procs:
        return None
    return _stop_processes(f"leftover server of trial {t.number}", procs, leader, port, launcher,
                           term_timeout_s=LEFTOVER_TERM_TIMEOUT_S)


def _stop_processes(what: str, procs: Mapping[int, int], leader: int | None, port: Any, launcher: Any,
                    term_timeout_s: float | None = None) -> str:
    """TERM, then KILL after the launcher's timeout, the verified `procs` (pid -> start
    time) and the group of `leader` (a verified group leader); wait for GPU memory and port."""
    if leader is None:
        # Signal a group only through a verified process that leads one.
        leaders = [pid for pid in procs if (info := read_proc(pid)) is not None and info.pgid == pid]
        leader = min(leaders or procs)
    report = stop_process_group(
        leader,
        dict(procs),
        probe=getattr(launcher, "probe", None),
        term_timeout_s=min(getattr(launcher, "term_timeout_s", 30.0), term_timeout_s or float("inf")),
        kill_timeout_s=getattr(launcher, "kill_timeout_s", 10.0),
        gpu_free_timeout_s=getattr(launcher, "gpu_free_timeout_s", 60.0),
        port_free_timeout_s=getattr(launcher, "port_free_timeout_s", 30.0),
        port=port if isinstance(port, int) else None,
    )
    pids = ", ".join(str(p) for p in sorted(procs))
    gpu = {True: "GPU memory released", False: "GPU memory still held", None: "GPU memory not observable"}[
        report.gpu_memory_released
    ]
    left = f"; still running: {list(report.leftover_pids)}" if report.leftover_pids else ""
    return f"stopped {what} (pids {pids}) with {report.signal_sent} in {report.seconds:.1f}s; {gpu}{left}"


def stop_stragglers(launch_id: str, launcher: Any = None) -> str | None:
    """After a trial's own teardown (or an interrupted launch): stop any process still
    carrying its launch ID, as a leftover is stopped. A log line, or None if none ran."""
    found = find_launch_processes([launch_id])
    if not found:
        return None
    return _stop_processes(f"stray processes of launch {launch_id[:8]}", found[launch_id], None, None, launcher)


def _attach_log(study: optuna.Study, t: optuna.trial.FrozenTrial, artifacts: "Artifacts | None") -> None:
    if artifacts is None:
        return
    server = t.system_attrs.get(SERVER_KEY)
    log_path = server.get("log_path") if isinstance(server, dict) else None
    if log_path:
        try:
            artifacts.upload(t, str(log_path), storage=study._storage)
        except Exception:  # an artifact is a courtesy; recovery must go on
            pass


def recover(study: optuna.Study, launcher: Any = None, artifacts: "Artifacts | None" = None) -> list[str]:
    """Make the study whole after a tuner died (see the module docstring). `launcher`
    supplies the GPU probe and teardown timeouts (any object with ``probe``,
    ``term_timeout_s``, ... attributes; defaults otherwise). Returns log lines."""
    lines: list[str] = []
    host = socket.gethostname()
    trials = study.get_trials(deepcopy=False)
    mine = [(t, w) for t in trials if (w := _worker(t)) is not None and w.get("host") == host]
    found = find_launch_processes(w.get("launch_id") for _, w in mine)
    failed_now: list[optuna.trial.FrozenTrial] = []
    for t, worker in mine:
        if same_process(worker):
            continue  # a tuner still running (or this one): its trials are its own
        line = _stop_leftovers(t, worker, found, launcher)
        if line:
            lines.append(line)
        if t.state == _RUNNING:
            _attach_log(study, t, artifacts)
            if _fail(study, t, "stale", "the tuner stopped while this trial ran (killed, crashed or the host went down)"):
                failed_now.append(t)
                lines.append(f"trial {t.number} was running when the tuner stopped; failed it")
    for t in trials:
        if t.state == _RUNNING and _worker(t) is None and _age_s(t) > ORPHAN_AGE_S:
            if _fail(study, t, "orphaned", "the tuner stopped before it recorded itself on this trial"):
                failed_now.append(t)
                lines.append(f"trial {t.number} was left running without a tuner; failed it")
    lines += _ensure_retries(study, failed_now)
    return lines


def _ensure_retries(study: optuna.Study, failed_now: list[optuna.trial.FrozenTrial]) -> list[str]:
    """Every trial failed just now, and every FAIL trial autospec ran (also those an
    earlier crash left without a retry), gets one retry."""
    lines: list[str] = []
    trials = study.get_trials(deepcopy=False)
    just_failed = {t.number for t in failed_now}
    by_number = {t.number: t for t in trials}
    for t in trials:
        if t.state != _FAIL or (_worker(t) is None and t.number not in just_failed):
            continue
        if requeue(study, t, trials):
            lines.append(f"queued the parameters of trial {t.number} again: {_retry_params(t)}")
            trials = study.get_trials(deepcopy=False)
        elif t.number in just_failed and _stale_depth(by_number[t.number], by_number) > MAX_STALE_RETRIES:
            lines.append(
                f"not retrying the parameters of trial {t.number}: the tuner stopped while they ran "
                f"{MAX_STALE_RETRIES + 1} times in a row"
            )
    return lines


def fail_stale_heartbeats(study: optuna.Study) -> list[str]:
    """RDB storages: fail RUNNING trials whose heartbeat stopped (their tuner died, on any
    host) with Optuna's own check, and enqueue their parameters again. Log lines."""
    before = {t._trial_id for t in study.get_trials(deepcopy=False, states=(_RUNNING,))}
    if not before:
        return []
    optuna.storages.fail_stale_trials(study)
    failed = [t for t in study.get_trials(deepcopy=False, states=(_FAIL,)) if t._trial_id in before]
    lines = [f"trial {t.number}: its tuner stopped sending heartbeats; failed it" for t in failed]
    return lines + _ensure_retries(study, failed)


# ---------------------------------------------------------------- servers running now
class LiveServers:
    """Launch IDs of the servers this process runs now.

    `kill_now` SIGKILLs every process carrying one of them (its whole group when it leads
    one) without waiting; it is meant for a signal handler (a second Ctrl-C), so it takes
    no lock and does not print.
    """

    def __init__(self) -> None:
        self._ids: dict[str, None] = {}

    def add(self, launch_id: str) -> None:
        self._ids[launch_id] = None

    def discard(self, launch_id: str) -> None:
        self._ids.pop(launch_id, None)

    def clear(self) -> None:
        self._ids.clear()

    def ids(self) -> list[str]:
        return list(self._ids)

    def kill_now(self) -> list[int]:
        """SIGKILL the servers at once; returns the PIDs signalled."""
        killed: list[int] = []
        for procs in find_launch_processes(self.ids()).values():
            for pid, start in procs.items():
                info = read_proc(pid)
                if info is None or info.starttime != start:
                    continue
                try:
                    if info.pgid == pid:
                        os.killpg(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        return killed


LIVE_SERVERS = LiveServers()


# ---------------------------------------------------------------- what earlier trials taught
def replay(study: optuna.Study, gate: Any) -> None:
    """Teach the gate everything earlier trials showed."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        attrs = t.user_attrs
        resolved = attrs.get("resolved") or attrs.get("candidate") or {}
        if not attrs.get("launched"):
            continue
        outcome = attrs.get("outcome")
        constraints = {k: v for k, v in t.constraints.items() if k != "feasible" and not k.isdigit()}
        bench = {int(k): v for k, v in (attrs.get("bench") or {}).items()}
        measured = outcome in ("ok", "constraint_violated")
        gate.remember(t.number, resolved, list(t.values) if measured else None, constraints, bench)
        if outcome in LAUNCH_FAILURES:
            gate.learn_failure(resolved, outcome)
        elif measured:
            gate.learn_success(resolved, attrs.get("startup") or {})


# ---------------------------------------------------------------- files beside the storage
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

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.store = optuna.artifacts.FileSystemArtifactStore(str(base))

    def upload(self, trial: optuna.Trial | optuna.trial.FrozenTrial, log_path: str, storage: Any = None) -> None:
        """Attach the files next to `log_path` to a trial that is still RUNNING (a
        FrozenTrial needs its `storage`)."""
        folder = Path(log_path).parent
        for name, mimetype in (("server.log", "text/plain"), ("bench.json", "application/json")):
            path = folder / name
            if path.is_file():
                optuna.artifacts.upload_artifact(
                    artifact_store=self.store, file_path=str(path), study_or_trial=trial, mimetype=mimetype,
                    storage=storage,
                )
