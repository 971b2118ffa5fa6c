"""Before a study launches anything: who holds GPU memory, and may the study start?

Order (so that a killed tuner does not block its own resume): the run first recovers
(`recovery.recover` stops this study's leftover servers by their recorded identity);
then `GpuGuard.clear` looks at what still holds GPU memory:

- a server of this study (same name and storage, read from its environment,
  `owners.owner_of`) whose tuner is gone: stopped through the launcher's teardown
  (`leftovers.stop_processes`), said in the log;
- on a slot that shares its GPU (``--gpus 0,0``): a server of this study whose tuner
  still runs (the other slot) is left alone;
- anything else: refused with a one-line `UsageError` that says whose it is (another
  study's server and whether its tuner still runs, or an unknown process) and the one
  command that stops it safely, unless ``--allow-foreign-gpu-memory``.

The same guard runs against the simulator's recorded GPU memory with ``--sim``.
"""

from __future__ import annotations

from collections.abc import Callable

from autospec.errors import UsageError
from autospec.launcher import Launcher
from autospec.launcher.doctor import GpuHolder, gpu_holders
from autospec.launcher.probes import ProbeUnavailable
from autospec.study.processes.identity import find_launch_processes
from autospec.study.processes.owners import ServerOwner, owner_of
from autospec.study.processes.stopping import stop_processes

__all__ = ["GpuGuard", "describe_holder"]


def describe_holder(holder: GpuHolder, owner: ServerOwner | None) -> str:
    """One holder, for a message: PID, memory, command and whose it is."""
    what = f"pid {holder.pid} ({holder.mem_mb:.0f} MiB: {holder.cmdline[:60]})"
    if owner is None:
        return f"{what}, not a server of an autospec study (or its environment is not readable from here)"
    return f"{what} is {owner.describe()}"


def _fix(owner: ServerOwner | None) -> str:
    if owner is None:
        return "stop it (see autospec doctor) or pass --allow-foreign-gpu-memory"
    if owner.tuner_alive:
        return "wait for that study's tuner to finish or stop it (Ctrl-C), or pass --allow-foreign-gpu-memory"
    return f"stop it safely with: {owner.stop_command()}"


class GpuGuard:
    """Clears the way for study `study` in `storage` (see the module docstring)."""

    def __init__(
        self, launcher: Launcher, study: str, storage: str, allow_foreign: bool = False, shared_slot: bool = False
    ) -> None:
        self.launcher = launcher
        self.study = study
        self.storage = storage
        self.allow_foreign = allow_foreign
        self.shared_slot = shared_slot  # this run's GPU slot shares its GPU with other slots of the study

    def _holders(self) -> list[GpuHolder]:
        probe = self.launcher.probe
        if probe is None or not probe.observes_memory:
            return []
        try:
            return gpu_holders(probe)
        except ProbeUnavailable:
            return []

    def _ours(self, owner: ServerOwner | None) -> bool:
        return owner is not None and owner.study == self.study and owner.storage == self.storage and not owner.tuner_alive

    def _sibling(self, owner: ServerOwner | None) -> bool:
        """On a shared slot: a server of this very study whose tuner runs, i.e. another slot
        sharing the GPU by design (`--gpus 0,0`). Elsewhere the probe sees only the slot's
        own GPUs, so such a server is a second tuner on the same GPUs and is refused."""
        return (
            self.shared_slot
            and owner is not None
            and owner.study == self.study
            and owner.storage == self.storage
            and owner.tuner_alive
        )

    def clear(self, log: Callable[[str], None]) -> None:
        """Stop this study's leftover holders; refuse if others remain (UsageError)."""
        owners = {h.pid: owner_of(h.pid) for h in self._holders()}
        for launch_id in sorted({o.launch_id for o in owners.values() if o is not None and self._ours(o)}):
            procs = find_launch_processes([launch_id]).get(launch_id, {})
            if procs:
                log(
                    stop_processes(
                        f"leftover server of study {self.study} (launch {launch_id[:8]})", procs, None, None, self.launcher
                    )
                )
        if self.allow_foreign:
            return
        remaining = [h for h in self._holders() if not self._sibling(owner_of(h.pid))]
        if remaining:
            first = remaining[0]
            owner = owner_of(first.pid)
            raise UsageError(
                f"{len(remaining)} process(es) already hold GPU memory: {describe_holder(first, owner)}; {_fix(owner)}"
            )
