"""Stopping servers that outlived their trial, and killing this run's servers at once.

- `stop_trial_leftovers`: what is left of a trial's server after its tuner died: every
  process carrying the trial's launch ID, plus the recorded leader when it is verified
  (`identity.is_same_process`).
- `stop_stragglers`: after a trial's own teardown, any process still carrying its launch ID.
- `LiveServers`: the launch IDs of the servers this run has up now, so that a second stop
  signal can SIGKILL them from the signal handler.

Both stops go through the launcher's teardown (TERM to the group and each process, KILL
after a timeout, then wait for GPU memory and the port) and return one log line.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping

from autospec.launcher import Launcher, stop_process_group
from autospec.launcher.proctree import read_proc, same_start
from autospec.study.processes.identity import find_launch_processes, is_same_process, recorded_start

__all__ = ["LEFTOVER_TERM_TIMEOUT_S", "stop_trial_leftovers", "stop_stragglers", "stop_processes", "LiveServers", "StopSignals"]

# TERM grace for a leftover server before KILL. Its log reader (the dead tuner) is gone, so
# it may fail on its next log write instead of shutting down (the simulator does); KILL
# reaches every process of it, and the GPU memory is then waited for as in a teardown.
LEFTOVER_TERM_TIMEOUT_S = 2.0


def stop_processes(
    what: str,
    procs: Mapping[int, float],
    leader: int | None,
    port: int | None,
    launcher: Launcher,
    term_timeout_s: float | None = None,
) -> str:
    """Stop the verified `procs` (pid -> creation time) and the group of `leader` (a
    verified group leader; else the lowest PID among them that leads a group). A line."""
    if leader is None:
        leaders = [pid for pid in procs if (info := read_proc(pid)) is not None and info.pgid == pid]
        leader = min(leaders or procs)
    report = stop_process_group(
        leader,
        dict(procs),
        probe=launcher.probe,
        term_timeout_s=min(launcher.term_timeout_s, term_timeout_s or float("inf")),
        kill_timeout_s=launcher.kill_timeout_s,
        gpu_free_timeout_s=launcher.gpu_free_timeout_s,
        port_free_timeout_s=launcher.port_free_timeout_s,
        port=port,
    )
    pids = ", ".join(str(p) for p in sorted(procs))
    gpu = {True: "GPU memory released", False: "GPU memory still held", None: "GPU memory not observable"}[
        report.gpu_memory_released
    ]
    left = f"; still running: {list(report.leftover_pids)}" if report.leftover_pids else ""
    return f"stopped {what} (pids {pids}) with {report.signal_sent} in {report.seconds:.1f}s; {gpu}{left}"


def stop_trial_leftovers(
    number: int,
    worker: Mapping[str, object],
    server: Mapping[str, object] | None,
    found: Mapping[str, Mapping[int, float]],
    launcher: Launcher,
) -> str | None:
    """Stop the verified processes of trial `number`'s server; a log line, or None when
    none runs. `found` is `identity.find_launch_processes` over the trials' launch IDs."""
    launch_id = worker.get("launch_id")
    launch_id = launch_id if isinstance(launch_id, str) else None
    procs: dict[int, float] = dict(found.get(launch_id, {})) if launch_id else {}
    leader = None
    port = None
    if server is not None:
        recorded_port = server.get("port")
        port = recorded_port if isinstance(recorded_port, int) else None
        start = recorded_start(server)
        pid = server.get("pid")
        if isinstance(pid, int) and start is not None and is_same_process(server, launch_id):
            procs[pid] = start
            leader = pid
    if not procs:
        return None
    return stop_processes(
        f"leftover server of trial {number}", procs, leader, port, launcher, term_timeout_s=LEFTOVER_TERM_TIMEOUT_S
    )


def stop_stragglers(launch_id: str, launcher: Launcher) -> str | None:
    """After a trial's own teardown (or an interrupted launch): stop any process still
    carrying its launch ID. A log line, or None when none runs."""
    found = find_launch_processes([launch_id])
    if not found:
        return None
    return stop_processes(f"stray processes of launch {launch_id[:8]}", found[launch_id], None, None, launcher)


class LiveServers:
    """Launch IDs of the servers a study run has up now.

    `kill_now` SIGKILLs every process carrying one of them (its whole group when it leads
    one) without waiting; it is meant for a signal handler (a second stop signal), so it
    takes no lock and does not print.
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
                if info is None or not same_start(info.starttime, start):
                    continue
                try:
                    if info.pgid == pid:
                        os.killpg(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except (ProcessLookupError, PermissionError):
                    pass
        return killed


class StopSignals:
    """The stop policy of one study run, shared by the CLI's signal handler (`handle`) and
    the run (`deferred`, `count`).

    - First signal: KeyboardInterrupt now, so the current trial's server is torn down
      (TERM, KILL after a timeout, wait for GPU memory and port) and the trial recorded
      as FAIL "interrupted" and queued again. Inside a `deferred()` block (a storage
      write) the interrupt is raised when the block ends instead, so a write is never cut.
    - Second and later signals: every server of the run (`live_servers`) is SIGKILLed at
      once, then KeyboardInterrupt now, deferred or not.

    Without a handler that calls `handle` (library use) Python's default SIGINT applies.
    """

    def __init__(self, live_servers: LiveServers | None = None) -> None:
        self.live_servers = live_servers if live_servers is not None else LiveServers()
        self.active = False  # a study run is in progress (set by StudyRun.run)
        self.count = 0
        self._depth = 0
        self._pending = False

    def reset(self) -> None:
        self.count, self._depth, self._pending = 0, 0, False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Mark a study run as in progress for its duration (fresh counts at the start)."""
        self.reset()
        self.active = True
        try:
            yield
        finally:
            self.active = False
            self.live_servers.clear()

    def handle(self, signum: int) -> None:
        self.count += 1
        if self.count >= 2:
            self.live_servers.kill_now()
        elif self._depth:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0 and self._pending:
            self._pending = False
            raise KeyboardInterrupt
