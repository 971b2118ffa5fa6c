"""Failure classification from a server's exit status and log: the one table of log patterns.

Contract:

- :data:`FAILURE_PATTERNS` is the only place that lists the strings the classifier looks
  for. Each needle is a plain substring. Those with ``origin == "sglang"`` occur literally
  in SGLang's source (checked against the wheels named in ``checked``), so a CI test can
  assert they still do; the others come from torch/CUDA, Python's argparse or the OS.
- :func:`classify_failure` is pure: log text + exit status -> one :class:`LaunchError`
  instance whose class names the cause. Precedence is fixed (:data:`CLASSIFY_ORDER`);
  nothing is guessed: without a matching pattern the answer is
  :class:`UnknownLaunchFailure` (or :class:`StartupTimeout` / :class:`ServerCrashed`,
  which follow from how the launch ended, not from the log) with the log tail.
- :data:`RUNTIME_EVENT_PATTERNS` are lines counted while a server runs (for example KV-cache
  retractions); they are not failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autospec.launcher.errors import (
    ArgumentsRejected,
    CudaGraphOOM,
    ForeignGpuMemory,
    KvPoolTooSmall,
    LaunchError,
    PortInUse,
    ServerCrashed,
    StartupTimeout,
    UnknownLaunchFailure,
    WeightsOOM,
)

__all__ = [
    "LogPattern",
    "FAILURE_PATTERNS",
    "RUNTIME_EVENT_PATTERNS",
    "CLASSIFY_ORDER",
    "classify_failure",
    "find_cause",
    "log_tail",
    "last_exception_line",
    "strip_log_prefix",
]

_BOTH = ("0.5.16", "0.5.23")


@dataclass(frozen=True)
class LogPattern:
    """One string the launcher looks for in a server log.

    ``role``: ``"cause"`` (a line containing the needle decides the kind), ``"frame"``
    (a traceback frame name: decides the kind only together with an exception line and
    before any ``"guard"`` line), ``"guard"`` (marks that model initialisation began),
    ``"event"`` (a runtime event to count).
    """

    kind: str
    needle: str
    origin: str  # "sglang" | "torch" | "python" | "os"
    checked: tuple[str, ...]
    role: str = "cause"
    ignore_case: bool = False
    note: str = ""

    @property
    def in_sglang_source(self) -> bool:
        """True when the needle is text of SGLang's own source (a CI test asserts it)."""
        return self.origin == "sglang"

    def matches(self, line: str) -> bool:
        if self.ignore_case:
            return self.needle.lower() in line.lower()
        return self.needle in line


