"""The stop policy for Ctrl-C, SIGTERM and SIGHUP while a study runs."""

from __future__ import annotations

import contextlib
from typing import Iterator

from autospec.study import recovery

__all__ = ["StopSignals", "STOP_SIGNALS"]


class StopSignals:
    """The stop policy for Ctrl-C, SIGTERM and SIGHUP, shared by the CLI's signal handler
    (`handle`) and the loop (`deferred`).

    - First signal: KeyboardInterrupt now, so the current trial's server is torn down
      (TERM, KILL after a timeout, wait for GPU memory and port) and the trial recorded
      as FAIL "interrupted" and queued again. Inside a `deferred()` block (a storage
      write) the interrupt is raised when the block ends instead, so a write is never cut.
    - Second and later signals: every server of this process is SIGKILLed at once
      (`recovery.LIVE_SERVERS.kill_now`), then KeyboardInterrupt now, deferred or not.

    Without the CLI's handler (library use) Python's default SIGINT handler applies.
    """

    def __init__(self) -> None:
        self.count = 0
        self._depth = 0
        self._pending = False

    def reset(self) -> None:
        self.count, self._depth, self._pending = 0, 0, False

    def handle(self, signum: int) -> None:
        self.count += 1
        if self.count >= 2:
            recovery.LIVE_SERVERS.kill_now()
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


STOP_SIGNALS = StopSignals()
