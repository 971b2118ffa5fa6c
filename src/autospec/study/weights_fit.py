"""How much the weights need per GPU, what a GPU had, and the smallest ``--tp-size`` at
which they would fit: the sizes in the weights-do-not-fit line (pure).

Sources, each used only when it is known (nothing is guessed):

- the weights: `ModelSize`, the checkpoint's size on disk (`autospec.launcher.checkpoint`;
  for the simulator, its profile's model), a separate draft model's added under
  speculation (not for NGRAM, which has none). Per GPU they are split over
  ``tp_size x pp_size`` ranks (SGLang shards the layers over tensor-parallel ranks and
  the layers over pipeline stages; the few replicated tensors, norms, are ignored).
- what a GPU had: the failed launch's ``Load weight begin. avail mem=P GB`` (sglang
  0.5.4-0.5.23, the free memory the weights must fit in, recorded in the trial's
  ``startup``), else the capacity in torch's OOM text (``GPU 0 has a total capacity of
  95.59 GiB``; torch 2.x `CUDACachingAllocator`).
- the GPUs the study may use: ``--gpus`` (distinct GPUs), else the host's (NVML; the
  simulator's profile).

A tp size is suggested among powers of two (tensor parallelism splits attention heads
evenly, and head counts are powers of two or multiples of them for nearly every model),
at most the GPUs available; when the sizes say the weights would fit at the tp size that
failed, they do not explain the failure and no line is made (the caller keeps the plain
wording). GB are 2**30 bytes, as in SGLang's log lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CAPACITY", "ModelSize", "weights_fit_phrase"]

#: torch 2.x CUDACachingAllocator OOM text: "GPU 0 has a total capacity of 95.59 GiB"
CAPACITY = re.compile(r"GPU (\d+) has a total capacity of ([\d.]+) (GiB|MiB)")
_UNIT = {"GiB": 1.0, "MiB": 1.0 / 1024}


@dataclass(frozen=True)
class ModelSize:
    """Known outside the launches: the whole target checkpoint and a separate draft model
    (GB, None where unknown) and the GPUs the study may use (None: unknown)."""

    target_gb: float | None = None
    draft_gb: float | None = None
    gpus: int | None = None


def _int(value: Any, default: int = 1) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def _room(reason: str, startup: Mapping[str, Any] | None) -> tuple[float, str] | None:
    """(GB a GPU had for the weights, how to say it), or None when neither figure is known."""
    capacity = CAPACITY.search(reason)
    gpu = f"GPU {capacity.group(1)}" if capacity else "the GPU"
    total = float(capacity.group(2)) * _UNIT[capacity.group(3)] if capacity else None
    free = (startup or {}).get("gpu_mem_before_load_gb")
    if isinstance(free, (int, float)) and free > 0:
        of = f" (of {total:.2f} GB)" if total else ""
        return float(free), f"{gpu} had {float(free):.2f} GB free before loading{of}"
    if total:
        return total, f"{gpu} has {total:.2f} GB in all"
    return None


def _draft_gb(flags: Mapping[str, Any], size: ModelSize) -> float:
    algorithm = str(flags.get("speculative_algorithm") or "").upper()
    if not algorithm or algorithm == "NGRAM" or not size.draft_gb:
        return 0.0
    return size.draft_gb


def weights_fit_phrase(
    reason: str, startup: Mapping[str, Any] | None, flags: Mapping[str, Any], size: ModelSize
) -> tuple[str, str] | None:
    """(what the weights need against what the GPU had, what to do), or None when the
    sizes are not known or do not explain the failure. `reason`: the failed launch's
    reason (torch's OOM text); `startup`: its recorded startup facts; `flags`: its
    resolved flags (tp_size, pp_size, speculative_algorithm)."""
    if not size.target_gb:
        return None
    room = _room(reason, startup)
    if room is None:
        return None
    available, had = room
    tp, pp = _int(flags.get("tp_size")), _int(flags.get("pp_size"))
    whole = size.target_gb + _draft_gb(flags, size)
    if whole / (tp * pp) <= available:
        return None  # by these sizes they fit: something else (other processes, a bigger dtype) failed them
    parts = f" (target {size.target_gb:.1f} GB + draft {whole - size.target_gb:.1f} GB)" if whole > size.target_gb else ""
    need = f"the model's weights{parts} need about {whole / (tp * pp):.1f} GB per GPU at tp_size {tp}, {had}"
    limit = max(size.gpus // pp, 1) if size.gpus else None
    n = 1
    while whole / (n * pp) > available and (limit is None or n * 2 <= limit):
        n *= 2
    if whole / (n * pp) <= available and n > tp:
        host = "" if limit is not None else f" (with {n * pp} GPUs)"
        return need, f"use --tp-size {n}, the smallest that fits them (about {whole / (n * pp):.1f} GB per GPU){host}"
    return need, (
        f"even --tp-size {n} (all {size.gpus} GPUs) needs about {whole / (n * pp):.1f} GB per GPU; "
        "use a quantized or smaller model, or more GPUs"
    )
