"""TCP ports on the server's host: pick a free one, test one, wait for one to be released.

A port is *free* when a listening socket could bind it with ``SO_REUSEADDR`` (what
uvicorn and SGLang do), so connections lingering in TIME_WAIT do not count as taken.
"""

from __future__ import annotations

import random
import socket
import time

__all__ = ["pick_free_port", "pick_free_port_in", "is_port_free", "wait_port_free"]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free on ``host`` right now (there is a small race until bound)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def pick_free_port_in(host: str, window: range, avoid: int | None = None) -> int | None:
    """A free port of `window` other than `avoid`, tried in random order; None when none is."""
    for port in random.sample(window, len(window)):
        if port != avoid and is_port_free(host, port):
            return port
    return None


def is_port_free(host: str, port: int) -> bool:
    """True when a server could bind ``host:port`` now."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def wait_port_free(host: str, port: int, timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll until ``host:port`` is free or ``timeout_s`` passes; True if it became free."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        if is_port_free(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
