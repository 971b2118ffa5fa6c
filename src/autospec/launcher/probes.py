"""GPU memory probes: who holds how much GPU memory right now.

    GpuProbe            base class; snapshot() -> GpuSnapshot
    ├── NvmlGpuProbe    NVIDIA's NVML through nvidia-ml-py (module `pynvml`), imported lazily
    ├── SimGpuProbe     the simulator's recorded memory: <state_dir>/<pid>.json files
    └── NullGpuProbe    knows nothing (CPU hosts); teardown then reports memory as unknown

Contract: ``snapshot()`` never blocks for long and raises only :class:`ProbeUnavailable`.
``GpuSnapshot.used_mb`` is memory in use per GPU index, ``pids`` the processes NVML (or the
simulator) lists as holding memory. NVML reports PIDs of the host's PID namespace: inside a
container they may not match this process's view, which is why teardown also waits for the
memory itself to return to its pre-launch level.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autospec.errors import RuntimeFailure
from autospec.launcher.proctree import is_alive

__all__ = [
    "GpuProcess",
    "GpuSnapshot",
    "GpuProbe",
    "NvmlGpuProbe",
    "SimGpuProbe",
    "NullGpuProbe",
    "ProbeUnavailable",
    "memory_returned",
]

_MIB = 1024 * 1024


class ProbeUnavailable(RuntimeFailure):
    """The probe cannot read GPU state on this host (no NVML library, no driver, no GPU)."""


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on one GPU."""

    pid: int
    gpu: int
    mem_mb: float
    cmdline: str = ""


@dataclass(frozen=True)
class GpuSnapshot:
    """GPU memory at one instant."""

    used_mb: Mapping[int, float]
    pids: frozenset[int]
    total_mb: Mapping[int, float] = field(default_factory=dict)
    names: Mapping[int, str] = field(default_factory=dict)
    processes: tuple[GpuProcess, ...] = ()


def memory_returned(now: GpuSnapshot, baseline: GpuSnapshot, tolerance_mb: float) -> bool:
    """True when every GPU uses at most its baseline memory plus ``tolerance_mb``."""
    return all(now.used_mb.get(gpu, 0.0) <= used + tolerance_mb for gpu, used in baseline.used_mb.items()) and all(
        used <= tolerance_mb for gpu, used in now.used_mb.items() if gpu not in baseline.used_mb
    )


class GpuProbe(ABC):
    """Reads GPU memory. ``observes_memory`` is False for a probe that cannot see any."""

    observes_memory: bool = True

    @abstractmethod
    def snapshot(self) -> GpuSnapshot:
        """Memory per GPU and the PIDs holding it, now."""

    def uuids(self) -> tuple[str, ...]:
        """The UUIDs of the GPUs it watches, in index order; () where it cannot name them."""
        return ()


class NullGpuProbe(GpuProbe):
    """For hosts without GPUs: always empty, and teardown reports memory as unknown."""

    observes_memory = False

    def snapshot(self) -> GpuSnapshot:
        return GpuSnapshot(used_mb={}, pids=frozenset())


class NvmlGpuProbe(GpuProbe):
    """NVML (``pip install nvidia-ml-py``); ``gpus`` limits it to those NVML indices.

    Raises :class:`ProbeUnavailable` at construction when NVML cannot be used here.
    """

    def __init__(self, gpus: Sequence[int] | None = None, nvml: Any = None) -> None:
        self._nvml = nvml if nvml is not None else _import_pynvml()
        try:
            self._nvml.nvmlInit()
            count = int(self._nvml.nvmlDeviceGetCount())
        except Exception as exc:  # pynvml raises its own NVMLError subclasses
            raise ProbeUnavailable(f"NVML could not start: {exc}") from exc
        if count == 0:
            raise ProbeUnavailable("NVML sees no GPU")
        indices = list(range(count)) if gpus is None else [i for i in gpus if 0 <= i < count]
        self._handles = {i: self._nvml.nvmlDeviceGetHandleByIndex(i) for i in indices}

    def uuids(self) -> tuple[str, ...]:
        """NVML's ``nvmlDeviceGetUUID`` per watched GPU ("GPU-f8f0..."; taken as str or bytes,
        as pynvml releases differ: nvidia-ml-py 13.610.43 with driver 580.159.04 on an H200
        returned str, checked 2026-12-04); () when NVML fails."""
        try:
            found = [self._nvml.nvmlDeviceGetUUID(h) for _, h in sorted(self._handles.items())]
        except Exception:  # pynvml raises its own NVMLError subclasses
            return ()
        return tuple(u.decode() if isinstance(u, bytes) else str(u) for u in found)

    def snapshot(self) -> GpuSnapshot:
        nvml = self._nvml
        used: dict[int, float] = {}
        total: dict[int, float] = {}
        names: dict[int, str] = {}
        processes: list[GpuProcess] = []
        try:
            for index, handle in self._handles.items():
                info = nvml.nvmlDeviceGetMemoryInfo(handle)
                used[index] = info.used / _MIB
                total[index] = info.total / _MIB
                name = nvml.nvmlDeviceGetName(handle)
                names[index] = name.decode() if isinstance(name, bytes) else str(name)
                for proc in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    mem = getattr(proc, "usedGpuMemory", None)
                    processes.append(GpuProcess(int(proc.pid), index, (mem or 0) / _MIB))
        except Exception as exc:
            raise ProbeUnavailable(f"NVML query failed: {exc}") from exc
        return GpuSnapshot(
            used_mb=used,
            pids=frozenset(p.pid for p in processes),
            total_mb=total,
            names=names,
            processes=tuple(processes),
        )


def _import_pynvml() -> Any:
    try:
        import pynvml  # provided by the nvidia-ml-py package
    except ImportError as exc:
        raise ProbeUnavailable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from exc
    return pynvml


class SimGpuProbe(GpuProbe):
    """The simulator's recorded memory.

    Each holding process writes ``<state_dir>/<pid>.json`` =
    ``{"pid": int, "gpus": [int], "mem_mb": float, "cmdline": str}`` (``mem_mb`` held on
    each listed GPU). A file whose PID no longer runs does not count: a SIGKILLed process
    cannot remove its own file, just as the driver frees a dead process's memory.
    """

    def __init__(self, state_dir: Path | str, gpus: Sequence[int] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.gpus = None if gpus is None else frozenset(gpus)  # like NvmlGpuProbe: only these

    def snapshot(self) -> GpuSnapshot:
        used: dict[int, float] = {}
        processes: list[GpuProcess] = []
        try:
            entries = sorted(self.state_dir.glob("*.json"))
        except OSError:
            entries = []
        for path in entries:
            record = _read_record(path)
            if record is None:
                continue
            pid = int(record["pid"])
            if not is_alive(pid):
                continue
            mem = float(record.get("mem_mb", 0.0))
            for gpu in record.get("gpus", [0]):
                if self.gpus is not None and int(gpu) not in self.gpus:
                    continue
                used[int(gpu)] = used.get(int(gpu), 0.0) + mem
                processes.append(GpuProcess(pid, int(gpu), mem, str(record.get("cmdline", ""))))
        return GpuSnapshot(used_mb=used, pids=frozenset(p.pid for p in processes), processes=tuple(processes))


def _read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # being written, or removed between glob and read
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return None
    return record
