"""Faults the simulator can be told to show, and the helper processes it forks.

Specs (``--sim-fault SPEC``, repeatable, or ``AUTOSPEC_SIM_FAULTS=SPEC,SPEC``):

=========================  ==============================================================
``crash_after_requests=N`` after N completed requests (warmup excluded) the server prints a
                           scheduler traceback (a CUDA error) and dies by SIGKILL, leaving
                           in-flight streams truncated
``hang_at_start``          prints ``Load weight begin`` and never gets further; stays alive
                           (readiness answers 503 forever); stopped, it notes `HANG_STOPPED`
``ignore_sigterm``         SIGTERM is logged and ignored; only SIGKILL ends the process
``zombie_child``           when weights are loaded, forks a child that calls ``setsid()``
                           (so it leaves the process group), writes its own GPU-state file
                           and lives on after the parent dies, until it is killed
``slow_start=S``           S extra (unscaled) seconds before the server becomes ready
``crash_at_start``         dies half-way through weight loading with a CUDA error line
``error_rate=P``           a seeded fraction P of requests fail: HTTP 500, or (streams) a
                           stream cut off mid-way without ``data: [DONE]``
``stall_after_requests=N:S``  once, the first prefill after N completed requests takes S
                           more simulated seconds (scaled like every step), all requests wait:
                           a real server meeting a batch shape for the first time
=========================  ==============================================================
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import FrameType

from autospec.sim.gpu_state import GpuStateFile

#: The simulator's own note (not SGLang's) when a server hanging by ``hang_at_start`` is
#: stopped: proof that its startup was still hanging then.
HANG_STOPPED = "autospec.sim: hang_at_start: stopped while hanging after Load weight begin"


class FaultSpecError(ValueError):
    """A fault spec cannot be parsed; the message names the spec and the accepted forms."""


ACCEPTED = (
    "crash_after_requests=N, hang_at_start, ignore_sigterm, zombie_child, "
    "slow_start=S, crash_at_start, error_rate=P, stall_after_requests=N:S"
)


@dataclass(frozen=True)
class Faults:
    """The faults in force for one server process (all off by default)."""

    crash_after_requests: int | None = None
    hang_at_start: bool = False
    ignore_sigterm: bool = False
    zombie_child: bool = False
    slow_start_s: float = 0.0
    crash_at_start: bool = False
    error_rate: float = 0.0
    stall_after_requests: tuple[int, float] | None = None  # (N completed requests, S seconds)


def parse_faults(specs: Iterable[str]) -> Faults:
    """Parse fault specs; raises :class:`FaultSpecError` on an unknown or malformed one."""
    values: dict = {}
    for raw in specs:
        spec = raw.strip()
        if not spec:
            continue
        name, _, argument = spec.partition("=")
        name = name.strip()
        try:
            if name == "crash_after_requests":
                count = int(argument)
                if count < 0:
                    raise ValueError
                values["crash_after_requests"] = count
            elif name == "slow_start":
                seconds = float(argument)
                if seconds < 0:
                    raise ValueError
                values["slow_start_s"] = seconds
            elif name == "error_rate":
                rate = float(argument)
                if not 0.0 <= rate <= 1.0:
                    raise ValueError
                values["error_rate"] = rate
            elif name == "stall_after_requests":
                count_text, _, seconds_text = argument.partition(":")
                count, seconds = int(count_text), float(seconds_text)
                if count < 0 or seconds <= 0:
                    raise ValueError
                values["stall_after_requests"] = (count, seconds)
            elif name in ("hang_at_start", "ignore_sigterm", "zombie_child", "crash_at_start"):
                if argument:
                    raise ValueError
                values[name] = True
            else:
                raise FaultSpecError(f"unknown --sim-fault {spec!r}; use one of: {ACCEPTED}")
        except ValueError as exc:
            if isinstance(exc, FaultSpecError):
                raise
            raise FaultSpecError(
                f"malformed --sim-fault {spec!r}; use one of: {ACCEPTED} "
                "(N an integer >= 0, S seconds >= 0 (> 0 for a stall), P a fraction in [0, 1])"
            ) from None
    return Faults(**values)


# ---------------------------------------------------------------- forked helper processes

_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1


def _prctl(option: int, value: int | bytes) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: names and parent-death signals are cosmetic here


def _close_inherited_fds() -> None:
    """Close everything but stdio (the listening socket above all) in a forked child."""
    try:
        max_fd = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        max_fd = 1024
    os.closerange(3, max_fd)


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def spawn_scheduler_child(name: str = "sglang::scheduler") -> int:
    """Fork a do-nothing child in this process group, like SGLang's scheduler process.

    It dies on SIGTERM (default action) with the group, and on its parent's death
    (PR_SET_PDEATHSIG) so it never outlives a killed parent by accident (that is what
    ``zombie_child`` is for). Returns the child's PID. Call before any thread is started.
    """
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        _close_inherited_fds()
        _prctl(_PR_SET_NAME, name.encode()[:15])
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(0)
        _sleep_forever()
    finally:
        os._exit(0)


async def hang(note: Callable[[str], None]) -> None:
    """The ``hang_at_start`` fault: wait until cancelled (the server is stopped), then
    `note` `HANG_STOPPED`."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        note(HANG_STOPPED)
        raise


def spawn_zombie_child(state_dir: str | None, gpus: Sequence[int], mem_mb: float, cmdline: str) -> int:
    """Fork a child that leaves the process group (``setsid``) and holds GPU memory.

    The child writes ``<state_dir>/<child pid>.json`` and sleeps until killed; on SIGTERM it
    removes its file and exits, on SIGKILL the file stays (its PID is then dead). It keeps
    the parent's stdout/stderr, as a real leftover SGLang process does. Returns its PID.
    """
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        _close_inherited_fds()
        _prctl(_PR_SET_NAME, b"sglang::schedul")
        state = GpuStateFile(state_dir, os.getpid())

        def _terminate(signum: int, frame: FrameType | None) -> None:
            state.remove()
            os._exit(0)

        signal.signal(signal.SIGTERM, _terminate)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        state.write(gpus, mem_mb, cmdline)
        _sleep_forever()
    except BaseException:
        sys.stderr.flush()
    finally:
        os._exit(0)
