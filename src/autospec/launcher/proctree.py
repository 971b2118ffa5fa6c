"""Processes of one server, found through Linux ``/proc``.

A server is its root process plus everything it starts. Most of that stays in the root's
process group and session, but a child that calls ``setsid()`` leaves both and is then
known only by its parent link (and once its parent is gone, not even by that). So
:class:`ProcessTracker` remembers every process it has ever seen belonging to the server,
keyed by PID *and* start time (so a recycled PID is never mistaken for it), and the
launcher refreshes it every tick while the server runs and again at stop.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["ProcInfo", "read_proc", "scan_procs", "is_alive", "read_cmdline", "ProcessTracker"]

_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcInfo:
    """The fields of ``/proc/<pid>/stat`` the tracker needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    starttime: int

    @property
    def zombie(self) -> bool:
        """Exited but not yet reaped: holds no memory and no ports; counts as gone."""
        return self.state in ("Z", "X")


def read_proc(pid: int) -> ProcInfo | None:
    """``/proc/<pid>/stat`` parsed, or None when there is no such process."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcInfo(
            pid=pid,
            state=fields[0],
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            starttime=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def scan_procs() -> dict[int, ProcInfo]:
    """Every process visible in ``/proc`` now."""
    out: dict[int, ProcInfo] = {}
    try:
        names = os.listdir(_PROC)
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            info = read_proc(int(name))
            if info is not None:
                out[info.pid] = info
    return out


def _other_threads_run(pid: int) -> bool:
    """True when a thread of ``pid`` still runs although its main thread has exited.

    ``/proc/<pid>/stat`` shows the main thread only: a multi-threaded process whose main
    thread exited reads as a zombie while its other threads (and its memory) live on.
    """
    try:
        tids = os.listdir(_PROC / str(pid) / "task")
    except OSError:
        return False
    for tid in tids:
        try:
            raw = (_PROC / str(pid) / "task" / tid / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        if fields and fields[0] not in ("Z", "X"):
            return True
    return False


def is_alive(pid: int, starttime: int | None = None) -> bool:
    """True while ``pid`` runs (not a zombie) and, if given, still has that start time."""
    info = read_proc(pid)
    if info is None or (info.zombie and not _other_threads_run(pid)):
        return False
    return starttime is None or info.starttime == starttime


def read_cmdline(pid: int) -> str:
    """The process's command line, space-joined ('' when gone or unreadable)."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


class ProcessTracker:
    """Every process seen belonging to one server: its group, its session, its descendants.

    Thread-safe. ``refresh()`` adds what it finds and never forgets; ``alive()`` lists the
    remembered processes that still run (a recycled PID does not count).
    """

    def __init__(self, root_pid: int, pgid: int | None = None, sid: int | None = None,
                 extra_pids: Iterable[int] | Mapping[int, int | None] = ()) -> None:
        """``extra_pids``: more processes of the server, as PIDs or PID -> start time.

        A root whose process group is no longer ``pgid`` is not the server any more (its
        PID was recycled) and is not remembered.
        """
        self.root_pid = root_pid
        self.pgid = root_pid if pgid is None else pgid
        self.sid = sid
        self._lock = threading.Lock()
        self._known: dict[int, int | None] = {}
        root = read_proc(root_pid)
        if root is not None and root.pgid == self.pgid:
            self._known[root_pid] = root.starttime
        extra = extra_pids if isinstance(extra_pids, Mapping) else dict.fromkeys(extra_pids)
        for pid, start in extra.items():
            if start is None:
                info = read_proc(pid)
                start = info.starttime if info else None
            self._known[int(pid)] = start

    def refresh(self) -> None:
        """Scan ``/proc`` once and remember new members of the server."""
        procs = scan_procs()
        with self._lock:
            changed = True
            while changed:
                changed = False
                for info in procs.values():
                    if info.pid in self._known:
                        if self._known[info.pid] is None:
                            self._known[info.pid] = info.starttime
                        continue
                    if self._belongs(info, procs):
                        self._known[info.pid] = info.starttime
                        changed = True

    def _belongs(self, info: ProcInfo, procs: dict[int, ProcInfo]) -> bool:
        if info.pgid == self.pgid or (self.sid is not None and info.sid == self.sid):
            return True
        parent = procs.get(info.ppid)
        return (
            parent is not None
            and parent.pid in self._known
            and self._known[parent.pid] in (None, parent.starttime)
        )

    def known(self) -> dict[int, int | None]:
        """PID -> start time of everything ever seen (start time None if never read)."""
        with self._lock:
            return dict(self._known)

    def alive(self) -> list[int]:
        """The remembered PIDs that still run as the same process."""
        return sorted(pid for pid, start in self.known().items() if is_alive(pid, start))
