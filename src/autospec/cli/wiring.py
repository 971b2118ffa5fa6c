"""Turn CLI choices into the objects a study runs with: the server command and
environment, the launcher and its GPU probe, and the preflight oracle.

Real SGLang: the command from the space file (or --server-command); NVML probe when
nvidia-ml-py and a GPU are present (who holds GPU memory is checked by the study run,
after it has stopped its own leftovers: `autospec.study.processes.gpu_guard`); SGLang's own resolver as preflight when sglang
imports in the server's Python. Simulator (--sim): ``python -m autospec.sim`` with a
profile, the simulator's recorded GPU memory as the probe, and the simulator's own
argument resolver as preflight. :func:`sim_command` is the one place that builds the
simulator's command line (``optimize --sim`` and ``bench --sim``). Preflights are asked
about the flag words of ``autospec.launcher.flag_words``, the launcher's own conversion.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from autospec.config import SearchSpace
from autospec.errors import NothingCanStart, UsageError
from autospec.feasibility import ArgvBuilder, PreflightOracle
from autospec.launcher import GpuProbe, Launcher, flag_words
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION
from autospec.space import grid
from autospec.study.files import preflight_cache_dir, sim_gpu_state_dir
from autospec.study.slots import Slot, gpus_per_trial_of
from autospec.study.weights_fit import ModelSize

__all__ = ["Target", "build_target", "sim_command", "default_probe"]


@dataclass
class Target:
    """What a study runs against: server command and environment, launcher, preflight."""

    command: tuple[str, ...]
    launcher: Launcher
    env: Mapping[str, str] = field(default_factory=dict)
    preflight: PreflightOracle | None = None
    to_argv: ArgvBuilder | None = None
    sglang_version: str = DEFAULT_SGLANG_VERSION
    hardware: str | None = None  # what the servers run on (`hardware_of`)
    machine: str | None = None  # the machine key of its servers (`machine_of_target`)
    model_size: ModelSize = field(default_factory=ModelSize)  # for the weights-do-not-fit line


def sim_command(
    *,
    profile: str | None = None,
    load_seconds: float | None = None,
    warmup_seconds: float | None = None,
    time_scale: float | None = None,
    state_dir: Path | None = None,
    noise: bool | None = None,
) -> tuple[str, ...]:
    """``python -m autospec.sim`` with the simulator's own flags; None leaves the
    simulator's default. ``profile`` is a profile TOML file (passed as an absolute path)
    or the name of a bundled profile. Raises a one-line UsageError for a profile that is
    neither, a time scale <= 0, or a negative load or warmup time."""
    _check_sim_times(load_seconds, warmup_seconds, time_scale)
    command = [sys.executable, "-m", "autospec.sim"]
    for flag, seconds in (
        ("--sim-load-seconds", load_seconds),
        ("--sim-warmup-seconds", warmup_seconds),
        ("--sim-time-scale", time_scale),
    ):
        if seconds is not None:
            command += [flag, f"{seconds:g}"]
    if noise is not None:
        command += ["--sim-noise", "on" if noise else "off"]
    if state_dir is not None:
        command += ["--sim-gpu-state-dir", str(state_dir)]
    if profile:
        command += ["--sim-profile", sim_profile_argument(profile)]
    return tuple(command)


def sim_profile_argument(profile: str) -> str:
    """The ``--sim-profile`` value for the simulator: an existing file as an absolute
    path, a bundled profile's name as it is; anything else is a one-line UsageError."""
    from autospec.cli.common import did_you_mean
    from autospec.sim.profile import list_profiles

    if Path(profile).is_file():
        return str(Path(profile).resolve())
    bundled = list_profiles()
    if profile in bundled:
        return profile
    raise UsageError(
        f"--sim-profile {profile!r} is neither a file nor a bundled profile{did_you_mean(profile, bundled)}; "
        f"pass a profile TOML (see docs/simulator.md) or one of: {', '.join(bundled)}"
    )


def _check_sim_times(load_seconds: float | None, warmup_seconds: float | None, time_scale: float | None) -> None:
    if time_scale is not None and time_scale <= 0:
        raise UsageError(f"--sim-time-scale {time_scale:g} must be > 0; e.g. 1 (real time) or 0.2 (5x faster)")
    for flag, seconds in (("--sim-load-seconds", load_seconds), ("--sim-warmup-seconds", warmup_seconds)):
        if seconds is not None and seconds < 0:
            raise UsageError(f"{flag} {seconds:g} must be >= 0; pass seconds, e.g. 1")


def default_probe(gpus: Sequence[int] | None = None) -> GpuProbe:
    """NVML (limited to `gpus` when given) when it answers on this host, else no
    GPU-memory checks (said once)."""
    from autospec.launcher import NullGpuProbe, NvmlGpuProbe, ProbeUnavailable

    try:
        probe = NvmlGpuProbe(gpus)
        probe.snapshot()
        return probe
    except (ProbeUnavailable, ImportError, OSError):
        return NullGpuProbe()


