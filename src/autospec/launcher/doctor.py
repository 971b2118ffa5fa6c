"""Checks before launching anything: GPUs, who holds GPU memory, sglang, the model path.

The library behind ``autospec doctor``; ``autospec optimize`` calls
:func:`foreign_gpu_holders` before its first launch. Every check returns plain data
(:class:`DoctorReport`); :func:`render_text` turns it into lines for a terminal.
Nothing here reads the environment: callers pass the probe, the server's Python and
the Hugging Face cache folders.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autospec.launcher.probes import GpuProbe, ProbeUnavailable
from autospec.launcher.proctree import read_cmdline

__all__ = [
    "GpuStatus",
    "GpuHolder",
    "SglangStatus",
    "ModelStatus",
    "DoctorReport",
    "foreign_gpu_holders",
    "gpu_holders",
    "check_sglang",
    "resolve_model_path",
    "run_doctor",
    "render_text",
]

_NOT_VISIBLE = "(command line not visible from here)"
# Prints the version from package metadata, then proves `import sglang` works.
_SGLANG_CHECK = (
    "import json, importlib.metadata as m\n"
    "try:\n    v = m.version('sglang')\nexcept m.PackageNotFoundError:\n    v = None\n"
    "import sglang\n"
    "print(json.dumps({'version': getattr(sglang, '__version__', None) or v}))\n"
)


@dataclass(frozen=True)
class GpuStatus:
    index: int
    name: str | None
    used_mb: float
    total_mb: float | None

    @property
    def free_mb(self) -> float | None:
        return None if self.total_mb is None else max(self.total_mb - self.used_mb, 0.0)


@dataclass(frozen=True)
class GpuHolder:
    """A process holding GPU memory, summed over the GPUs it uses."""

    pid: int
    cmdline: str
    mem_mb: float
    gpus: tuple[int, ...]
    owner: str = ""  # whose it is, when a caller knows (e.g. "the server of trial 4 of study ...")
    fix: str = ""  # the one command that stops it safely, when there is one


@dataclass(frozen=True)
class SglangStatus:
    python: str
    importable: bool
    version: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ModelStatus:
    model_path: str
    resolves: bool
    where: str | None = None  # "local directory", "local file", "Hugging Face cache"
    location: str | None = None
    problem: str | None = None


@dataclass(frozen=True)
class DoctorReport:
    gpu_source: str
    gpu_unavailable: str | None = None
    gpus: tuple[GpuStatus, ...] = ()
    holders: tuple[GpuHolder, ...] = ()
    sglang: SglangStatus | None = None
    model: ModelStatus | None = None
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        data = asdict(self)
        data["gpus"] = [dict(asdict(g), free_mb=g.free_mb) for g in self.gpus]
        data["ok"] = self.ok
        return data


def gpu_holders(probe: GpuProbe, exclude_pids: Iterable[int] = ()) -> list[GpuHolder]:
    """Processes holding GPU memory now (largest first), without ``exclude_pids``."""
    excluded = set(exclude_pids)
    per_pid: dict[int, dict] = {}
    for proc in probe.snapshot().processes:
        if proc.pid in excluded:
            continue
        entry = per_pid.setdefault(proc.pid, {"mem": 0.0, "gpus": set(), "cmd": proc.cmdline})
        entry["mem"] += proc.mem_mb
        entry["gpus"].add(proc.gpu)
    holders = [
        GpuHolder(pid, entry["cmd"] or read_cmdline(pid) or _NOT_VISIBLE, round(entry["mem"], 1), tuple(sorted(entry["gpus"])))
        for pid, entry in per_pid.items()
    ]
    return sorted(holders, key=lambda h: (-h.mem_mb, h.pid))


def foreign_gpu_holders(probe: GpuProbe, exclude_pids: Iterable[int] = ()) -> list[tuple[int, str, float]]:
    """``(pid, cmdline, mem_mb)`` of every process holding GPU memory that is not ours.

    Called before a study starts: anything listed would shrink the server's memory or
    trigger SGLang's "memory capacity is unbalanced" failure. Raises ProbeUnavailable
    when the probe cannot read the GPUs.
    """
    return [(h.pid, h.cmdline, h.mem_mb) for h in gpu_holders(probe, exclude_pids)]


def check_sglang(python: str, timeout_s: float = 180.0) -> SglangStatus:
    """Whether ``import sglang`` works in ``python`` (run as a subprocess), and its version."""
    try:
        done = subprocess.run(
            [python, "-c", _SGLANG_CHECK], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        return SglangStatus(python, False, error=f"{python} was not found")
    except subprocess.TimeoutExpired:
        return SglangStatus(python, False, error=f"import sglang took longer than {timeout_s:g} s")
    except OSError as exc:
        return SglangStatus(python, False, error=str(exc))
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return SglangStatus(python, False, error=lines[-1] if lines else f"exit code {done.returncode}")
    try:
        version = json.loads(done.stdout.strip().splitlines()[-1])["version"]
    except (ValueError, IndexError, KeyError, TypeError):
        version = None
    return SglangStatus(python, True, version=version)


def resolve_model_path(model_path: str, hf_cache_dirs: Sequence[Path] = ()) -> ModelStatus:
    """A local directory with ``config.json``, a local file, or an entry of a Hugging Face cache."""
    path = Path(model_path).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file():
            return ModelStatus(model_path, True, "local directory", str(path))
        return ModelStatus(
            model_path,
            False,
            "local directory",
            str(path),
            problem=f"{path} has no config.json; point --model-path at the model's folder",
        )
    if path.is_file():
        return ModelStatus(model_path, True, "local file", str(path))
    parts = model_path.strip("/").split("/")
    if len(parts) == 2 and not model_path.startswith((".", "/", "~")):
        entry = f"models--{parts[0]}--{parts[1]}"
        for cache in hf_cache_dirs:
            for config in sorted((Path(cache) / entry / "snapshots").glob("*/config.json")):
                return ModelStatus(model_path, True, "Hugging Face cache", str(config.parent))
        searched = ", ".join(str(c) for c in hf_cache_dirs) or "no cache folder"
        return ModelStatus(
            model_path,
            False,
            problem=(
                f"{model_path} is not in the Hugging Face cache ({searched}); download it first "
                f"(huggingface-cli download {model_path}) or give a local folder"
            ),
        )
    return ModelStatus(model_path, False, problem=f"{model_path} does not exist; give a local folder or an org/name model id")


def run_doctor(
    probe: GpuProbe | None,
    *,
    gpu_source: str = "nvml",
    probe_error: str | None = None,
    python: str | None = None,
    model_path: str | None = None,
    hf_cache_dirs: Sequence[Path] = (),
) -> DoctorReport:
    """All checks. ``probe`` None means no GPU view (``probe_error`` says why)."""
    problems: list[str] = []
    gpus: list[GpuStatus] = []
    holders: list[GpuHolder] = []
    unavailable = probe_error
    if probe is not None and unavailable is None:
        try:
            snap = probe.snapshot()
            gpus = [
                GpuStatus(i, snap.names.get(i), round(used, 1), snap.total_mb.get(i)) for i, used in sorted(snap.used_mb.items())
            ]
            holders = gpu_holders(probe)
        except ProbeUnavailable as exc:
            unavailable = str(exc)
    if holders:
        problems.append(f"{len(holders)} process(es) hold GPU memory; stop them before starting a study")
    sglang = check_sglang(python) if python else None
    if sglang is not None and not sglang.importable:
        problems.append(f"sglang cannot be imported by {sglang.python}: {sglang.error}")
    model = resolve_model_path(model_path, hf_cache_dirs) if model_path else None
    if model is not None and not model.resolves:
        problems.append(model.problem or f"{model_path} does not resolve")
    return DoctorReport(gpu_source, unavailable, tuple(gpus), tuple(holders), sglang, model, tuple(problems))


def render_text(report: DoctorReport) -> str:
    """Human-readable report, one fact per line."""
    lines: list[str] = []
    if report.gpu_unavailable:
        lines.append(f"GPUs: not visible ({report.gpu_unavailable}); GPU checks skipped")
    else:
        lines.append(f"GPUs ({report.gpu_source}): {len(report.gpus)}")
        for gpu in report.gpus:
            total = f" of {gpu.total_mb:.0f} MiB, {gpu.free_mb:.0f} MiB free" if gpu.total_mb is not None else ""
            lines.append(f"  GPU {gpu.index} {gpu.name or ''}".rstrip() + f": {gpu.used_mb:.0f} MiB used{total}")
        if report.holders:
            lines.append("Processes holding GPU memory:")
            for h in report.holders:
                lines.append(f"  PID {h.pid} on GPU {','.join(map(str, h.gpus))}: {h.mem_mb:.0f} MiB  {h.cmdline}")
                if h.owner:
                    lines.append(f"    {h.owner}")
                if h.fix:
                    lines.append(f"    stop it safely: {h.fix}")
        else:
            lines.append("Processes holding GPU memory: none")
    if report.sglang is not None:
        s = report.sglang
        lines.append(
            f"sglang in {s.python}: "
            + (f"{s.version or 'unknown version'}, import works" if s.importable else f"not importable ({s.error})")
        )
    if report.model is not None:
        m = report.model
        lines.append(f"model {m.model_path}: " + (f"found ({m.where}: {m.location})" if m.resolves else m.problem or "not found"))
    if not report.ok:
        lines.append("Problems: " + "; ".join(report.problems))
    elif report.gpu_unavailable:
        lines.append("No GPU is visible here: only simulator studies (autospec optimize --sim) can run on this host")
    else:
        lines.append("OK")
    return "\n".join(lines)
