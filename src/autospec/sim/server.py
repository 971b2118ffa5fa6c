"""The simulator's server process: one asyncio loop that binds the port, runs the engine
and the start-up sequence, and ends on SIGTERM/SIGINT or by SGLang's failure chain.

Pieces (one job each):

- :mod:`autospec.sim.http` - the HTTP/1.1 protocol;
- :mod:`autospec.sim.api` - SGLang's endpoints (with :mod:`~autospec.sim.parsing` and
  :mod:`~autospec.sim.responses` for request bodies and response shapes);
- :mod:`autospec.sim.engine` - the batch scheduler;
- :mod:`autospec.sim.startup` - load, KV pool, CUDA graphs, warmup, init failures;
- this module - the process: signals, the failure chain (:meth:`SimServer.die`), the
  ``crash_after_requests`` fault, cleanup of the GPU-memory record and the scheduler child.

The port is bound before start-up begins, so readiness endpoints answer 503 at once. A
bug in the simulator itself (an exception in the engine or start-up) is printed and the
process exits 1 instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from autospec.sim import logs
from autospec.sim.api import Api
from autospec.sim.engine import Engine, Generation
from autospec.sim.faults import Faults
from autospec.sim.gpu_state import GpuStateFile
from autospec.sim.http import HttpConnection
from autospec.sim.startup import CUDA_ERROR, Startup

__all__ = ["ServerSetup", "SimServer"]


@dataclass
class ServerSetup:
    """Everything the server needs, resolved by ``__main__`` before the loop starts."""

    profile: Any  # autospec.sim.profile.Profile
    cfg: Any  # autospec.sim.config.ServerConfig
    outcome: Any  # autospec.sim.memory.InitOutcome
    server_args: dict[str, Any]
    host: str
    port: int
    served_model_name: str
    model_path: str
    time_scale: float
    noise: bool
    seed: int
    load_seconds: float
    warmup_seconds: float
    faults: Faults
    state_dir: str | None
    cmdline: str
    disable_cuda_graph: bool = False
    machine: str | None = None  # the simulated machine's name (variation.machine_factor)
    scheduler_child: int | None = None
    log_stream: Any = None

    def extra(self, key: str, default: Any) -> Any:
        """An optional top-level profile key the model does not define (docs/simulator.md)."""
        return getattr(self.profile, "extra", {}).get(key, default)

    @property
    def architecture(self) -> str:
        return str(self.extra("architecture", "LlamaForCausalLM"))


class SimServer:
    """SGLang's process around the engine: ``asyncio.run(SimServer(setup).serve())``."""

    def __init__(self, setup: ServerSetup) -> None:
        self.setup = setup
        prefix = " TP0" if setup.cfg.tp_size > 1 else ""
        self.log = logs.SglangLog(setup.log_stream or sys.stderr, rank_prefix=prefix)
        self.memory = GpuStateFile(setup.state_dir)
        self.engine = Engine(
            profile=setup.profile,
            cfg=setup.cfg,
            max_running=setup.outcome.max_running_requests,
            max_total_tokens=setup.outcome.max_total_num_tokens,
            time_scale=setup.time_scale,
            noise=setup.noise,
            rng=random.Random(setup.seed),
            log=self.log,
            on_complete=self._on_complete,
            disable_cuda_graph=setup.disable_cuda_graph,
            stall=setup.faults.stall_after_requests,
            machine=setup.machine,
        )
        self.api = Api(setup, self.engine, self.log)
        self.startup = Startup(setup, self.log, self.memory, die=self.die, on_ready=self._on_ready)
        self._crash_scheduled = False
        self._stop = asyncio.Event()

    # -- the loop
    async def serve(self) -> int:
        """Serve until stopped; the exit status (0, or 1 after a simulator bug)."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: HttpConnection(self.api), self.setup.host, self.setup.port, reuse_address=True, backlog=1024
        )
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        engine_task = loop.create_task(self.engine.run())
        startup_task = loop.create_task(self.startup.run())
        stop_task = loop.create_task(self._stop.wait())
        pending: set[asyncio.Task[Any]] = {engine_task, startup_task, stop_task}
        while stop_task in pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(not task.cancelled() and task.exception() is not None for task in done):
                break
        status = 0
        work: tuple[asyncio.Task[Any], ...] = (engine_task, startup_task)
        for task in work:
            error = task.exception() if task.done() and not task.cancelled() else None
            if error is not None:
                self.log.raw(traceback.format_exception(type(error), error, error.__traceback__))
                status = 1
        for task in (startup_task, engine_task, stop_task):
            task.cancel()
        server.close()
        for conn in list(self.api.connections):
            if conn.transport is not None:
                conn.transport.abort()
        self.cleanup()
        return status

    def _on_ready(self) -> None:
        self.api.ready = True

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGTERM:
            self.log.info(logs.SIGTERM_RECEIVED)
        if self.setup.faults.ignore_sigterm:
            return
        self.api.shutting_down = True
        self._stop.set()

    def _on_complete(self, gen: Generation) -> None:
        limit = self.setup.faults.crash_after_requests
        if limit is not None and self.engine.stats.completed >= limit and not self._crash_scheduled:
            self._crash_scheduled = True
            asyncio.get_running_loop().call_later(0.05, self.die, logs.SCHEDULER_LOOP_FRAMES, CUDA_ERROR)

    # -- ending
    def cleanup(self) -> None:
        """Forget the GPU memory and stop the scheduler child (idempotent; not the zombie)."""
        self.memory.remove()
        child, self.setup.scheduler_child = self.setup.scheduler_child, None
        if child:
            try:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    def die(self, frames: Iterable[tuple[str, int, str, str]], error_line: str, rank_prefix: str | None = None) -> None:
        """SGLang's failure chain, then death by SIGKILL (what kill_process_tree does).
        `rank_prefix`: the failing scheduler's log prefix when it is not rank 0's."""
        lines = logs.scheduler_traceback(frames, error_line)
        self.log.rank(lines[0], rank_prefix)
        self.log.raw(lines[1:])
        self.log.info(logs.SIGQUIT_FROM_CHILD)
        self.log.info(logs.kill_process_tree(os.getpid(), include_parent=True))
        self.log.flush()
        self.cleanup()
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