def hardware_of(probe: GpuProbe, slot: Slot | None, fallback: str, space: SearchSpace) -> str:
    """What a run's servers run on, e.g. "NVIDIA H200 x2" (", shared" for a slot that shares
    its GPU): memory lessons are kept per hardware (`autospec.study.proposing.proposals.teach_gate`). `fallback`
    when the probe names no GPU."""
    from autospec.launcher import ProbeUnavailable

    try:
        names = sorted(set(probe.snapshot().names.values()))
    except ProbeUnavailable:
        names = []
    count = len(slot.gpus) if slot is not None else gpus_per_trial_of(space.server.flags)
    text = (" + ".join(names) if names else fallback) + f" x{count}"
    return text + (", shared" if slot is not None and slot.shared else "")


def sim_machine_name() -> str | None:
    """The simulated machine this run's servers inherit (``AUTOSPEC_SIM_MACHINE``), or None."""
    import os

    from autospec.sim.args import ENV_MACHINE

    return os.environ.get(ENV_MACHINE) or None


def machine_of_target(probe: GpuProbe, sim_machine: str | None) -> str:
    """The machine key of a run's servers (`autospec.records.machines`): this host with the
    simulated machine's name (``AUTOSPEC_SIM_MACHINE``, which the simulator inherits) or the
    NVML UUIDs of the GPUs the probe watches."""
    from autospec.records.machines import machine_key
    from autospec.study.processes.identity import host_name

    return machine_key(host_name(), (f"sim:{sim_machine}",) if sim_machine else probe.uuids())


def slot_launcher(probe: GpuProbe, slot: Slot | None) -> Launcher:
    """A launcher for `slot` (`autospec.study.slots`): its port window, an NCCL port from
    it, and no GPU-total baseline on a shared GPU; a plain launcher without a slot."""
    if slot is None:
        return Launcher(probe=probe)
    return Launcher(probe=probe, ports=slot.ports, nccl_port=True, gpu_baseline=not slot.shared)


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
    out: TextIO,
    slot: Slot | None = None,
) -> Target:
    """The target of a study: the simulator (``sim``) or the space's SGLang command.
    ``preflight`` is "auto" (use the server's resolver when it can run) or "off".
    ``slot``: the GPU slot the servers use (their GPUs, ports, teardown; `slot_launcher`)."""
    if sim:
        state_dir = sim_gpu_state_dir(studies_dir).resolve()
        command = sim_command(
            profile=sim_profile,
            load_seconds=sim_load_seconds,
            warmup_seconds=sim_warmup_seconds,
            time_scale=sim_time_scale,
            state_dir=state_dir,
        )
        target = _sim_target(
            command, state_dir, space, use_preflight=preflight == "auto", slot=slot, profile=sim_profile or "seed"
        )
    else:
        target = _sglang_target(space, studies_dir=studies_dir, use_preflight=preflight == "auto", out=out, slot=slot)
    if slot is not None:
        target.env = {**target.env, **slot.env()}
    return target


def _sim_target(
    command: tuple[str, ...], state_dir: Path, space: SearchSpace, *, use_preflight: bool, slot: Slot | None, profile: str
) -> Target:
    from autospec.feasibility.sim_preflight import SimPreflight
    from autospec.launcher.probes import SimGpuProbe

    state_dir.mkdir(parents=True, exist_ok=True)
    resolver = SimPreflight(command)  # also says which SGLang version the profile imitates
    pre = resolver if use_preflight else None
    _check_flag_names(pre, space)
    probe = SimGpuProbe(state_dir, gpus=slot.gpus if slot is not None else None)
    return Target(
        command=command,
        launcher=slot_launcher(probe, slot),
        preflight=pre,
        to_argv=flag_words,
        sglang_version=resolver.sglang_version() or DEFAULT_SGLANG_VERSION,
        hardware=hardware_of(probe, slot, f"simulator ({Path(profile).stem})", space),
        machine=machine_of_target(probe, sim_machine_name()),
        model_size=sim_model_size(profile),
    )


def sim_model_size(profile: str) -> ModelSize:
    """The simulated model's size: its profile's target and draft weights (the checkpoint
    the simulator stands in for) and the profile's GPU count."""
    from autospec.sim.profile import ProfileError, load_profile

    try:
        loaded = load_profile(sim_profile_argument(profile) if profile != "seed" else None)
    except ProfileError:  # the simulator says so itself, at its first launch
        return ModelSize()
    return ModelSize(target_gb=loaded.weights_gb, draft_gb=loaded.draft_weights_gb or None, gpus=loaded.gpu_count)


def real_model_size(flags: Mapping[str, object], probe: GpuProbe) -> ModelSize:
    """The checkpoint sizes on disk of the fixed ``model_path`` and
    ``speculative_draft_model_path`` (`autospec.launcher.checkpoint`; None where not
    readable here) and the GPUs NVML sees (None without it)."""
    from autospec.cli.doctor import hf_cache_dirs
    from autospec.launcher import ProbeUnavailable
    from autospec.launcher.checkpoint import checkpoint_gb

    def size(name: str) -> float | None:
        path = flags.get(name)
        return checkpoint_gb(path, hf_cache_dirs()) if isinstance(path, str) and path else None

    try:
        gpus = len(probe.snapshot().total_mb) or None if probe.observes_memory else None
    except ProbeUnavailable:
        gpus = None
    return ModelSize(target_gb=size("model_path"), draft_gb=size("speculative_draft_model_path"), gpus=gpus)


