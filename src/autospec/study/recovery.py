"""Making a study whole again after the tuner died, and its durable side files.

- `recover`: RUNNING trials whose tuner process is gone (same host, PID dead or reused)
  are failed and their parameters enqueued again; the server each of them launched is
  stopped if it is still running *and* is the same process (PID, start time and command
  line all match, never by name). Works for every storage, journal files included.
- `replay`: feeds earlier trials to the feasibility gate (learned failures, KV capacity,
  measurements for dedup), so a resumed study knows what the first run learned.
- `EventLog`: one line per trial outcome beside the storage.
- `Artifacts`: server log and benchmark JSON per trial in an Optuna artifact store.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, Mapping

import optuna

from autospec.launcher import stop_process_group
from autospec.study.records import LAUNCH_FAILURES, SERVER_KEY, WORKER_KEY

__all__ = ["recover", "replay", "this_worker", "server_record", "EventLog", "Artifacts", "process_start_time"]


def process_start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19])


def _cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def this_worker() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start_time": process_start_time(pid)}


def server_record(info: Mapping[str, Any]) -> dict[str, Any]:
    """What is stored about a launched server so a later run can stop it safely."""
    pid = int(info["pid"])
    return {
        "host": socket.gethostname(),
        "pid": pid,
        "pgid": int(info.get("pgid", pid)),
        "port": info.get("port"),
        "start_time": process_start_time(pid),
        "cmdline": _cmdline(pid),
        "recorded_at": time.time(),
    }


def _alive_same(record: Mapping[str, Any]) -> bool:
    """True when the recorded process still runs here and is the very same process."""
    if record.get("host") != socket.gethostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int):
        return False
    start = process_start_time(pid)
    return start is not None and start == record.get("start_time") and _cmdline(pid) == record.get("cmdline")


def recover(study: optuna.Study, probe: Any) -> list[str]:
    """Fail and re-enqueue trials orphaned by a dead tuner; stop their servers. Returns log lines."""
    lines: list[str] = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = t.system_attrs.get(WORKER_KEY)
        if not isinstance(worker, dict) or worker.get("host") != socket.gethostname():
            continue  # another host's trial: heartbeats (RDB storages) handle it
        if _alive_same(worker):
            continue  # a tuner still running this trial
        server = t.system_attrs.get(SERVER_KEY)
        if isinstance(server, dict) and _alive_same(server):
            report = stop_process_group(
                server["pgid"], {server["pid"]: server["start_time"]}, probe=probe, port=server.get("port"),
            )
            lines.append(
                f"stopped leftover server of trial {t.number} (pid {server['pid']}) in {report.seconds:.1f}s"
            )
        study._storage.set_trial_user_attr(t._trial_id, "outcome", "stale")
        study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(dict(t.params), user_attrs={"retry_of": t.number})
        lines.append(f"trial {t.number} was running when the tuner stopped; failed it and queued its parameters again")
    return lines


def replay(study: optuna.Study, gate: Any) -> None:
    """Teach the gate everything earlier trials showed."""
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        attrs = t.user_attrs
        resolved = attrs.get("resolved") or attrs.get("candidate") or {}
        if not attrs.get("launched"):
            continue
        outcome = attrs.get("outcome")
        if outcome in LAUNCH_FAILURES:
            gate.learn_failure(resolved, outcome)
            continue
        startup = attrs.get("startup") or {}
        gate.learn_success(resolved, startup)
        if outcome in ("ok", "constraint_violated"):
            constraints = {k: v for k, v in t.constraints.items() if k != "feasible" and not k.isdigit()}
            bench = {int(k): v for k, v in (attrs.get("bench") or {}).items()}
            gate.remember(t.number, resolved, list(t.values), constraints, bench)


class EventLog:
    """Append-only text log of the study, one timestamped line per event."""

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

    def upload(self, trial: optuna.Trial, log_path: str) -> None:
        folder = Path(log_path).parent
        for name, mimetype in (("server.log", "text/plain"), ("bench.json", "application/json")):
            path = folder / name
            if path.is_file():
                optuna.artifacts.upload_artifact(
                    artifact_store=self.store, file_path=str(path), study_or_trial=trial, mimetype=mimetype,
                )
