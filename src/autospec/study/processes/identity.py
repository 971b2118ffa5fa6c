"""Who is who across tuner runs: the identity of a tuner and of the servers it launched.

Never by name. A process is a PID plus its start time on one host (a PID with another
start time is another process). Before a trial launches anything the tuner records
itself on the trial (`this_worker`: host, PID, start time, and a random *launch ID*);
the launch ID is given to the server in the environment variable ``AUTOSPEC_LAUNCH_ID``,
which every process of the server inherits, children that left its process group with
``setsid()`` included. Right after the spawn the server's own identity is recorded
(`server_record`). A process counts as a trial's server only if it runs on this host with
the recorded start time and either carries the trial's launch ID or still has the
recorded command line.

A start is recorded as ``start_s`` (seconds since boot, `proctree.ProcInfo.starttime`) with
the ``boot_id`` it was read on. Older records hold ``create_time`` (psutil's epoch seconds,
which move with the wall clock) or, before schema 2, ``start_time`` (clock ticks since
boot); both are converted.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import psutil

from autospec.launcher.proctree import boot_id, is_alive, read_cmdline, read_proc, same_start

__all__ = [
    "LAUNCH_ID_ENV",
    "HOST_ENV",
    "host_name",
    "new_launch_id",
    "this_worker",
    "server_record",
    "recorded_start",
    "is_same_process",
    "find_launch_processes",
    "launch_id_of",
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


def _start(pid: int) -> float | None:
    """The start of a running (non-zombie) `pid` (`proctree`'s clock), or None."""
    info = read_proc(pid)
    return info.starttime if info is not None and is_alive(pid, info.starttime) else None


INVOCATION_ENV = "AUTOSPEC_INVOCATION"


def invocation_id() -> str:
    """One id per `autospec optimize` command: the slot workers it starts inherit it
    through the environment (``AUTOSPEC_INVOCATION``); set on first use."""
    if not os.environ.get(INVOCATION_ENV):
        os.environ[INVOCATION_ENV] = uuid.uuid4().hex
    return os.environ[INVOCATION_ENV]


def this_worker(launch_id: str | None = None) -> dict[str, Any]:
    """The identity of this tuner process for one trial (with the command's `invocation_id`)."""
    pid = os.getpid()
    record: dict[str, Any] = {"host": host_name(), "pid": pid, "start_s": _start(pid), "boot_id": boot_id()}
    record["invocation"] = invocation_id()
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
        "start_s": _start(pid),
        "boot_id": boot_id(),
        "cmdline": read_cmdline(pid),
        "log_path": log_path,
        "recorded_at": time.time(),
    }


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def recorded_start(record: Mapping[str, Any]) -> float | None:
    """The start a record names, on `proctree`'s clock; None when it names none or was
    recorded on another boot. Older records' starts are converted (see the module docstring;
    an epoch ``create_time`` to within the second the wall clock may have moved since)."""
    start, created, ticks = (_number(record.get(key)) for key in ("start_s", "create_time", "start_time"))
    if start is not None:
        return start if record.get("boot_id") == boot_id() else None
    if created is not None:
        return created - psutil.boot_time()
    return ticks / os.sysconf("SC_CLK_TCK") if ticks is not None else None


def launch_id_of(pid: int) -> str | None:
    """The launch ID in a process's environment, or None (none, gone, or not ours to read)."""
    try:
        return psutil.Process(pid).environ().get(LAUNCH_ID_ENV)
    except (psutil.Error, OSError):
        return None


def is_same_process(record: Mapping[str, Any] | None, launch_id: str | None = None) -> bool:
    """True when the recorded process still runs on this host and is the very same one:
    same PID and start, and (for a server record) the same command line or the
    trial's launch ID."""
    if not isinstance(record, Mapping) or record.get("host") != host_name():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not same_start(_start(pid), recorded_start(record)):
        return False
    if "cmdline" not in record:  # a worker record: PID + start is the identity
        return True
    return read_cmdline(pid) == record.get("cmdline") or (launch_id is not None and launch_id_of(pid) == launch_id)


def find_launch_processes(launch_ids: Iterable[str | None]) -> dict[str, dict[int, float]]:
    """Running processes of this host that carry one of `launch_ids` in their environment:
    launch ID -> {pid: start}. Zombies and this process are left out."""
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
            start = _start(proc.pid)
            if start is not None:
                found.setdefault(launch_id, {})[proc.pid] = start
    return found
