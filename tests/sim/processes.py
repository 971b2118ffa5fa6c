"""Simulator processes for tests: ``python -m autospec.sim`` in its own session on a free
loopback port, its output in a file, killed with its whole group (and any child that left
the group on purpose, found through its GPU-state file) by ``SimPool.close()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

__all__ = ["Sim", "SimPool", "free_port", "pid_alive"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _is_sim(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"autospec.sim" in cmdline.read()
    except OSError:
        return False


class Sim:
    """One simulator process; ``url``, ``log()``, ``wait_*`` helpers."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None, state_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.state_dir = state_dir
        self.argv = [
            sys.executable,
            "-m",
            "autospec.sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--sim-gpu-state-dir",
            str(state_dir),
            *args,
        ]
        self.started = time.monotonic()
        with log_path.open("wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def wait_log(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None and text not in self.log():
                raise AssertionError(f"sim exited ({self.proc.returncode}) without printing {text!r}:\n{self.log()[-3000:]}")
            time.sleep(0.02)
        raise AssertionError(f"{text!r} not printed within {timeout} s:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"sim exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/health_generate", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"sim not ready within {timeout} s:\n{self.log()[-3000:]}")

    def state_records(self) -> list[dict]:
        records = []
        for path in sorted(self.state_dir.glob("*.json")):
            try:
                records.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                continue
        return records

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


class SimPool:
    """Starts simulators under one folder and kills them all (and their escaped children)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[Sim] = []

    def start(self, *args: str, env_extra: dict[str, str] | None = None) -> Sim:
        index = len(self.started)
        state_dir = self.folder / f"gpu-state-{index}"
        state_dir.mkdir()
        env = dict(os.environ)
        env.pop("AUTOSPEC_SIM_FAULTS", None)
        env.pop("AUTOSPEC_SIM_GPU_STATE_DIR", None)
        env.update(env_extra or {})
        sim = Sim(list(args), self.folder / f"sim-{index}.log", env, state_dir)
        self.started.append(sim)
        return sim

    def close(self) -> None:
        for sim in self.started:
            sim.kill()
            # Processes that escaped the group (zombie_child) hold files in the state dir.
            for record in sim.state_records():
                pid = record.get("pid")
                if isinstance(pid, int) and pid != os.getpid() and pid_alive(pid) and _is_sim(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
