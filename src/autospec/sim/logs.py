"""SGLang's log lines, worded as SGLang prints them.

Two layers: pure functions that return message text (no timestamp), and :class:`SglangLog`,
which prefixes ``[YYYY-MM-DD HH:MM:SS]`` (SGLang's ``logging`` format
``[%(asctime)s{prefix}] %(message)s``; prefix `` TP0`` on scheduler lines when tp_size > 1)
and writes to a stream (stderr, where SGLang's ``logging`` and uvicorn write).

Wording sources:

- sglang 0.5.16, captured on an H200: ``../shared/data/real-sglang-0.5.16-h200/eagle.log``,
  ``kvsmall.log`` and ``ngram.log`` (load/KV/memory-pool lines, the per-phase
  ``Capture target verify CUDA graph begin/end`` lines, ``max_total_num_tokens=...``, the
  uvicorn lines, ``Prefill batch``/``Decode batch``, the failure chain).
- Earlier 0.5.x/0.4.x (``model_runner.py``): ``Capture cuda graph begin. This can take up to
  several minutes. avail mem=... GB`` and ``Capture cuda graph end. Time elapsed: ... s.
  mem usage=... GB. avail mem=... GB.``; used when the profile's ``sglang_version`` is
  below 0.5.16 (see :func:`uses_phase_graph_lines`).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Iterable, Mapping, TextIO

# ---------------------------------------------------------------- pure message builders


def version_tuple(version: str) -> tuple[int, ...]:
    """``"0.5.16"`` -> ``(0, 5, 16)``; non-numeric parts end the tuple."""
    parts: list[int] = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def uses_phase_graph_lines(sglang_version: str) -> bool:
    """True when that SGLang prints one begin/end pair per CUDA-graph phase (0.5.16 does)."""
    return version_tuple(sglang_version) >= (0, 5, 16)


def format_server_args(fields: Mapping[str, Any]) -> str:
    """``server_args=ServerArgs(a=1, b='x', ...)`` as the dataclass repr prints it."""
    body = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    return f"server_args=ServerArgs({body})"


MAX_RUNNING_RESET = (
    "Max running requests is reset to 48 for speculative decoding. "
    "You can override this by explicitly setting --max-running-requests."
)


def load_weight_begin(avail_gb: float) -> str:
    return f"Load weight begin. avail mem={avail_gb:.2f} GB"


def load_weight_end(elapsed_s: float, model_type: str, avail_gb: float, usage_gb: float) -> str:
    return (
        f"Load weight end. elapsed={elapsed_s:.2f} s, type={model_type}, "
        f"avail mem={avail_gb:.2f} GB, mem usage={usage_gb:.2f} GB."
    )


def kv_cache_allocated(num_tokens: int, k_gb: float, v_gb: float) -> str:
    return (
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {num_tokens}, "
        f"K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"
    )


def memory_pool_end(avail_gb: float) -> str:
    return f"Memory pool end. avail mem={avail_gb:.2f} GB"


def cuda_graph_batch_sizes(max_bs: int) -> list[int]:
    """SGLang's decode capture list: 1..8, then steps of 2 to 32, 8 to 256, 16 beyond (0.5.x)."""
    sizes = [bs for bs in range(1, 9)]
    sizes += list(range(10, 33, 2)) + list(range(40, 257, 8)) + list(range(272, 4097, 16))
    picked = [bs for bs in sizes if bs <= max_bs]
    return picked or [1]


def graph_capture_lines(
    sglang_version: str,
    *,
    speculative: bool,
    num_tokens_per_req: int,
    max_bs: int,
    avail_before_gb: float,
    avail_after_gb: float,
    elapsed_s: float,
) -> tuple[list[str], list[str]]:
    """(lines before the capture, lines after it) for one successful capture."""
    bs = cuda_graph_batch_sizes(max_bs)
    usage = max(avail_before_gb - avail_after_gb, 0.0)
    if not uses_phase_graph_lines(sglang_version):
        begin = [
            f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail_before_gb:.2f} GB",
            f"Capture cuda graph bs {bs}",
        ]
        end = [
            f"Capture cuda graph end. Time elapsed: {elapsed_s:.2f} s. mem usage={usage:.2f} GB. "
            f"avail mem={avail_after_gb:.2f} GB."
        ]
        return begin, end
    phase = "target verify" if speculative else "target decode"
    tokens = num_tokens_per_req if speculative else 1
    begin = [
        f"Capture {phase} CUDA graph begin. backend=full, num_tokens_per_req={tokens}, "
        f"bs={bs}, avail mem={avail_before_gb:.2f} GB"
    ]
    end = [
        f"Capture {phase} CUDA graph end. elapsed={elapsed_s:.2f} s, mem usage={usage:.2f} GB, "
        f"avail mem={avail_after_gb:.2f} GB."
    ]
    return begin, end


def graph_capture_begin_only(sglang_version: str, *, speculative: bool, num_tokens_per_req: int,
                             max_bs: int, avail_gb: float) -> list[str]:
    """The begin line(s) printed before a capture that then fails."""
    begin, _ = graph_capture_lines(
        sglang_version, speculative=speculative, num_tokens_per_req=num_tokens_per_req,
        max_bs=max_bs, avail_before_gb=avail_gb, avail_after_gb=avail_gb, elapsed_s=0.0,
    )
    return begin


