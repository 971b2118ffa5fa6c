"""The simulator's record of the GPU memory it "holds" (docs/architecture.md, shared conventions).

One JSON file per holding process, ``<state_dir>/<pid>.json`` =
``{"pid": int, "gpus": [int], "mem_mb": float, "cmdline": str}``, where ``mem_mb`` is the
memory held on *each* GPU listed. A file whose PID is not alive does not count (a
SIGKILLed process cannot remove its own file); readers (``launcher.probes.SimGpuProbe``)
must check liveness. Writes are atomic (temporary file + rename) so a reader never sees a
half-written file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path


class GpuStateFile:
    """The state file of one process; a no-op when ``state_dir`` is None."""

    def __init__(self, state_dir: str | os.PathLike[str] | None, pid: int | None = None) -> None:
        self.pid = os.getpid() if pid is None else pid
        self.path = None if state_dir is None else Path(state_dir) / f"{self.pid}.json"

    def write(self, gpus: Sequence[int], mem_mb: float, cmdline: str) -> None:
        """Record that this process holds ``mem_mb`` MB on each of ``gpus``."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = {"pid": self.pid, "gpus": list(gpus), "mem_mb": round(float(mem_mb), 1), "cmdline": cmdline}
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self.path)

    def remove(self) -> None:
        """Forget the record (idempotent)."""
        if self.path is None:
            return
        self.path.unlink(missing_ok=True)
