"""Startup facts parsed from an SGLang server log (pure).

Lines read (wording checked against sglang 0.5.16 logs from an H200 and the 0.5.16 and
0.5.23 source; older wording from 0.5.10-and-earlier logs):

- ``max_total_num_tokens=N, chunked_prefill_size=N, max_prefill_tokens=N,
  max_running_requests=N, context_len=N, available_gpu_mem=X GB`` (managers/scheduler,
  rank 0 only; all versions).
- ``KV Cache is allocated. dtype: ..., #tokens: N, K size: ...`` (0.5.16, 0.5.23; older
  versions omit ``dtype``; MLA pools print one ``KV size: X GB``). The first one is the
  target model's pool; a draft model prints a second, in the draft's KV dtype (sglang
  0.5.23 ``--speculative-draft-kv-cache-dtype``, ``mem_cache/memory_pool.py``
  ``_finalize_allocation_log``).
- CUDA-graph capture, summed over phases: 0.5.16+ prints one line per phase,
  ``Capture target verify CUDA graph end. elapsed=2.76 s, ...`` (also ``target prefill``,
  ``target decode``, ``draft prefill/decode/extend``); 0.5.10 and earlier print
  ``Capture cuda graph end. Time elapsed: 7.00 s`` once per model (target, draft).
- ``Load weight end. elapsed=0.17 s, ...``, summed over target and draft.
- ``The server is fired up and ready to roll!``: ``ready_seconds`` is the time from the
  first timestamped line to it (1 s resolution; the launcher replaces it with the
  wall-clock time it measured from spawn to readiness).

With tensor parallelism, lines carry a rank tag (``[time TP1]``); only rank 0 is read.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime

__all__ = ["StartupFacts", "parse_startup"]

_PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)([^\]]*)\]")
_NONZERO_RANK = re.compile(r"\b(?:TP|DP|PP|EP|CP|ATTN_CP|MOE_DP)0*[1-9]\d*\b")
_SUMMARY_INT = {
    "max_total_num_tokens": re.compile(r"max_total_num_tokens=(-?\d+)"),
    "chunked_prefill_size": re.compile(r"chunked_prefill_size=(-?\d+)"),
    "max_prefill_tokens": re.compile(r"max_prefill_tokens=(-?\d+)"),
    "max_running_requests": re.compile(r"max_running_requests=(-?\d+)"),
    "context_len": re.compile(r"context_len=(-?\d+)"),
}
_AVAILABLE_MEM = re.compile(r"available_gpu_mem=([\d.]+)\s*GB")
_KV_ALLOCATED = re.compile(r"KV Cache is allocated\..*?#tokens: (\d+)")
_KV_SIZES = re.compile(r"K size: ([\d.]+) GB, V size: ([\d.]+) GB")
_KV_SIZE = re.compile(r"KV size: ([\d.]+) GB")
_KV_DTYPE = re.compile(r"dtype: (torch\.\w+)")
# "Load weight begin. avail mem=139.13 GB" (sglang 0.5.4-0.5.23): free GPU memory before the
# weights, the base that --mem-fraction-static is a fraction of (per GPU).
_PRE_LOAD_MEM = re.compile(r"Load weight begin\. avail mem=([\d.]+) GB")
_GRAPH_END_PHASED = re.compile(r"Capture [\w -]*CUDA graph end\. elapsed=([\d.]+) s")
_GRAPH_END_OLD = re.compile(r"Capture (?:draft )?cuda graph end\. Time elapsed: ([\d.]+) s")
_WEIGHTS_END = re.compile(r"Load weight end\. elapsed=([\d.]+) s")
# "Capture target verify CUDA graph end. elapsed=2.76 s, mem usage=0.10 GB, avail mem=40.73 GB."
# (0.5.16, one line per phase) and "Capture cuda graph end. Time elapsed: 3.10 s. mem usage=1.20
# GB. avail mem=..." (older): the memory each capture took, summed over target and draft.
_GRAPH_MEM = re.compile(r"[Cc]apture [\w -]*(?:CUDA|cuda) graph end\..*?mem usage=([\d.]+) GB")
# "Capture ... graph begin ... avail mem=41.46 GB": free memory after the static pool, before graphs.
_GRAPH_BEGIN_FREE = re.compile(r"[Cc]apture [\w -]*(?:CUDA|cuda) graph begin\..*?avail mem=([\d.]+) GB")
_READY = "The server is fired up and ready to roll!"
#: ServerArgs fields read from the ``server_args=ServerArgs(...)`` line SGLang logs at startup
#: (sglang 0.5.4-0.5.23, after its own resolution): what the server really runs where a flag
#: was left to SGLang (a reference point's steps, top-k, draft tokens and memory fraction).
LOGGED_FLAGS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_adaptive",
    "mem_fraction_static",
)
_LOGGED_FLAG = re.compile(r"\b(" + "|".join(LOGGED_FLAGS) + r")=('[^']*'|None|True|False|-?\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class StartupFacts:
    """What a server said about itself while starting; None where the log did not say."""

    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_gb: float | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    kv_cache_tokens: int | None = None
    cuda_graph_seconds: float | None = None
    ready_seconds: float | None = None
    weight_load_seconds: float | None = None
    gpu_mem_before_load_gb: float | None = None  # per GPU, before the target's weights
    kv_cache_gb: float | None = None  # per GPU, K + V of the target model's pool
    cuda_graph_gb: float | None = None  # per GPU, memory the CUDA-graph captures took (target + draft)
    free_after_pool_gb: float | None = None  # per GPU, free after the static pool, before the graphs
    kv_cache_dtype: str | None = None  # the target pool's torch dtype, e.g. "torch.bfloat16"
    draft_kv_cache_gb: float | None = None  # per GPU, K + V of the draft model's pool (the second KV line)
    draft_kv_cache_dtype: str | None = None  # the draft pool's torch dtype
    logged_flags: dict | None = None  # `LOGGED_FLAGS` as the server's ServerArgs line gave them

    def as_dict(self) -> dict:
        return asdict(self)


def _rank0_lines(log_text: str) -> list[tuple[str | None, str]]:
    """(timestamp or None, line) for lines not tagged with a non-zero rank."""
    out = []
    for physical in log_text.split("\n"):
        for line in physical.split("\r"):
            match = _PREFIX.match(line)
            if match and _NONZERO_RANK.search(match.group(2)):
                continue
            out.append((match.group(1) if match else None, line))
    return out


def _sum_or_none(values: list[float]) -> float | None:
    return round(sum(values), 3) if values else None


def parse_startup(log_text: str) -> StartupFacts:
    """Parse the facts above from a whole (or partial) log; never raises on odd input."""
    lines = _rank0_lines(log_text)
    fields: dict = {}
    for _, line in lines:
        if "max_total_num_tokens=" in line and "context_len=" in line:
            for name, pattern in _SUMMARY_INT.items():
                match = pattern.search(line)
                if match:
                    fields[name] = int(match.group(1))
            mem = _AVAILABLE_MEM.search(line)
            if mem:
                fields["available_gpu_mem_gb"] = float(mem.group(1))
            break
    fields.update(_kv_pools([line for _, line in lines if _KV_ALLOCATED.search(line)]))
    fields["logged_flags"] = _logged_flags(lines)
    for _, line in lines:
        match = _PRE_LOAD_MEM.search(line)
        if match:
            fields["gpu_mem_before_load_gb"] = float(match.group(1))
            break
    graph = [float(m.group(1)) for _, line in lines for m in [_GRAPH_END_PHASED.search(line) or _GRAPH_END_OLD.search(line)] if m]
    fields["cuda_graph_gb"] = _sum_or_none([float(m.group(1)) for _, line in lines if (m := _GRAPH_MEM.search(line))])
    first_capture = next((m for _, line in lines if (m := _GRAPH_BEGIN_FREE.search(line))), None)
    if first_capture is not None:
        fields["free_after_pool_gb"] = float(first_capture.group(1))
    weights = [float(m.group(1)) for _, line in lines for m in [_WEIGHTS_END.search(line)] if m]
    fields["cuda_graph_seconds"] = _sum_or_none(graph)
    fields["weight_load_seconds"] = _sum_or_none(weights)
    fields["ready_seconds"] = _ready_seconds(lines)
    return StartupFacts(**fields)


def _logged_flags(lines: list[tuple[str | None, str]]) -> dict | None:
    """`LOGGED_FLAGS` from the first ``server_args=ServerArgs(`` line (None without one)."""
    line = next((line for _, line in lines if "server_args=ServerArgs(" in line), None)
    if line is None:
        return None
    body = line[line.index("server_args=ServerArgs(") :]
    words = {"None": None, "True": True, "False": False}
    out: dict = {}
    for name, text in _LOGGED_FLAG.findall(body):
        if name in out:
            continue
        if text in words:
            out[name] = words[text]
        elif text.startswith("'"):
            out[name] = text[1:-1]
        else:
            out[name] = float(text) if "." in text else int(text)
    return out


def _kv_gb(line: str) -> float | None:
    sizes = _KV_SIZES.search(line)
    if sizes:
        return round(float(sizes.group(1)) + float(sizes.group(2)), 3)
    total = _KV_SIZE.search(line)
    return float(total.group(1)) if total else None


def _kv_pools(kv_lines: list[str]) -> dict:
    """The target pool's facts from the first ``KV Cache is allocated`` line, the draft
    pool's from the second."""
    fields: dict = {}
    if kv_lines:
        match = _KV_ALLOCATED.search(kv_lines[0])
        fields["kv_cache_tokens"] = int(match.group(1)) if match else None
        fields["kv_cache_gb"] = _kv_gb(kv_lines[0])
        dtype = _KV_DTYPE.search(kv_lines[0])
        fields["kv_cache_dtype"] = dtype.group(1) if dtype else None
    if len(kv_lines) > 1:
        fields["draft_kv_cache_gb"] = _kv_gb(kv_lines[1])
        dtype = _KV_DTYPE.search(kv_lines[1])
        fields["draft_kv_cache_dtype"] = dtype.group(1) if dtype else None
    return fields


def _ready_seconds(lines: list[tuple[str | None, str]]) -> float | None:
    first = next((stamp for stamp, _ in lines if stamp), None)
    ready = next((stamp for stamp, line in lines if stamp and _READY in line), None)
    if first is None or ready is None:
        return None
    fmt = "%Y-%m-%d %H:%M:%S"
    return (datetime.strptime(ready, fmt) - datetime.strptime(first, fmt)).total_seconds()
