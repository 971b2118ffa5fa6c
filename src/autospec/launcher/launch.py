"""The launcher: start a server, wait until it is ready or has failed, classify failures.

Lifecycle of :meth:`Launcher.start`:

1. Snapshot GPU memory (the baseline teardown waits to return to); choose the port
   (a requested port that is taken fails at once with :class:`PortInUse`, nothing started).
2. Spawn the command in its own session; drain its output to ``req.log_path``; call
   ``on_spawn(pid, pgid, redacted_argv, port)`` so the caller can record the server
   before it is ready.
3. Every ``poll_interval_s``: poll the process (exited -> failure at once), refresh the
   set of its descendants, and look at the readiness check running in the background.
4. Ready: parse :class:`StartupFacts` from the log and return a :class:`RunningServer`.
   Failed or past ``ready_timeout_s``: stop everything it started, then raise the
   classified :class:`LaunchError` with ``.teardown`` set.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Callable

from autospec.errors import UsageError
from autospec.launcher.classify import classify_failure
from autospec.launcher.errors import LaunchError, PortInUse
from autospec.launcher.ports import is_port_free, pick_free_port, pick_free_port_in
from autospec.launcher.probes import GpuProbe, GpuSnapshot, ProbeUnavailable
from autospec.launcher.process import LogDrain, RunningServer, spawn
from autospec.launcher.proctree import ProcessTracker
from autospec.launcher.readiness import ReadinessChecker
from autospec.launcher.request import LaunchRequest, Redactor, build_argv, child_environment
from autospec.launcher.startup import parse_startup
from autospec.launcher.teardown import DEFAULT_GPU_TOLERANCE_MB, TeardownReport, stop_process_group

__all__ = ["Launcher", "OnSpawn"]

OnSpawn = Callable[[int, int, list, int], None]
_DRAIN_AFTER_EXIT_S = 2.0


@dataclasses.dataclass(eq=False)
class Launcher:
    """Starts servers and stops them completely; one instance serves many launches.

    ``probe`` reads GPU memory for teardown (None: memory is not checked and reported as
    unknown). A GPU slot (`autospec.study.slots`) gives ``ports`` (the window its HTTP
    and NCCL ports are picked from), ``nccl_port`` (pass SGLang ``--nccl-port`` from that
    window) and, for a GPU shared with another slot, ``gpu_baseline=False`` (teardown
    waits for the server's own processes to leave the GPU, not for the GPU's total).
    Timeouts bound each teardown step (see :mod:`autospec.launcher.teardown`).
    """

    probe: GpuProbe | None = None
    _: dataclasses.KW_ONLY
    term_timeout_s: float = 30.0
    kill_timeout_s: float = 10.0
    gpu_free_timeout_s: float = 60.0
    port_free_timeout_s: float = 30.0
    gpu_tolerance_mb: float = DEFAULT_GPU_TOLERANCE_MB
    ports: range | None = None
    nccl_port: bool = False
    gpu_baseline: bool = True

    # ------------------------------------------------------------------ helpers
    def _baseline(self) -> GpuSnapshot | None:
        if not self.gpu_baseline or self.probe is None or not self.probe.observes_memory:
            return None
        try:
            return self.probe.snapshot()
        except ProbeUnavailable:
            return None

    def _stop(
        self, popen: subprocess.Popen, tracker: ProcessTracker, host: str, port: int, baseline: GpuSnapshot | None
    ) -> TeardownReport:
        return stop_process_group(
            popen.pid,
            probe=self.probe,
            term_timeout_s=self.term_timeout_s,
            kill_timeout_s=self.kill_timeout_s,
            gpu_free_timeout_s=self.gpu_free_timeout_s,
            port_free_timeout_s=self.port_free_timeout_s,
            host=host,
            port=port,
            gpu_baseline=baseline,
            gpu_tolerance_mb=self.gpu_tolerance_mb,
            tracker=tracker,
            reap=popen.poll,
        )

    def _free_port(self, host: str, avoid: int | None = None) -> int:
        """A free port in this launcher's window (`ports`), else any free port."""
        if self.ports is None:
            return pick_free_port(host)
        port = pick_free_port_in(host, self.ports, avoid)
        if port is None:
            raise PortInUse(f"no free port on {host} in {self.ports.start}-{self.ports.stop - 1}", seconds=0.0)
        return port

    def _with_ports(self, req: LaunchRequest) -> tuple[LaunchRequest, int]:
        """The port the server listens on (the request's, checked free, else a free one) and
        the request with a free NCCL port where this launcher chooses it."""
        if req.port is not None:
            port = req.port
            if not is_port_free(req.host, port):
                raise PortInUse(f"{req.host}:{port} was taken before launch", seconds=0.0)
        else:
            port = self._free_port(req.host)
        if self.nccl_port and req.nccl_port is None:
            req = dataclasses.replace(req, nccl_port=self._free_port(req.host, avoid=port))
        return req, port

    # ------------------------------------------------------------------ start
    def start(self, req: LaunchRequest, on_spawn: OnSpawn | None = None) -> RunningServer:
        """Start ``req`` and return it ready, or raise the classified :class:`LaunchError`."""
        baseline = self._baseline()
        req, port = self._with_ports(req)
        argv = build_argv(req, port)
        env = child_environment(req)
        redactor = Redactor.for_launch(req, env)
        safe_argv = redactor.argv(argv)

        started = time.monotonic()
        try:
            popen = spawn(argv, env)
        except OSError as exc:
            raise UsageError(
                f"cannot start the server command {safe_argv[0]!r}: {exc.strerror or exc}; "
                "check the command (e.g. the Python that has sglang installed)"
            ) from exc
        tracker = ProcessTracker(popen.pid, pgid=popen.pid, sid=popen.pid)
        assert popen.stdout is not None
        drain = LogDrain(popen.stdout, req.log_path, redactor).start()

        def stopper(p: subprocess.Popen, t: ProcessTracker, prt: int) -> TeardownReport:
            return self._stop(p, t, req.host, prt, baseline)

        def fail(returncode: int | None, timed_out: bool) -> LaunchError:
            seconds = round(time.monotonic() - started, 3)  # before teardown adds its own
            report = stopper(popen, tracker, port)
            drain.join(_DRAIN_AFTER_EXIT_S)
            error = classify_failure(
                drain.text(),
                returncode,
                timed_out=timed_out,
                log_path=req.log_path,
                seconds=seconds,
            )
            error.teardown = report
            # what the server said before it failed ("Load weight begin. avail mem=..."):
            # the sizes of the weights-do-not-fit line (`autospec.study.weights_fit`)
            error.startup = parse_startup(drain.text())
            return error

        try:
            if on_spawn is not None:
                on_spawn(popen.pid, popen.pid, list(safe_argv), port)
            ready_path = self._wait_ready(req, popen, tracker, port, started)
        except _Exited as exited:
            raise fail(exited.returncode, timed_out=False) from None
        except _TimedOut:
            raise fail(None, timed_out=True) from None
        except BaseException:
            stopper(popen, tracker, port)
            drain.join(_DRAIN_AFTER_EXIT_S)
            raise

        facts = parse_startup(drain.text())
        facts = dataclasses.replace(facts, ready_seconds=round(time.monotonic() - started, 3))
        return RunningServer(
            popen=popen,
            tracker=tracker,
            drain=drain,
            argv=list(safe_argv),
            host=req.host,
            port=port,
            startup=facts,
            started_at=started,
            stopper=stopper,
            ready_path=ready_path,
        )

    def _wait_ready(
        self, req: LaunchRequest, popen: subprocess.Popen, tracker: ProcessTracker, port: int, started: float
    ) -> str | None:
        readiness = ReadinessChecker(req.host, port)
        deadline = started + req.ready_timeout_s
        while True:
            returncode = popen.poll()
            if returncode is not None:
                raise _Exited(returncode)
            tracker.refresh()
            if readiness.poll():
                return readiness.ready_path
            if time.monotonic() >= deadline:
                raise _TimedOut()
            time.sleep(req.poll_interval_s)


class _Exited(Exception):
    def __init__(self, returncode: int) -> None:
        self.returncode = returncode


class _TimedOut(Exception):
    pass
