"""Is the server ready to generate? HTTP readiness checks that never block the caller.

SGLang endpoints (checked against the 0.5.16 and 0.5.23 source, ``entrypoints/http_server.py``):

- ``/health_generate`` (0.5.16, 0.5.23; also older 0.4.x): 503 while the server is still
  starting, then runs a one-token generation and answers 200 once the scheduler replied
  (it waits about a second first). This is the readiness signal.
- ``/ready`` (0.5.23, absent in 0.5.16): 200 once the tokenizer manager reports ready.
- ``/health`` (0.5.16, 0.5.23): same handler as ``/health_generate``, but without a
  generation unless ``SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`` is set; a last resort.
- ``/get_model_info`` / ``/model_info`` answer *before* warmup and are NOT readiness.

:class:`ReadinessChecker` tries the paths in that order and moves on from a path that
answers 404/405 (a version without it). Each HTTP request runs in a background thread,
so the launcher can poll the process every tick even while a ``/health_generate``
request takes seconds.
"""

from __future__ import annotations

import http.client
import threading

__all__ = ["READINESS_PATHS", "ReadinessChecker", "check_once"]

READINESS_PATHS: tuple[str, ...] = ("/health_generate", "/ready", "/health")
_MISSING = (404, 405)


def check_once(host: str, port: int, path: str, timeout_s: float) -> int | None:
    """GET ``path`` on ``host:port`` (no proxy); the HTTP status, or None without an answer."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        response.read()
        return int(response.status)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


class ReadinessChecker:
    """Polls readiness without blocking: ``poll()`` returns at once.

    ``poll()`` starts a check when none is in flight and returns True once a check got 200.
    ``ready_path`` is the path that answered 200.
    """

    def __init__(self, host: str, port: int, paths: tuple[str, ...] = READINESS_PATHS, request_timeout_s: float = 30.0) -> None:
        self.host = host
        self.port = port
        self._paths = list(paths)
        self._timeout = request_timeout_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = False
        self.ready_path: str | None = None
        self.last_status: int | None = None

    def poll(self) -> bool:
        with self._lock:
            if self._ready:
                return True
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._check, name="autospec-readiness", daemon=True)
                self._thread.start()
            return False

    def _check(self) -> None:
        with self._lock:
            path = self._paths[0]
        status = check_once(self.host, self.port, path, self._timeout)
        with self._lock:
            self.last_status = status
            if status == 200:
                self._ready = True
                self.ready_path = path
            elif status in _MISSING and len(self._paths) > 1 and self._paths[0] == path:
                self._paths.pop(0)
