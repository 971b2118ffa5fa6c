"""How large a model checkpoint is on disk: what its weights need in GPU memory before
any sharding (an estimate: the loaded tensors are the checkpoint's tensors in the
checkpoint's dtype, unless a flag such as ``--quantization`` or ``--dtype`` changes them).

Read, in this order, from the model's folder (a local directory, or the snapshot of a
Hugging Face cache entry, as `autospec.launcher.doctor.resolve_model_path` finds it):

1. ``model.safetensors.index.json``: ``metadata.total_size``, the bytes of every tensor
   (written by transformers' ``save_pretrained`` / huggingface_hub for sharded checkpoints);
2. else the sizes of the ``*.safetensors`` files (a header of a few KB each besides the
   tensors);
3. else the sizes of ``pytorch_model*.bin`` files.

None when the path is not a local folder or cache entry or has none of these. Sizes are
in GB of 2**30 bytes, the unit of SGLang's memory log lines (``avail mem=... GB``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from autospec.launcher.doctor import resolve_model_path

__all__ = ["checkpoint_gb", "GB"]

GB = float(2**30)


def _index_total(folder: Path) -> int | None:
    try:
        meta = json.loads((folder / "model.safetensors.index.json").read_text()).get("metadata") or {}
    except (OSError, ValueError, AttributeError):
        return None
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return int(total) if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0 else None


def _files_total(folder: Path, pattern: str) -> int | None:
    try:
        sizes = [p.stat().st_size for p in folder.glob(pattern) if p.is_file()]
    except OSError:
        return None
    return sum(sizes) if sizes and sum(sizes) > 0 else None


def checkpoint_gb(model_path: str, hf_cache_dirs: Sequence[Path] = ()) -> float | None:
    """The checkpoint's size in GB (2**30 bytes), or None when it cannot be read here."""
    status = resolve_model_path(model_path, hf_cache_dirs)
    if not status.resolves or status.location is None:
        return None
    folder = Path(status.location)
    if not folder.is_dir():
        return None
    total = _index_total(folder) or _files_total(folder, "*.safetensors") or _files_total(folder, "pytorch_model*.bin")
    return total / GB if total else None
