"""A simulator server for a benchmark: ``python -m autospec.sim`` on a free port, ready once
``/health_generate`` answers 200, stopped through its own process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import httpx

from autospec.launcher.ports import pick_free_port

__all__ = ["cpu_seconds", "flag_words", "pick_free_port", "sim_argv", "spawn_ready", "stop_sim"]


def sim_argv(port: int, *options: str) -> list[str]:
    """The simulator's command on 127.0.0.1:`port` with `options` (its own and SGLang's flags)."""
    return [sys.executable, "-m", "autospec.sim", "--host", "127.0.0.1", "--port", str(port), *options]


def flag_words(flags: Mapping[str, object]) -> list[str]:
    """{"speculative_num_steps": 3} -> ["--speculative-num-steps", "3"]."""
    return [word for name, value in flags.items() for word in (f"--{name.replace('_', '-')}", str(value))]


def spawn_ready(argv: Sequence[str], port: int, preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    """Start the simulator `argv` in its own session and wait until it answers
    /health_generate on `port` (one line and exit when it dies or takes over 60 s)."""
    proc = subprocess.Popen(
        list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec_fn
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the simulator exited with {proc.returncode}; run it by hand to see why: {list(argv)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health_generate", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    stop_sim(proc)
    raise SystemExit("the simulator did not become ready within 60 s")


def stop_sim(proc: subprocess.Popen) -> None:
    """SIGTERM the simulator's process group; SIGKILL it after 10 s."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds process `pid` has used (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
