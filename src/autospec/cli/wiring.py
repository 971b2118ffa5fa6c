"""Turn CLI choices into the objects a study runs with: the server command and
environment, the launcher and its GPU probe, and the preflight oracle.

Real SGLang: the command from the space file (or --server-command); NVML probe when
nvidia-ml-py and a GPU are present; SGLang's own resolver as preflight when sglang
imports in the server's Python. Simulator (--sim): ``python -m autospec.sim`` with a
profile, the simulator's recorded GPU memory as the probe, and the simulator's own
argument resolver as preflight.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TextIO

from autospec.config import SearchSpace
from autospec.errors import UsageError
from autospec.space import grid

__all__ = ["Target", "build_target", "flags_to_argv"]


@dataclass
class Target:
    command: tuple[str, ...]
    launcher: Any
    env: Mapping[str, str] = field(default_factory=dict)
    preflight: Any | None = None
    to_argv: Callable[[Mapping[str, Any]], list[str]] | None = None
    sglang_version: str = "0.5.23"


def flags_to_argv(flags: Mapping[str, Any]) -> list[str]:
    """Server flags -> argv words, with the launcher's own conversion (host/port left out)."""
    import os

    from autospec.launcher import LaunchRequest, build_argv

    argv = build_argv(LaunchRequest(command=("server",), flags=flags, log_path=Path(os.devnull)), port=0)
    return argv[1:-4]  # drop the command word and the trailing --host H --port P


def default_probe() -> Any:
    """NVML when it answers on this host, else no GPU-memory checks (said once)."""
    from autospec.launcher import NullGpuProbe, NvmlGpuProbe, ProbeUnavailable

    try:
        probe = NvmlGpuProbe()
        probe.snapshot()
        return probe
    except (ProbeUnavailable, ImportError, OSError):
        return NullGpuProbe()


def _server_python(command: tuple[str, ...]) -> tuple[str, ...] | None:
    """The interpreter that runs the server, when the command is `PY -m MODULE ...`."""
    if len(command) >= 3 and command[1] == "-m" and "python" in Path(command[0]).name:
        return (sys.executable,) if command[0] in ("python", "python3") else (command[0],)
    return None


def build_target(
    space: SearchSpace,
    *,
    studies_dir: Path,
    sim: bool,
    sim_profile: str | None,
    sim_load_seconds: float,
    sim_time_scale: float,
    sim_warmup_seconds: float = 1.0,
    preflight: str,
    allow_foreign: bool,
    out: TextIO,
) -> Target:
    from autospec.launcher import Launcher

    if sim:
        from autospec.feasibility.sim_preflight import SimPreflight
        from autospec.launcher.probes import SimGpuProbe

        if sim_profile and not Path(sim_profile).is_file():
            raise UsageError(f"--sim-profile {sim_profile!r} does not exist; pass a profile TOML (see docs/simulator.md)")
        if sim_time_scale <= 0 or sim_load_seconds < 0 or sim_warmup_seconds < 0:
            raise UsageError("--sim-time-scale must be > 0, --sim-load-seconds and --sim-warmup-seconds >= 0")
        state_dir = (studies_dir / ".sim-gpu").resolve()
        state_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "autospec.sim", "--sim-load-seconds", f"{sim_load_seconds:g}",
                   "--sim-warmup-seconds", f"{sim_warmup_seconds:g}",
                   "--sim-time-scale", f"{sim_time_scale:g}", "--sim-gpu-state-dir", str(state_dir)]
        if sim_profile:
            command += ["--sim-profile", str(Path(sim_profile).resolve())]
        pre = SimPreflight(tuple(command)) if preflight == "auto" else None
        _check_flag_names(pre, space)
        return Target(
            command=tuple(command), launcher=Launcher(probe=SimGpuProbe(state_dir)), preflight=pre,
            to_argv=flags_to_argv, sglang_version=pre.sglang_version() if pre else "0.5.23",
        )

    from autospec.launcher import foreign_gpu_holders

    probe = default_probe()
    holders = foreign_gpu_holders(probe)
    if holders and not allow_foreign:
        pid, cmd, mem = holders[0]
        raise UsageError(
            f"{len(holders)} process(es) already hold GPU memory (pid {pid}, {mem:.0f} MiB: {cmd[:60]}); "
            "stop them (see autospec doctor) or pass --allow-foreign-gpu-memory"
        )
    command = tuple(space.server.command)
    if command[:1] in (("python",), ("python3",)):
        command = (sys.executable, *command[1:])
    version = space.server.sglang_version or "0.5.23"
    pre = None
    if preflight == "auto":
        python = _server_python(command)
        if python is not None:
            from autospec.feasibility import Preflight

            candidate = Preflight(python=python, cache_dir=studies_dir / ".preflight")
            ok, why = candidate.available()
            if ok:
                pre = candidate
                version = candidate.sglang_version() or version
            else:
                print(f"autospec: preflight off: {why}; using autospec's static rules for sglang {version}", file=out)
        else:
            print("autospec: preflight off: the server command is not 'PYTHON -m ...'; using static rules", file=out)
    _check_flag_names(pre, space)
    return Target(command=command, launcher=Launcher(probe=probe), preflight=pre, to_argv=flags_to_argv,
                  sglang_version=version)


def _check_flag_names(pre: Any, space: SearchSpace) -> None:
    """Before the study: the server's own argument parser must know every flag name of
    the space (fixed and tunable); otherwise every trial would be rejected. Only argparse's
    unknown/ambiguous-option errors count here: any other rejection of one configuration
    is an ordinary infeasible candidate."""
    if pre is None:
        return
    first = next(grid(space), None)
    verdict = pre.check(flags_to_argv({**space.server.flags, **(first or {})}))
    if not verdict.ok and _UNKNOWN_FLAG.search(verdict.reason):
        raise UsageError(
            f"{space.source}: the server does not accept a flag name ({verdict.reason}); "
            "use SGLang's ServerArgs field names in [server.flags] and [params.*], e.g. speculative_num_steps"
        )


# argparse's wording (Python 3.10-3.13), which SGLang's parser and the simulator's share.
_UNKNOWN_FLAG = re.compile(r"unrecognized arguments:|ambiguous option:")
