"""Stop a server completely: every process gone, its GPU memory back, its port free.

Guarantees of :func:`stop_process_group`, each step bounded by its own timeout:

1. SIGTERM to the process group and to every remembered process outside it (children
   that called ``setsid()``), found through :class:`~autospec.launcher.proctree.ProcessTracker`.
2. Wait up to ``term_timeout_s`` until all of them are gone (zombies count as gone: an
   exited process holds no memory), discovering new descendants while waiting.
3. Otherwise SIGKILL to the group and to each survivor; wait up to ``kill_timeout_s``.
   Whatever still runs then is listed in ``leftover_pids``.
4. With a probe that sees memory: wait up to ``gpu_free_timeout_s`` until the probe lists
   none of the stopped PIDs and, given a pre-launch baseline, every GPU is back to it
   within ``gpu_tolerance_mb``.
5. Wait up to ``port_free_timeout_s`` until the HTTP port can be bound again.

Nothing raises: the :class:`TeardownReport` says what was reached, and the seconds spent.
The one exception is KeyboardInterrupt while waiting (a second Ctrl-C or SIGTERM during
teardown): then everything is SIGKILLed at once, briefly waited for, and the interrupt
propagates.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

from autospec.launcher.ports import wait_port_free
from autospec.launcher.probes import GpuProbe, GpuSnapshot, ProbeUnavailable, memory_returned
from autospec.launcher.proctree import ProcessTracker

__all__ = ["TeardownReport", "stop_process_group", "DEFAULT_GPU_TOLERANCE_MB"]

DEFAULT_GPU_TOLERANCE_MB = 512.0
_POLL_S = 0.05


@dataclass(frozen=True)
class TeardownReport:
    """What stopping a server achieved.

    ``signal_sent`` is the strongest signal sent ("TERM" or "KILL");
    ``gpu_memory_released`` is None when no probe could see GPU memory;
    ``stopped_pids`` are all processes of the server that teardown knew of.
    """

    seconds: float
    signal_sent: str
    killed_after_timeout: bool
    leftover_pids: tuple[int, ...]
    gpu_memory_released: bool | None
    gpu_wait_seconds: float
    port_released: bool
    stopped_pids: tuple[int, ...] = ()
    processes_seconds: float = 0.0
    # Per-process GPU memory (MiB) from the probe, when it lists processes: what the
    # server's own processes held before the stop, and what every other process held
    # before and after it (on a shared GPU the latter two should match: the teardown
    # freed only its own server's memory).
    gpu_own_mb: float | None = None
    gpu_others_mb_before: float | None = None
    gpu_others_mb_after: float | None = None

    @property
    def clean(self) -> bool:
        """True when nothing is left: no process, no memory held (or unknown), port free."""
        return not self.leftover_pids and self.gpu_memory_released is not False and self.port_released

    def as_dict(self) -> dict:
        data = asdict(self)
        data["leftover_pids"] = list(self.leftover_pids)
        data["stopped_pids"] = list(self.stopped_pids)
        return data


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _kill_all(pgid: int, tracker: ProcessTracker) -> None:
    _signal_group(pgid, signal.SIGKILL)
    for pid in tracker.alive():
        _signal_pid(pid, signal.SIGKILL)


def _wait_gone(tracker: ProcessTracker, timeout_s: float, reap: Callable[[], object] | None) -> list[int]:
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        if reap is not None:
            reap()
        tracker.refresh()
        alive = tracker.alive()
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(_POLL_S)


def _wait_gpu(
    probe: GpuProbe, pids: set[int], baseline: GpuSnapshot | None, tolerance_mb: float, timeout_s: float
) -> bool | None:
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        try:
            now = probe.snapshot()
        except ProbeUnavailable:
            return None
        if not (now.pids & pids) and (baseline is None or memory_returned(now, baseline, tolerance_mb)):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def _split_memory(probe: GpuProbe | None, pids: set[int]) -> tuple[float, float] | None:
    """(MiB held by `pids`, MiB held by every other process) from the probe's process list,
    or None when it cannot say."""
    if probe is None or not probe.observes_memory:
        return None
    try:
        snapshot = probe.snapshot()
    except ProbeUnavailable:
        return None
    own = sum(p.mem_mb for p in snapshot.processes if p.pid in pids)
    return round(own, 1), round(sum(p.mem_mb for p in snapshot.processes) - own, 1)


def stop_process_group(
    pgid: int,
    pids: Iterable[int] | Mapping[int, int | None] = (),
    *,
    probe: GpuProbe | None = None,
    term_timeout_s: float = 30.0,
    kill_timeout_s: float = 10.0,
    gpu_free_timeout_s: float = 60.0,
    port_free_timeout_s: float = 30.0,
    host: str = "127.0.0.1",
    port: int | None = None,
    gpu_baseline: GpuSnapshot | None = None,
    gpu_tolerance_mb: float = DEFAULT_GPU_TOLERANCE_MB,
    tracker: ProcessTracker | None = None,
    reap: Callable[[], object] | None = None,
) -> TeardownReport:
    """Stop the group ``pgid`` plus ``pids`` (and their descendants) as described above.

    Usable for leftovers of earlier runs: pass the PGID and the PIDs recorded at spawn,
    ideally as PID -> start time (``proctree.read_proc(pid).starttime``) so that a PID the
    system has since given to another process is not signalled.
    ``reap`` (e.g. ``Popen.poll``) is called while waiting so a direct child is reaped.
    """
    started = time.monotonic()
    if tracker is None:
        tracker = ProcessTracker(pgid, pgid=pgid, extra_pids=pids)
    signal_sent = "TERM"
    killed_after_timeout = False
    try:
        tracker.refresh()
        before = _split_memory(probe, set(tracker.known()))
        _signal_group(pgid, signal.SIGTERM)
        for pid in tracker.alive():
            _signal_pid(pid, signal.SIGTERM)
        alive = _wait_gone(tracker, term_timeout_s, reap)
        if alive:
            signal_sent = "KILL"
            killed_after_timeout = True
            _kill_all(pgid, tracker)
            alive = _wait_gone(tracker, kill_timeout_s, reap)
    except KeyboardInterrupt:
        # Interrupted while waiting (a second Ctrl-C / SIGTERM): do not leave the server
        # half-stopped; kill everything now, wait briefly, then let the interrupt go on.
        _kill_all(pgid, tracker)
        _wait_gone(tracker, kill_timeout_s, None)
        raise
    processes_seconds = time.monotonic() - started

    stopped = set(tracker.known())
    gpu_started = time.monotonic()
    released: bool | None = None
    if probe is not None and probe.observes_memory:
        released = _wait_gpu(probe, stopped, gpu_baseline, gpu_tolerance_mb, gpu_free_timeout_s)
    gpu_wait_seconds = time.monotonic() - gpu_started

    after = _split_memory(probe, stopped) if before is not None else None
    port_released = True if port is None else wait_port_free(host, port, port_free_timeout_s)
    return TeardownReport(
        seconds=round(time.monotonic() - started, 3),
        signal_sent=signal_sent,
        killed_after_timeout=killed_after_timeout,
        leftover_pids=tuple(alive),
        gpu_memory_released=released,
        gpu_wait_seconds=round(gpu_wait_seconds, 3),
        port_released=port_released,
        stopped_pids=tuple(sorted(stopped)),
        processes_seconds=round(processes_seconds, 3),
        gpu_own_mb=before[0] if before else None,
        gpu_others_mb_before=before[1] if before else None,
        gpu_others_mb_after=after[1] if after else None,
    )