def startup_summary(
    *, max_total_num_tokens: int, chunked_prefill_size: int, max_prefill_tokens: int,
    max_running_requests: int, context_len: int, available_gpu_mem_gb: float,
) -> str:
    return (
        f"max_total_num_tokens={max_total_num_tokens}, chunked_prefill_size={chunked_prefill_size}, "
        f"max_prefill_tokens={max_prefill_tokens}, max_running_requests={max_running_requests}, "
        f"context_len={context_len}, available_gpu_mem={available_gpu_mem_gb:.2f} GB"
    )


def uvicorn_startup(pid: int, host: str, port: int) -> list[str]:
    return [
        f"INFO:     Started server process [{pid}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)",
    ]


READY = "The server is fired up and ready to roll!"

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}


def access_line(client: str, method: str, path: str, status: int) -> str:
    """uvicorn's access log line."""
    return f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {_REASONS.get(status, "")}'.rstrip()


def prefill_batch(*, new_seq: int, new_token: int, token_usage: float, running: int,
                  queued: int, cuda_graph: bool, input_throughput: float) -> str:
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, "
        f"token usage: {token_usage:.2f}, #running-req: {running}, #queue-req: {queued}, "
        f"#pending-token: 0, cuda graph: {cuda_graph}, input throughput (token/s): {input_throughput:.2f}"
    )


def decode_batch(*, running: int, tokens: int, token_usage: float, accept_len: float | None,
                 accept_rate: float | None, cuda_graph: bool, gen_throughput: float,
                 queued: int) -> str:
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {token_usage:.2f}, "
        f"{spec}cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, "
        f"#queue-req: {queued}"
    )


def scheduler_traceback(frames: Iterable[tuple[str, int, str, str]], error_line: str) -> list[str]:
    """``Scheduler hit an exception: Traceback ...`` ending in ``error_line`` (as in kvsmall.log)."""
    lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
    for filename, lineno, func, code in frames:
        lines.append(f'  File "{filename}", line {lineno}, in {func}')
        lines.append(f"    {code}")
    lines.append(error_line)
    lines.append("")
    return lines


SIGQUIT_FROM_CHILD = "Received sigquit from a child process. It usually means the child failed."
SIGTERM_RECEIVED = "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."

#: Frames of the scheduler's init path in sglang 0.5.16 (kvsmall.log), reused for any init error.
SCHEDULER_INIT_FRAMES = [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 4623, "run_scheduler_process",
     "scheduler = Scheduler("),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 431, "__init__", "self.init_model_worker()"),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 851, "init_model_worker",
     "self.init_memory_pools()"),
]
SCHEDULER_WEIGHTS_FRAMES = SCHEDULER_INIT_FRAMES[:2] + [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 838, "init_model_worker",
     "self.tp_worker = TpModelWorker("),
    ("<site-packages>/sglang/srt/model_executor/model_runner.py", 912, "load_model",
     "self.model = self.loader.load_model("),
]
SCHEDULER_GRAPH_FRAMES = SCHEDULER_INIT_FRAMES[:2] + [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 838, "init_model_worker",
     "self.tp_worker = TpModelWorker("),
    ("<site-packages>/sglang/srt/model_executor/model_runner.py", 2318, "init_device_graphs",
     "self.graph_runner = CudaGraphRunner(self)"),
]
SCHEDULER_LOOP_FRAMES = [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 4651, "run_scheduler_process",
     "scheduler.event_loop_overlap()"),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 1342, "event_loop_overlap",
     "batch_result = self.run_batch(batch)"),
    ("<site-packages>/sglang/srt/speculative/eagle_worker.py", 312, "forward_batch_generation",
     "self.verify(batch, spec_info)"),
]


def argument_error_traceback(message: str) -> list[str]:
    """The traceback ``python -m sglang.launch_server`` prints for a rejected argument (ngram.log)."""
    return [
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        '  File "<site-packages>/sglang/launch_server.py", line 68, in <module>',
        "    server_args = prepare_server_args(sys.argv[1:])",
        '  File "<site-packages>/sglang/srt/server_args.py", line 8224, in prepare_server_args',
        "    return ServerArgs.from_cli_args(raw_args)",
        '  File "<site-packages>/sglang/srt/server_args.py", line 3031, in __post_init__',
        "    handle_speculative_decoding(self)",
        f"ValueError: {message}",
        "",
    ]


# ---------------------------------------------------------------- the writer


class SglangLog:
    """Writes timestamped SGLang-style lines to ``stream``; ``rank_prefix`` is e.g. ``" TP0"``."""

    def __init__(self, stream: TextIO | None = None, rank_prefix: str = "") -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._rank_prefix = rank_prefix
        self._stamp_second = -1
        self._stamp = ""

    def _timestamp(self) -> str:
        now = int(time.time())
        if now != self._stamp_second:
            self._stamp_second = now
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        return self._stamp

    def info(self, message: str) -> None:
        """A line from the HTTP server / tokenizer process (no rank prefix)."""
        self._stream.write(f"[{self._timestamp()}] {message}\n")
        self._stream.flush()

    def rank(self, message: str) -> None:
        """A line from the scheduler of rank 0 (``[time TP0]`` when tp_size > 1)."""
        self._stream.write(f"[{self._timestamp()}{self._rank_prefix}] {message}\n")
        self._stream.flush()

    def raw(self, lines: Iterable[str]) -> None:
        """Lines printed without a timestamp (tracebacks, continuation lines)."""
        self._stream.write("".join(f"{line}\n" for line in lines))
        self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()