def _sglang_target(
    space: SearchSpace, *, studies_dir: Path, use_preflight: bool, out: TextIO, slot: Slot | None = None
) -> Target:
    probe = default_probe(slot.gpus if slot is not None else None)
    command = tuple(space.server.command)
    if command[:1] in (("python",), ("python3",)):
        command = (sys.executable, *command[1:])
    version = space.server.sglang_version or DEFAULT_SGLANG_VERSION
    pre = _sglang_preflight(command, studies_dir, version, out, space) if use_preflight else None
    if pre is not None:
        version = pre.sglang_version() or version
    _check_flag_names(pre, space)
    return Target(
        command=command,
        launcher=slot_launcher(probe, slot),
        preflight=pre,
        to_argv=flag_words,
        sglang_version=version,
        hardware=hardware_of(probe, slot, "unknown GPU", space),
        machine=machine_of_target(probe, None),
        model_size=real_model_size(space.server.flags, probe),
    )


def _sglang_preflight(
    command: tuple[str, ...], studies_dir: Path, version: str, out: TextIO, space: SearchSpace
) -> PreflightOracle | None:
    """SGLang's resolver in the server's Python, when sglang imports there; else None
    (said once on ``out``: the static rules for ``version`` stand in). The space's
    distinct argument sets are resolved in the same interpreter start as the
    availability check (`Preflight.warm`): one import of sglang before the first launch."""
    from autospec.feasibility import Preflight
    from autospec.feasibility.gate import PREFETCH_LIMIT, distinct_argument_sets

    python = _server_python(command)
    if python is None:
        print("autospec: preflight off: the server command is not 'PYTHON -m ...'; using static rules", file=out)
        return None
    candidate = Preflight(python=python, cache_dir=preflight_cache_dir(studies_dir))
    points = [{**space.server.flags, **c} for c in itertools.islice(grid(space), PREFETCH_LIMIT + 1)]
    argvs = [flag_words(f) for f in distinct_argument_sets(points)] if len(points) <= PREFETCH_LIMIT else []
    ok, why = candidate.warm(argvs)
    if not ok:
        print(f"autospec: preflight off: {why}; using autospec's static rules for sglang {version}", file=out)
        return None
    return candidate


def _check_flag_names(pre: PreflightOracle | None, space: SearchSpace) -> None:
    """Before the study: the server's own argument parser must know every flag name of
    the space (fixed and tunable); otherwise every trial would be rejected. Only argparse's
    unknown/ambiguous-option errors count here: any other rejection of one configuration
    is an ordinary infeasible candidate. The error names where the bad name came from:
    the option that set it (``--flag foo_bar=3``) or the space file's table."""
    if pre is None:
        return
    first = next(grid(space), None)
    verdict = pre.check(flag_words({**space.server.flags, **(first or {})}))
    if verdict.ok or not _UNKNOWN_FLAG.search(verdict.reason):
        return
    fix = "use SGLang's ServerArgs field names, e.g. speculative_num_steps"
    for name in _rejected_names(verdict.reason):
        if name in space.flag_origins:  # fixed on every launch: nothing can start (exit 3)
            raise NothingCanStart(
                f"{space.flag_origins[name]}: the server does not accept the flag {name} ({verdict.reason}); {fix}"
            )
        if space.param(name) is not None:
            raise UsageError(
                f"{space.source}: [params.{name}] the server does not accept the flag {name} ({verdict.reason}); "
                f"rename the table: {fix}"
            )
        if name in space.server.flags:
            raise NothingCanStart(
                f"{space.source}: [server.flags] the server does not accept the flag {name} ({verdict.reason}); {fix}"
            )
    raise UsageError(
        f"{space.source}: the server does not accept a flag name ({verdict.reason}); "
        f"{fix} in [server.flags], [params.*] and --flag"
    )


def _rejected_names(reason: str) -> list[str]:
    """The snake_case flag names argparse complained about, in its order:
    ``unrecognized arguments: --foo-bar 3 --baz`` -> ["foo_bar", "baz"]; ``ambiguous
    option: --spec could match ...`` -> ["spec"]."""
    names: list[str] = []
    for match in _UNKNOWN_FLAG.finditer(reason):
        words = reason[match.end() :].split()
        if match.group(0).startswith("ambiguous"):
            words = words[:1]
        for word in words:
            if word.startswith("--") and len(word) > 2:
                names.append(word[2:].split("=", 1)[0].replace("-", "_"))
    return names


# argparse's wording (Python 3.10-3.13), which SGLang's parser and the simulator's share.
_UNKNOWN_FLAG = re.compile(r"unrecognized arguments:|ambiguous option:")
