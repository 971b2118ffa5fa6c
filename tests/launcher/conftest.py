from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autospec.launcher import Launcher, LaunchRequest
from autospec.launcher.proctree import is_alive
from simspace import kill_all

FAKES = Path(__file__).parent / "fakes"
FAKE_SERVER = FAKES / "fake_server.py"
FIXTURES = Path(__file__).parent / "fixtures" / "real-0.5.16-h200"


class ProcessLedger:
    """PIDs the test started (fakes write them to a directory; the launcher reports its own)."""

    def __init__(self, pid_dir: Path) -> None:
        self.pid_dir = pid_dir
        self.extra: set[int] = set()

    def pids(self) -> set[int]:
        return {int(p.name) for p in self.pid_dir.iterdir() if p.name.isdigit()} | self.extra

    def alive(self) -> list[int]:
        return sorted(pid for pid in self.pids() if is_alive(pid))

    def wait_all_gone(self, timeout_s: float = 5.0) -> list[int]:
        deadline = time.monotonic() + timeout_s
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.alive()


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[ProcessLedger]:
    """Asserts after the test that no process it started is left (and kills any that is)."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    book = ProcessLedger(pid_dir)
    yield book
    # Teardown is synchronous in the launcher, so anything alive now is a leak.
    leaked = book.alive()
    kill_all(leaked)
    assert not leaked, f"processes left running after the test: {leaked}"


@pytest.fixture
def fake_request(tmp_path: Path, ledger: ProcessLedger) -> Callable[..., LaunchRequest]:
    """Factory: a LaunchRequest that starts the fake server with the given ``fake_*`` flags."""

    def make(ready_timeout_s: float = 20.0, port: int | None = None, env: dict | None = None, **flags: object) -> LaunchRequest:
        return LaunchRequest(
            command=(sys.executable, str(FAKE_SERVER)),
            flags={"model_path": "/models/m", **flags},
            log_path=tmp_path / "server.log",
            port=port,
            env={"FAKE_PID_DIR": str(ledger.pid_dir), **(env or {})},
            ready_timeout_s=ready_timeout_s,
            poll_interval_s=0.05,
        )

    return make


@pytest.fixture
def quick_launcher() -> Callable[..., Launcher]:
    """Factory for a Launcher with short teardown timeouts."""

    def make(probe=None, **overrides: float) -> Launcher:
        settings = dict(term_timeout_s=2.0, kill_timeout_s=3.0, gpu_free_timeout_s=5.0, port_free_timeout_s=5.0)
        settings.update(overrides)
        return Launcher(probe, **settings)

    return make
