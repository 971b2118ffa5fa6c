"""A started server: its process group, its log drain, and the live handle the study uses.

Contract:

- :func:`spawn` starts the command without a shell in a new session (so it leads its own
  process group), stdin closed, stdout and stderr merged into one pipe.
- :class:`LogDrain` copies that pipe line by line into the per-trial log file from a
  background thread (secrets replaced by ``***``, flushed per line) and counts the runtime
  events of :data:`~autospec.launcher.classify.RUNTIME_EVENT_PATTERNS`. A pipe that is
  not drained would eventually block the server, so the drain always runs.
- :class:`RunningServer` is what :meth:`Launcher.start` returns: address, PIDs, redacted
  argv, startup facts, ``check_alive()``, ``runtime_events()`` and ``stop()`` (idempotent;
  also a context manager). While it runs, a watcher thread keeps discovering the server's
  descendants so that children that leave the process group are still stopped.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from autospec.launcher.classify import RUNTIME_EVENT_PATTERNS, LogPattern, classify_failure
from autospec.launcher.proctree import ProcessTracker
from autospec.launcher.request import Redactor
from autospec.launcher.startup import StartupFacts
from autospec.launcher.teardown import TeardownReport

__all__ = ["spawn", "LogDrain", "RunningServer", "WATCH_INTERVAL_S"]

WATCH_INTERVAL_S = 0.5


def spawn(argv: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen:
    """Start ``argv`` in a new session with output on one pipe (raises OSError if it cannot)."""
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),
        start_new_session=True,
        close_fds=True,
    )


class LogDrain:
    """Copies a binary stream into ``log_path`` (redacted) and counts runtime events."""

    def __init__(
        self, stream: IO[bytes], log_path: Path, redactor: Redactor, events: tuple[LogPattern, ...] = RUNTIME_EVENT_PATTERNS
    ) -> None:
        self._stream = stream
        self.log_path = Path(log_path)
        self._redactor = redactor
        self._events = events
        self._counts = {pattern.kind: 0 for pattern in events}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="autospec-log-drain", daemon=True)

    def start(self) -> LogDrain:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.log_path, "w", encoding="utf-8", newline="")  # noqa: SIM115 - the drain thread closes it
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            for raw in iter(self._stream.readline, b""):
                line = self._redactor.text(raw.decode("utf-8", errors="replace"))
                self._file.write(line)
                self._file.flush()
                for pattern in self._events:
                    if pattern.matches(line):
                        with self._lock:
                            self._counts[pattern.kind] += 1
        except (OSError, ValueError):
            pass  # the pipe or the file was closed under us: the server is gone
        finally:
            self._file.close()

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def join(self, timeout_s: float) -> bool:
        """Wait until the stream ended (all writers gone); True if it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def text(self) -> str:
        """The log written so far."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


class _Watcher:
    """Refreshes a process tracker every ``interval_s`` until stopped."""

    def __init__(self, tracker: ProcessTracker, interval_s: float = WATCH_INTERVAL_S) -> None:
        self._tracker = tracker
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autospec-proc-watch", daemon=True)

    def start(self) -> _Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._tracker.refresh()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self._interval + 1.0)


class RunningServer:
    """A ready server. ``stop()`` must be called (or use ``with``); it is safe to call twice."""

    def __init__(
        self,
        *,
        popen: subprocess.Popen,
        tracker: ProcessTracker,
        drain: LogDrain,
        argv: list[str],
        host: str,
        port: int,
        startup: StartupFacts,
        started_at: float,
        stopper: Callable[[subprocess.Popen, ProcessTracker, int], TeardownReport],
        ready_path: str | None = None,
    ) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.pgid = popen.pid
        self.host = host
        self.port = port
        self.url = f"http://{host}:{port}"
        self.argv = argv
        self.log_path = drain.log_path
        self.startup = startup
        self.ready_path = ready_path
        self._tracker = tracker
        self._drain = drain
        self._started_at = started_at
        self._stopper = stopper
        self._lock = threading.Lock()
        self._report: TeardownReport | None = None
        self._watcher = _Watcher(tracker).start()

    def __repr__(self) -> str:
        return f"RunningServer(url={self.url!r}, pid={self.pid}, log_path={str(self.log_path)!r})"

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopped(self) -> bool:
        return self._report is not None

    def tracked_pids(self) -> tuple[int, ...]:
        """Every process of this server seen so far (also those that left its group)."""
        self._tracker.refresh()
        return tuple(sorted(self._tracker.known()))

    def runtime_events(self) -> dict[str, int]:
        """Counts of runtime log events so far, e.g. ``{"retractions": 3}``."""
        return self._drain.counts()

    def log_text(self) -> str:
        return self._drain.text()

    def check_alive(self, grace_s: float = 0.0) -> None:
        """Return if the server process runs (still, after waiting up to `grace_s` for it to
        exit); else stop what is left and raise the classified error (ServerCrashed)."""
        try:
            returncode = self.popen.wait(timeout=grace_s) if grace_s > 0 else self.popen.poll()
        except subprocess.TimeoutExpired:
            return
        if returncode is None:
            return
        report = self.stop()
        error = classify_failure(
            self._drain.text(),
            returncode,
            after_ready=True,
            log_path=self.log_path,
            seconds=round(time.monotonic() - self._started_at, 3),
        )
        error.teardown = report
        raise error

    def stop(self) -> TeardownReport:
        """Stop every process of the server and wait for its GPU memory and port (see teardown)."""
        with self._lock:
            if self._report is None:
                self._watcher.stop()
                self._report = self._stopper(self.popen, self._tracker, self.port)
                self._drain.join(2.0)
            return self._report
