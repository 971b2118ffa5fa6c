"""GPU slots: the GPUs of one host split into groups that each run one trial at a time.

`--gpus 0-7` lists the GPUs a study may use (NVML / PCI bus order); a slot is
`gpus_per_trial` of them, by default ``tp_size x pp_size x dp_size`` of the fixed server
flags (``dp_size`` counts only without ``enable_dp_attention``: with it, the data-parallel
attention ranks share the tensor-parallel GPUs; SGLang 0.5.16). A GPU may be listed more
than once (``--gpus 0,0``): two slots then share it, each server sized by its own
``mem_fraction_static``; teardown then waits for the stopped server's own processes to
leave the GPU instead of for the GPU's total to return (`SlotPlan.shared`).

Each slot's server gets ``CUDA_VISIBLE_DEVICES`` of its GPUs (with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so CUDA numbers them as NVML does) and a window of
ports of its own, from which the launcher picks the HTTP port and SGLang's NCCL port.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autospec.errors import UsageError
from autospec.feasibility.learned import MEMORY_FAILURES

__all__ = ["Slot", "SlotPlan", "parse_gpus", "plan_slots", "gpus_per_trial_of", "crowded_out", "PORT_BASE", "PORT_SPAN"]

# Slot k picks its ports in [PORT_BASE + k*PORT_SPAN, PORT_BASE + (k+1)*PORT_SPAN): below
# Linux's ephemeral range (32768+), so no client socket takes them, and apart from
# SGLang's own random NCCL choice (22000-29999, used only when no --nccl-port is given).
PORT_BASE = 30000
PORT_SPAN = 100
_ITEM = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class Slot:
    """One slot: its index on this host, its GPUs and its port window."""

    index: int
    gpus: tuple[int, ...]
    shared: bool = False  # another slot uses one of these GPUs too

    @property
    def ports(self) -> range:
        start = PORT_BASE + self.index * PORT_SPAN
        return range(start, start + PORT_SPAN)

    def env(self) -> dict[str, str]:
        """What the slot's server inherits: its GPUs, numbered as NVML numbers them."""
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in self.gpus), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def describe(self) -> str:
        gpus = ",".join(str(g) for g in self.gpus)
        return (
            f"slot {self.index}: GPU {gpus}"
            + (" (shared)" if self.shared else "")
            + f", ports {self.ports.start}-{self.ports.stop - 1}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "gpus": list(self.gpus), "shared": self.shared}


@dataclass(frozen=True)
class SlotPlan:
    """The slots of one host, and the listed GPUs no slot uses (too few for another slot)."""

    slots: tuple[Slot, ...]
    unused: tuple[int, ...] = ()

    def describe(self) -> list[str]:
        lines = [s.describe() for s in self.slots]
        if self.unused:
            lines.append(f"unused: GPU {','.join(str(g) for g in self.unused)} (fewer than one slot's worth)")
        return lines


def parse_gpus(text: str) -> tuple[int, ...]:
    """``"0-3"``, ``"0,2,4"``, ``"0-1,4-5"`` or ``"0,0"`` (a GPU listed twice: two slots
    share it) -> GPU indices in the order given. A one-line UsageError otherwise."""
    gpus: list[int] = []
    for item in (part.strip() for part in text.split(",")):
        match = _ITEM.match(item)
        if not match:
            raise UsageError(f"--gpus {text!r}: {item!r} is not a GPU index or range; e.g. --gpus 0-7 or --gpus 0,1,4,5")
        low, high = int(match.group(1)), int(match.group(2) or match.group(1))
        if high < low:
            raise UsageError(f"--gpus {text!r}: range {item!r} runs backwards; write {high}-{low}")
        gpus.extend(range(low, high + 1))
    return tuple(gpus)


def gpus_per_trial_of(flags: Mapping[str, Any]) -> int:
    """GPUs one server of these fixed flags occupies (see the module docstring)."""

    def size(name: str) -> int:
        value = flags.get(name)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    dp = 1 if flags.get("enable_dp_attention") else size("dp_size")
    return size("tp_size") * size("pp_size") * dp


def plan_slots(gpus: Sequence[int], per_trial: int) -> SlotPlan:
    """Consecutive groups of `per_trial` of `gpus`; a remainder is left unused. A one-line
    UsageError when not even one slot fits or a slot would list one GPU twice."""
    if per_trial < 1:
        raise UsageError(f"--gpus-per-trial {per_trial} must be at least 1")
    if len(gpus) < per_trial:
        raise UsageError(
            f"--gpus lists {len(gpus)} GPU(s) but one trial needs {per_trial} (tp_size x pp_size x dp_size, "
            "or --gpus-per-trial); list more GPUs or lower --gpus-per-trial"
        )
    count = len(gpus) // per_trial
    groups = [tuple(gpus[k * per_trial : (k + 1) * per_trial]) for k in range(count)]
    for group in groups:
        if len(set(group)) < len(group):
            raise UsageError(
                f"--gpus: a slot of {per_trial} GPUs would hold GPU {group} twice; list a shared GPU once per slot, "
                "e.g. --gpus 0,0 with --gpus-per-trial 1"
            )
    listed = [g for group in groups for g in group]
    slots = tuple(Slot(k, group, shared=any(listed.count(g) > 1 for g in group)) for k, group in enumerate(groups))
    return SlotPlan(slots, tuple(gpus[count * per_trial :]))


def crowded_out(kind: str, teardown: Mapping[str, Any] | None) -> float | None:
    """On a GPU shared by slots: the MiB other processes held when a launch failed for
    memory (`kind`), read from its teardown report; None when that is not the case. Such a
    failure says how full the GPU was, not what the configuration needs: it is not learned
    as a memory limit (measured on the H200 with SGLang 0.5.16: at mem_fraction_static 0.3
    a second server failed with "Raise --mem-fraction-static above 0.309" while the first
    held 31% of the GPU; alone, the same flags start)."""
    if kind not in MEMORY_FAILURES or not teardown:
        return None
    others = teardown.get("gpu_others_mb_before")
    return float(others) if isinstance(others, (int, float)) and others > 0 else None