FAILURE_PATTERNS: tuple[LogPattern, ...] = (
    # --- port in use -------------------------------------------------------------------
    LogPattern(
        "port_in_use",
        "address already in use",
        "os",
        _BOTH,
        ignore_case=True,
        note="strerror(EADDRINUSE): uvicorn's '[Errno 98] error while attempting to bind on "
        "address (...): address already in use' (0.5.16) and SGLang's logger.error(OSError) "
        "'[Errno 98] Address already in use' in _reserve_reuseport_socket (0.5.23); printed "
        "after the model load, when the HTTP server binds",
    ),
    LogPattern(
        "port_in_use",
        "Port is already in use.",
        "sglang",
        _BOTH,
        note="server_args.PortArgs.init_new: ZMQ/NCCL ports derived from --port (DP attention)",
    ),
    # --- arguments rejected --------------------------------------------------------------
    LogPattern(
        "rejected_args",
        ": error: unrecognized arguments",
        "python",
        _BOTH,
        note="argparse: 'launch_server.py: error: unrecognized arguments: --x' (exit 2)",
    ),
    LogPattern(
        "rejected_args",
        ": error: argument ",
        "python",
        _BOTH,
        note="argparse: 'launch_server.py: error: argument --x: invalid choice ...' (exit 2)",
    ),
    LogPattern(
        "rejected_args",
        "prepare_server_args",
        "sglang",
        _BOTH,
        role="frame",
        note="0.5.16 validates in ServerArgs.__post_init__ (speculative_hook and others) "
        "under prepare_server_args; real example: ngram.log (ValueError, exit 1)",
    ),
    LogPattern(
        "rejected_args",
        "resolve_once",
        "sglang",
        ("0.5.23",),
        role="frame",
        note="0.5.23 validates in ServerArgs.resolve_once -> run_resolution_pipeline, called "
        "by launch_server.run_server before any subprocess starts",
    ),
    LogPattern(
        "rejected_args",
        "CUDA error: invalid device ordinal",
        "torch",
        _BOTH,
        note="more GPUs asked for (tp_size x pp_size) than the host has: a scheduler rank's "
        "ModelRunner.__init__ calls set_device(gpu_id) with gpu_id >= the device count (0.5.23 "
        "model_executor/model_runner.py:455) before anything loads; torch raises "
        "'torch.AcceleratorError: CUDA error: invalid device ordinal' + 'GPU device may be out of "
        "range, do you have enough GPUs?' (captured: torch 2.11.0+cu130, 1-GPU H200). A layout "
        "this host cannot run, so no memory setting helps",
    ),
    LogPattern(
        "rejected_args",
        "Load weight begin",
        "sglang",
        _BOTH,
        role="guard",
        note="model_runner: printed before loading weights; a ValueError after it is not an argument rejection",
    ),
    # --- GPU memory held by someone else ------------------------------------------------
    LogPattern(
        "foreign_gpu_memory",
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
        "sglang",
        _BOTH,
        note="distributed/bootstrap._check_tp_memory_balance: RuntimeError while "
        "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is on (its default), a warning otherwise",
    ),
    # --- KV pool too small ---------------------------------------------------------------
    LogPattern(
        "kv_pool_too_small",
        "Loaded weights leave no GPU memory for the KV cache",
        "sglang",
        _BOTH,
        note="mem_cache/kv_cache_configurator._profile_available_bytes (ValueError); the "
        "wording seen on the H200 with 0.5.16 (kvsmall.log)",
    ),
    LogPattern(
        "kv_pool_too_small",
        "Not enough memory. Please try to increase --mem-fraction-static.",
        "sglang",
        _BOTH,
        note="model_executor/pool_configurator.MemoryPoolConfig.__post_init__ (RuntimeError, "
        "0.5.x) and model_runner.init_memory_pool in older versions (0.4.x)",
    ),
    # --- CUDA-graph capture --------------------------------------------------------------
    LogPattern(
        "cuda_graph_oom",
        "Capture cuda graph failed",
        "sglang",
        _BOTH,
        note="decode_cuda_graph_runner and eagle_draft(_extend)_cuda_graph_runner: "
        "'Exception: Capture cuda graph failed: <error>' + advice to lower "
        "--mem-fraction-static / --cuda-graph-max-bs-decode; the <error> is usually a CUDA OOM",
    ),
    # --- out of memory outside graph capture (weights) ----------------------------------
    LogPattern(
        "weights_oom",
        "torch.OutOfMemoryError",
        "torch",
        _BOTH,
        note="the exception class name in the traceback (torch >= 2.5)",
    ),
    LogPattern(
        "weights_oom",
        "CUDA out of memory",
        "torch",
        _BOTH,
        note="the caching allocator's message: 'CUDA out of memory. Tried to allocate ...'",
    ),
    LogPattern(
        "weights_oom",
        "CUDA error: out of memory",
        "torch",
        _BOTH,
        note="a raw cudaMalloc failure surfaced as RuntimeError",
    ),
)

RUNTIME_EVENT_PATTERNS: tuple[LogPattern, ...] = (
    LogPattern(
        "retractions",
        "KV cache pool is full. Retract requests.",
        "sglang",
        _BOTH,
        role="event",
        note="managers/scheduler: decode found no free KV slots and retracted requests",
    ),
)

#: Causes are tried in this order; the first that matches wins. Port and argument
#: problems come first (they happen before any GPU work), foreign memory before the
#: OOM kinds it provokes, graph capture before the generic OOM its message contains.
CLASSIFY_ORDER: tuple[str, ...] = (
    "port_in_use",
    "rejected_args",
    "foreign_gpu_memory",
    "kv_pool_too_small",
    "cuda_graph_oom",
    "weights_oom",
)

_ERROR_FOR_CAUSE: dict[str, type[LaunchError]] = {
    "port_in_use": PortInUse,
    "rejected_args": ArgumentsRejected,
    "foreign_gpu_memory": ForeignGpuMemory,
    "kv_pool_too_small": KvPoolTooSmall,
    "cuda_graph_oom": CudaGraphOOM,
    "weights_oom": WeightsOOM,
}

_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]\s*")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit)):\s?(.*)$")
_TAIL_LINES = 40
_MAX_EXCERPT_CHARS = 4000


def strip_log_prefix(line: str) -> str:
    """``[2026-11-29 09:55:06 TP0] text`` -> ``text``."""
    return _LOG_PREFIX.sub("", line, count=1)


def _physical_lines(log_text: str) -> list[str]:
    """Lines split on newlines only: a progress bar's carriage-return frames stay together."""
    return log_text.split("\n")


