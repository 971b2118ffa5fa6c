"""The stop policy for Ctrl-C, SIGTERM and SIGHUP while a study runs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from autospec.study.leftovers import LiveServers

__all__ = ["StopSignals"]


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
