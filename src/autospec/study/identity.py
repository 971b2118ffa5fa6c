"""Who is who across tuner runs: the identity of a tuner and of the servers it launched.

Never by name. A process is a PID plus its creation time on one host (a PID with another
creation time is another process). Before a trial launches anything the tuner records
itself on the trial (`this_worker`: host, PID, creation time, and a random *launch ID*);
the launch ID is given to the server in the environment variable ``AUTOSPEC_LAUNCH_ID``,
which every process of the server inherits, children that left its process group with
``setsid()`` included. Right after the spawn the server's own identity is recorded
(`server_record`). A process counts as a trial's server only if it runs on this host with
the recorded creation time and either carries the trial's launch ID or still has the
recorded command line.

Records written before schema 2 hold ``start_time`` in clock ticks since boot (from
``/proc/<pid>/stat``); they are converted the way psutil derives creation times.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import psutil

from autospec.launcher.proctree import is_alive, read_cmdline, read_proc, same_start

__all__ = [
    "LAUNCH_ID_ENV", "HOST_ENV", "host_name", "new_launch_id", "this_worker", "server_record", "recorded_start",
    "is_same_process", "find_launch_processes", "launch_id_of",
]

LAUNCH_ID_ENV = "AUTOSPEC_LAUNCH_ID"
HOST_ENV = "AUTOSPEC_HOST"  # overrides the host name a worker records (several "hosts" on one machine, in tests)


def host_name() -> str:
    """The host this tuner records on its trials: ``$AUTOSPEC_HOST``, else the host name.
    Trials of another host are never checked by process identity, only by heartbeat."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def new_launch_id() -> str:
    """A fresh random ID for one trial's server processes."""
    return uuid.uuid4().hex


def _create_time(pid: int) -> float | None:
    """Creation time of a running (non-zombie) `pid`, or None."""
    info = read_proc(pid)
    return info.starttime if info is not None and is_alive(pid, info.starttime) else None


def this_worker(launch_id: str | None = None) -> dict[str, Any]:
    """The identity of this tuner process for one trial."""
    pid = os.getpid()
    record: dict[str, Any] = {"host": host_name(), "pid": pid, "create_time": _create_time(pid)}
    if launch_id:
        record["launch_id"] = launch_id
    return record


def server_record(pid: int, pgid: int, port: int | None, log_path: str | None) -> dict[str, Any]:
    """What is stored about a launched server so a later run can stop it safely."""
    return {
        "host": host_name(),
        "pid": pid,
        "pgid": pgid,
        "port": port,
        "create_time": _create_time(pid),
        "cmdline": read_cmdline(pid),
        "log_path": log_path,
        "recorded_at": time.time(),
    }


def recorded_start(record: Mapping[str, Any]) -> float | None:
    """The creation time a record names (schema 1 clock ticks converted), or None."""
    value = record.get("create_time")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    ticks = record.get("start_time")
    if isinstance(ticks, int) and not isinstance(ticks, bool):
        return ticks / os.sysconf("SC_CLK_TCK") + psutil.boot_time()
    return None


def launch_id_of(pid: int) -> str | None:
    """The launch ID in a process's environment, or None (none, gone, or not ours to read)."""
    try:
        return psutil.Process(pid).environ().get(LAUNCH_ID_ENV)
    except (psutil.Error, OSError):
        return None


def is_same_process(record: Mapping[str, Any] | None, launch_id: str | None = None) -> bool:
    """True when the recorded process still runs on this host and is the very same one:
    same PID and creation time, and (for a server record) the same command line or the
    trial's launch ID."""
    if not isinstance(record, Mapping) or record.get("host") != host_name():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not same_start(_create_time(pid), recorded_start(record)):
        return False
    if "cmdline" not in record:  # a worker record: PID + creation time is the identity
        return True
    return read_cmdline(pid) == record.get("cmdline") or (launch_id is not None and launch_id_of(pid) == launch_id)


def find_launch_processes(launch_ids: Iterable[str | None]) -> dict[str, dict[int, float]]:
    """Running processes of this host that carry one of `launch_ids` in their environment:
    launch ID -> {pid: creation time}. Zombies and this process are left out."""
    wanted = {i for i in launch_ids if i}
    found: dict[str, dict[int, float]] = {}
    if not wanted:
        return found
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        launch_id = launch_id_of(proc.pid)
        if launch_id in wanted:
            start = _create_time(proc.pid)
            if start is not None:
                found.setdefault(launch_id, {})[proc.pid] = start
    return found
