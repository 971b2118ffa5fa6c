"""Failures that rule out the whole search space, so the study ends at once.

A launch failure rules out every configuration when no searched parameter can change it
and no launch of the study ever came up:

- ``weights_oom``: weights load before the KV pool is sized (SGLang 0.5.x), so only
  flags that change what is loaded or how it is split help; when the space searches
  none of them (`WEIGHT_FLAGS`), every proposal would fail the same way. The line names
  what the weights need per GPU, what the GPU had and the smallest ``--tp-size`` that
  fits them where those are known (`autospec.study.weights_fit`).
- ``rejected_args`` for an unrecognized argument that is not searched: it comes from
  ``[server.flags]`` / ``--flag`` and is on every launch's command line.

Only failures launched by this command count (the ``invocation`` of their worker record,
`autospec.study.processes.identity.invocation_id`): after the user fixes the cause
(freed the GPUs, installed a newer SGLang) the same command resumes and searches again;
changed fixed flags (``--tp-size 4``) make another study anyway. A local model path that
does not exist is caught before any launch. Pure logic apart from one ``Path.exists``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from autospec.errors import NothingCanStart
from autospec.records.schema import MEASURED_OUTCOMES, TrialRecord
from autospec.records.stored import StoredTrial
from autospec.study.proposing.compiled import CompiledSpace
from autospec.study.weights_fit import CAPACITY, ModelSize, weights_fit_phrase

__all__ = [
    "ModelSize",
    "NothingCanStart",
    "WEIGHT_FLAGS",
    "missing_model_path",
    "space_wide_failure",
    "raise_if_nothing_can_start",
]

# Flags (SGLang 0.5.23 ServerArgs field names) that change which weights are loaded on a GPU.
WEIGHT_FLAGS = frozenset(
    {
        "model_path",
        "tp_size",
        "pp_size",
        "dp_size",
        "ep_size",
        "quantization",
        "dtype",
        "load_format",
        "enable_dp_attention",
        "speculative_algorithm",
        "speculative_draft_model_path",
        "speculative_draft_model_quantization",
        "cpu_offload_gb",
    }
)
_LOG = re.compile(r"\(log: ([^)]+)\)")
_UNRECOGNIZED = re.compile(r"unrecognized arguments:\s*(.+?)(?:;|$)")


def _unrecognized(reason: str) -> list[str]:
    """The flag names argparse called unrecognized in `reason` (``--x-y`` -> ``x_y``)."""
    m = _UNRECOGNIZED.search(reason)
    if m is None:
        return []
    return [w.lstrip("-").replace("-", "_") for w in m.group(1).split() if w.startswith("--")]


def _weights_line(number: int, record: TrialRecord, fixed: Mapping[str, Any], size: ModelSize) -> str:
    """The weights-do-not-fit line: with the sizes (what the weights need per GPU, what the
    GPU had, a tp size that fits: `weights_fit_phrase`) where they are known, else the
    GPU's capacity from the reason (torch's OOM text); the server log when the reason
    (the launcher's log note) names it."""
    reason = record.reason
    log = _LOG.search(reason)
    where = f" (log: {log.group(1)})" if log else ""
    study = "run again with another --study name (fixed flags belong to the study)"
    fit = weights_fit_phrase(reason, record.startup, {**fixed, **record.resolved}, size)
    if fit is not None:
        need, fix = fit
        return f"nothing can start (trial {number}): {need}, and no searched flag changes what is loaded; {fix}; {study}{where}"
    capacity = CAPACITY.search(reason)
    gpu = f"; {capacity.group(0)}" if capacity else ""
    return (
        f"nothing can start: the model's weights do not fit in GPU memory at tp_size {fixed.get('tp_size', 1)} "
        f"(trial {number}{gpu}) and no searched flag changes what is loaded; use more GPUs (--tp-size N) "
        f"or a quantized or smaller model, and {study}{where}"
    )


def space_wide_failure(
    trials: Sequence[StoredTrial],
    searched: Collection[str],
    fixed: Mapping[str, Any],
    invocation: str,
    size: ModelSize | None = None,
) -> str | None:
    """The one-line reason nothing of the space can start, or None. `searched`: the flag
    names the study searches; `fixed`: the run's fixed flags (``[server.flags]`` with any
    the space narrowed to one value); `invocation`: this command's id; `size`: what is
    known of the model's size and the GPUs (`ModelSize`), for the weights line."""
    if any(t.record is not None and t.record.launched and t.record.outcome in MEASURED_OUTCOMES for t in trials):
        return None
    for t in trials:
        r = t.record
        if r is None or not r.launched or t.markers.reference is not None:
            continue
        if (t.worker or {}).get("invocation") != invocation:
            continue  # an earlier command's: its cause may be fixed since
        if r.outcome == "weights_oom" and not WEIGHT_FLAGS & set(searched):
            return _weights_line(t.number, r, fixed, size or ModelSize())
        unknown = [f for f in _unrecognized(r.reason) if f in fixed and f not in searched]
        if r.outcome == "rejected_args" and unknown:
            names = ", ".join("--" + f.replace("_", "-") for f in unknown)
            return (
                f"nothing can start: the installed SGLang does not know {names} (trial {t.number}: {r.reason}); "
                "remove it from [server.flags] / --flag or install an SGLang that has it, then run again"
            )
    return None


def missing_model_path(fixed: Mapping[str, Any], origin: str | None = None) -> str | None:
    """The one-line reason when the fixed ``model_path`` is a local path (absolute, or
    starting with ``.`` or ``~``) that does not exist, else None: a Hugging Face id is
    left to SGLang. `origin` (e.g. ``--model-path /x``) names where the path was given."""
    path = fixed.get("model_path")
    if not isinstance(path, str) or not path.startswith(("/", ".", "~")):
        return None
    if Path(path).expanduser().exists():
        return None
    where = origin or "model_path in [server.flags] (or --flag)"
    return f"nothing can start: the model path {path} does not exist; fix {where}"


def _fixed_flags(compiled: CompiledSpace) -> dict[str, Any]:
    """The run's fixed flags: ``[server.flags]`` with those the space narrowed to one value."""
    return {**compiled.space.server.flags, **compiled.fixed}


def raise_if_nothing_can_start(
    trials: Sequence[StoredTrial], compiled: CompiledSpace, invocation: str, size: ModelSize | None = None
) -> None:
    """Raise `NothingCanStart` when the local model path is missing or a failure of this
    command (already recorded) rules out the space; the loop calls it before each ask."""
    fixed = _fixed_flags(compiled)
    reason = missing_model_path(fixed, compiled.space.flag_origins.get("model_path")) or space_wide_failure(
        trials, {p.name for p in compiled.declared.params}, fixed, invocation, size
    )
    if reason is not None:
        raise NothingCanStart(reason)
