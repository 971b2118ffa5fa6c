"""Processes of one server, found with psutil.

A server is its root process plus everything it starts. Most of that stays in the root's
process group and session, but a child that calls ``setsid()`` leaves both and is then
known only by its parent link (and once its parent is gone, not even by that). So
:class:`ProcessTracker` remembers every process it has ever seen belonging to the server,
keyed by PID *and* creation time (so a recycled PID is never mistaken for it), and the
launcher refreshes it every tick while the server runs and again at stop.

A process's start (`ProcInfo.starttime`) is read on Linux as seconds since boot
from the clock ticks in ``/proc/<pid>/stat``, not as psutil's ``create_time()``: psutil
(7.2) adds to those ticks the boot time from ``/proc/stat``'s ``btime``, whole seconds
that the kernel derives from the wall clock, so when the clock is slewed or stepped two
processes read the same start a second (or more) apart, and a live process looks like
another one. Readings of one process on one boot are equal; `same_start` compares them
with the clock-tick resolution, and `boot_id` tells boots apart.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import psutil

__all__ = [
    "ProcInfo",
    "read_proc",
    "scan_procs",
    "is_alive",
    "read_cmdline",
    "same_start",
    "boot_id",
    "ProcessTracker",
]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A start is known to one clock tick (1/100 s on Linux); readings of one process agree.
_START_TOLERANCE_S = 2.0 / _CLOCK_TICKS
_PROCFS = os.path.isdir("/proc/self")


def _start_of(proc: psutil.Process) -> float:
    """When `proc` started, on a clock the wall clock cannot move: seconds since boot on
    Linux (``/proc/<pid>/stat`` field 22), psutil's creation time elsewhere. Raises
    `psutil.NoSuchProcess` when it is gone."""
    if not _PROCFS:
        return proc.create_time()
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        raise psutil.NoSuchProcess(proc.pid) from None
    return int(stat.rpartition(b")")[2].split()[19]) / _CLOCK_TICKS


def boot_id() -> str | None:
    """This boot's random ID (Linux), so that a start recorded on an earlier boot is never
    taken for a process of this one; None where there is none."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class ProcInfo:
    """What the tracker needs to know of one process."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    status: str  # psutil.STATUS_*
    starttime: float  # `_start_of`: seconds since boot (Linux)

    @property
    def zombie(self) -> bool:
        """Exited but not yet reaped: holds no memory and no ports; counts as gone."""
        return self.status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def same_start(a: float | None, b: float | None) -> bool:
    """True when two creation times name the same process start."""
    return a is not None and b is not None and abs(float(a) - float(b)) <= _START_TOLERANCE_S


def _info(proc: psutil.Process) -> ProcInfo | None:
    try:
        with proc.oneshot():
            return ProcInfo(
                pid=proc.pid,
                ppid=proc.ppid(),
                pgid=os.getpgid(proc.pid),
                sid=os.getsid(proc.pid),
                status=proc.status(),
                starttime=_start_of(proc),
            )
    except (psutil.Error, OSError):
        return None


def read_proc(pid: int) -> ProcInfo | None:
    """The process ``pid`` now, or None when there is no such process."""
    try:
        return _info(psutil.Process(pid))
    except psutil.Error:
        return None


def scan_procs() -> dict[int, ProcInfo]:
    """Every process visible now."""
    out: dict[int, ProcInfo] = {}
    for proc in psutil.process_iter():
        info = _info(proc)
        if info is not None:
            out[info.pid] = info
    return out


def _other_threads_run(pid: int) -> bool:
    """True when a thread of ``pid`` still runs although its main thread has exited: such a
    process reads as a zombie while its other threads (and its memory) live on."""
    try:
        threads = psutil.Process(pid).threads()
    except psutil.Error:
        return False
    for thread in threads:
        if thread.id == pid:
            continue
        try:
            if psutil.Process(thread.id).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return True
        except psutil.Error:
            continue
    return False


def is_alive(pid: int, starttime: float | None = None) -> bool:
    """True while ``pid`` runs (not a zombie) and, if given, still has that creation time."""
    info = read_proc(pid)
    if info is None or (info.zombie and not _other_threads_run(pid)):
        return False
    return starttime is None or same_start(info.starttime, starttime)


def read_cmdline(pid: int) -> str:
    """The process's command line, space-joined ('' when gone or unreadable)."""
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return ""


class ProcessTracker:
    """Every process seen belonging to one server: its group, its session, its descendants.

    Thread-safe. ``refresh()`` adds what it finds and never forgets; ``alive()`` lists the
    remembered processes that still run (a recycled PID does not count).
    """

    def __init__(
        self,
        root_pid: int,
        pgid: int | None = None,
        sid: int | None = None,
        extra_pids: Iterable[int] | Mapping[int, float | None] = (),
    ) -> None:
        """``extra_pids``: more processes of the server, as PIDs or PID -> creation time.

        A root whose process group is no longer ``pgid`` is not the server any more (its
        PID was recycled) and is not remembered.
        """
        self.root_pid = root_pid
        self.pgid = root_pid if pgid is None else pgid
        self.sid = sid
        self._lock = threading.Lock()
        self._known: dict[int, float | None] = {}
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
        """Scan the process table once and remember new members of the server."""
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
        if parent is None or parent.pid not in self._known:
            return False
        recorded = self._known[parent.pid]
        return recorded is None or same_start(recorded, parent.starttime)

    def known(self) -> dict[int, float | None]:
        """PID -> creation time of everything ever seen (None if never read)."""
        with self._lock:
            return dict(self._known)

    def alive(self) -> list[int]:
        """The remembered PIDs that still run as the same process."""
        return sorted(pid for pid, start in self.known().items() if is_alive(pid, start))
