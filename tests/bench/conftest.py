from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .fake_server import FakeServer, Reply


@pytest.fixture
def fake_server() -> Iterator[Callable[..., FakeServer]]:
    """Factory: `fake_server(script)` starts a FakeServer on a free loopback port;
    every server started is stopped in teardown."""
    started: list[FakeServer] = []

    def start(script: Callable[[int, dict], Reply] | None = None) -> FakeServer:
        server = FakeServer(script).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
