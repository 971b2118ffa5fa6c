"""Launch, watch, classify and tear down SGLang servers (see docs/launcher.md).

    req = LaunchRequest(command=default_command(), flags={"model_path": "..."},
                        log_path=Path("trial-3/server.log"))
    server = Launcher(probe=NvmlGpuProbe()).start(req)   # ready, or raises a LaunchError
    try:
        ...                                              # benchmark server.url
        server.check_alive()                             # raises ServerCrashed if it died
    finally:
        report = server.stop()                           # processes, GPU memory, port

Modules: ``request`` (what to launch, argv, redaction), ``process`` (process group, log
drain, RunningServer), ``launch`` (Launcher), ``readiness``, ``startup`` (StartupFacts),
``classify`` (FAILURE_PATTERNS, classify_failure), ``errors`` (LaunchError tree),
``probes`` (GPU memory), ``proctree`` (/proc), ``teardown``, ``ports``, ``doctor``.
"""

from __future__ import annotations

from autospec.launcher import errors
from autospec.launcher.classify import (
    CLASSIFY_ORDER,
    FAILURE_PATTERNS,
    RUNTIME_EVENT_PATTERNS,
    LogPattern,
    classify_failure,
)
from autospec.launcher.doctor import foreign_gpu_holders
from autospec.launcher.errors import *  # noqa: F403  (the names of errors.__all__, re-exported below)
from autospec.launcher.launch import Launcher
from autospec.launcher.ports import is_port_free, pick_free_port, wait_port_free
from autospec.launcher.probes import (
    GpuProbe,
    GpuProcess,
    GpuSnapshot,
    NullGpuProbe,
    NvmlGpuProbe,
    ProbeUnavailable,
    SimGpuProbe,
)
from autospec.launcher.process import RunningServer
from autospec.launcher.readiness import READINESS_PATHS
from autospec.launcher.request import LaunchRequest, build_argv, default_command, flag_words
from autospec.launcher.startup import StartupFacts, parse_startup
from autospec.launcher.teardown import TeardownReport, stop_process_group

__all__ = [
    "LaunchRequest",
    "build_argv",
    "flag_words",
    "default_command",
    "Launcher",
    "RunningServer",
    "StartupFacts",
    "parse_startup",
    "TeardownReport",
    "stop_process_group",
    "LogPattern",
    "FAILURE_PATTERNS",
    "RUNTIME_EVENT_PATTERNS",
    "CLASSIFY_ORDER",
    "classify_failure",
    "GpuProbe",
    "GpuSnapshot",
    "GpuProcess",
    "NvmlGpuProbe",
    "SimGpuProbe",
    "NullGpuProbe",
    "ProbeUnavailable",
    "foreign_gpu_holders",
    "READINESS_PATHS",
    "pick_free_port",
    "is_port_free",
    "wait_port_free",
]
__all__ += errors.__all__