def _display(line: str) -> str:
    """A physical line reduced to its last carriage-return frame (what a terminal shows)."""
    if "\r" in line:
        frames = [f for f in line.split("\r") if f.strip()]
        line = frames[-1] if frames else ""
    return line.rstrip()


def _clean_lines(log_text: str) -> list[str]:
    """Log lines as a terminal shows them (progress bars reduced to their last frame)."""
    lines = [_display(line) for line in _physical_lines(log_text)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _cap(text: str) -> str:
    if len(text) <= _MAX_EXCERPT_CHARS:
        return text
    kept = text[-_MAX_EXCERPT_CHARS:]
    return "...\n" + kept.split("\n", 1)[-1]


def log_tail(log_text: str, lines: int = _TAIL_LINES) -> str:
    """The last ``lines`` lines (progress bars cleaned), at most a few thousand characters."""
    return _cap("\n".join(_clean_lines(log_text)[-lines:]))


def last_exception_line(log_text: str) -> str | None:
    """The last ``SomeError: message`` line of the log (timestamp prefix removed), if any."""
    for line in reversed(_clean_lines(log_text)):
        match = _EXCEPTION_LINE.match(strip_log_prefix(line).strip())
        if match:
            return match.group(0)
    return None


@dataclass(frozen=True)
class Cause:
    """A cause found in a log: its kind, the line that proves it, and surrounding lines."""

    kind: str
    line: str
    excerpt: str


def _excerpt(lines: list[str], index: int, before: int = 3, after: int = 6) -> str:
    return _cap("\n".join(lines[max(index - before, 0) : index + after + 1]))


def _find_frame_cause(kind: str, lines: list[str]) -> Cause | None:
    """A validation error raised by SGLang's argument code before model init."""
    frames = [p for p in FAILURE_PATTERNS if p.kind == kind and p.role == "frame"]
    guards = [p for p in FAILURE_PATTERNS if p.kind == kind and p.role == "guard"]
    frame_at = next((i for i, line in enumerate(lines) if any(p.matches(line) for p in frames)), None)
    if frame_at is None:
        return None
    if any(any(g.matches(line) for g in guards) for line in lines[:frame_at]):
        return None
    for i in range(len(lines) - 1, frame_at, -1):
        text = strip_log_prefix(lines[i]).strip()
        if _EXCEPTION_LINE.match(text):
            return Cause(kind, text, _excerpt(lines, i, before=4, after=1))
    return None


def find_cause(log_text: str) -> Cause | None:
    """The first cause in :data:`CLASSIFY_ORDER` that the log proves, or None."""
    raw_lines = _physical_lines(log_text)
    lines = [_display(line) for line in raw_lines]
    for kind in CLASSIFY_ORDER:
        for pattern in FAILURE_PATTERNS:
            if pattern.kind != kind or pattern.role != "cause":
                continue
            for i, raw in enumerate(raw_lines):
                if pattern.matches(raw):
                    shown = lines[i] if pattern.matches(lines[i]) else raw.replace("\r", " ")
                    return Cause(kind, strip_log_prefix(shown).strip(), _excerpt(lines, i))
        frame_cause = _find_frame_cause(kind, lines)
        if frame_cause is not None:
            return frame_cause
    return None


def classify_failure(
    log_text: str,
    returncode: int | None,
    *,
    timed_out: bool = False,
    after_ready: bool = False,
    log_path: Path | str | None = None,
    seconds: float | None = None,
) -> LaunchError:
    """The typed error for a server that exited (``returncode``), timed out or died serving.

    - ``after_ready``: it had answered readiness, so any death is :class:`ServerCrashed`
      (the start-up causes cannot apply); the detail is the last exception line.
    - otherwise a cause found in the log wins (also on a timeout: a server that printed
      its failure and then hung); then ``timed_out`` gives :class:`StartupTimeout`;
      else :class:`UnknownLaunchFailure` with the log tail.
    """

    def error(cls: type[LaunchError], detail: str, excerpt: str) -> LaunchError:
        return cls(detail, log_excerpt=excerpt, log_path=log_path, seconds=seconds, returncode=returncode)

    exception = last_exception_line(log_text) or ""
    if after_ready:
        return error(ServerCrashed, exception, log_tail(log_text))
    cause = find_cause(log_text)
    if cause is not None:
        return error(_ERROR_FOR_CAUSE[cause.kind], cause.line, cause.excerpt)
    if timed_out:
        waited = f"not ready after {seconds:g} s" if seconds is not None else ""
        return error(StartupTimeout, waited, log_tail(log_text))
    return error(UnknownLaunchFailure, exception, log_tail(log_text))
