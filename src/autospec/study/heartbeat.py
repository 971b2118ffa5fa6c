"""A daemon thread that records heartbeats of the running trial (RDB storages)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

__all__ = ["Heartbeat"]


class Heartbeat:
    """Records a heartbeat for the running trial (RDB storages) from a daemon thread."""

    def __init__(self, beat: Callable[[], None] | None, interval: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(beat, interval), daemon=True)
        if beat is not None:
            beat()
            self._thread.start()

    def _run(self, beat: Callable[[], None], interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # a transient DB error must not kill the trial
                beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
