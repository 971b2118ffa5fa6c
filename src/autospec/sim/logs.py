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
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from typing import Any, TextIO

from autospec.sim.config import version_at_least

# ---------------------------------------------------------------- pure message builders


def uses_phase_graph_lines(sglang_version: str) -> bool:
    """True when that SGLang prints one begin/end pair per CUDA-graph phase (0.5.16 does)."""
    return version_at_least(sglang_version, "0.5.16")


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


def kv_cache_allocated(num_tokens: int, k_gb: float, v_gb: float, dtype: str = "torch.bfloat16") -> str:
    return f"KV Cache is allocated. dtype: {dtype}, #tokens: {num_tokens}, K size: {k_gb:.2f} GB, V size: {v_gb:.2f} GB"


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
        f"Capture {phase} CUDA graph end. elapsed={elapsed_s:.2f} s, mem usage={usage:.2f} GB, avail mem={avail_after_gb:.2f} GB."
    ]
    return begin, end


def graph_capture_begin_only(
    sglang_version: str, *, speculative: bool, num_tokens_per_req: int, max_bs: int, avail_gb: float
) -> list[str]:
    """The begin line(s) printed before a capture that then fails."""
    begin, _ = graph_capture_lines(
        sglang_version,
        speculative=speculative,
        num_tokens_per_req=num_tokens_per_req,
        max_bs=max_bs,
        avail_before_gb=avail_gb,
        avail_after_gb=avail_gb,
        elapsed_s=0.0,
    )
    return begin


def startup_summary(
    *,
    max_total_num_tokens: int,
    chunked_prefill_size: int,
    max_prefill_tokens: int,
    max_running_requests: int,
    context_len: int,
    available_gpu_mem_gb: float,
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


def access_line(client: str, method: str, path: str, status: int) -> str:
    """uvicorn's access log line."""
    return f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {_reason(status)}'.rstrip()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def deprecated_endpoint(old: str, new: str) -> str:
    """The warning sglang 0.5.x logs when a ``/get_*`` alias is called."""
    return f"Endpoint '{old}' is deprecated and will be removed in a future version. Please use '{new}' instead."


def prefill_batch(
    *, new_seq: int, new_token: int, token_usage: float, running: int, queued: int, cuda_graph: bool, input_throughput: float
) -> str:
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: 0, "
        f"token usage: {token_usage:.2f}, #running-req: {running}, #queue-req: {queued}, "
        f"#pending-token: 0, cuda graph: {cuda_graph}, input throughput (token/s): {input_throughput:.2f}"
    )


def decode_batch(
    *,
    running: int,
    tokens: int,
    token_usage: float,
    accept_len: float | None,
    accept_rate: float | None,
    cuda_graph: bool,
    gen_throughput: float,
    queued: int,
) -> str:
    spec = ""
    if accept_len is not None:
        spec = f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {token_usage:.2f}, "
        f"{spec}cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, "
        f"#queue-req: {queued}"
    )


def kv_retraction(
    *, retracted: int, tokens_gained: int, old_ratio: float, new_ratio: float, mamba_gained: int | None = None
) -> str:
    """The scheduler's warning when decode finds the KV pool full (sglang 0.5.16 and 0.5.23
    ``scheduler.py``, same wording; ``#mamba_num_gained`` only for hybrid models)."""
    details = f"#retracted_reqs: {retracted}, #new_tokens_gained: {tokens_gained}"
    if mamba_gained is not None:
        details += f", #mamba_num_gained: {mamba_gained}"
    return f"KV cache pool is full. Retract requests. {details}, #new_token_ratio: {old_ratio:.4f} -> {new_ratio:.4f}"


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
    ("<site-packages>/sglang/srt/managers/scheduler.py", 4623, "run_scheduler_process", "scheduler = Scheduler("),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 431, "__init__", "self.init_model_worker()"),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 851, "init_model_worker", "self.init_memory_pools()"),
]
SCHEDULER_WEIGHTS_FRAMES = SCHEDULER_INIT_FRAMES[:2] + [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 838, "init_model_worker", "self.tp_worker = TpModelWorker("),
    ("<site-packages>/sglang/srt/model_executor/model_runner.py", 912, "load_model", "self.model = self.loader.load_model("),
]
SCHEDULER_GRAPH_FRAMES = SCHEDULER_INIT_FRAMES[:2] + [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 838, "init_model_worker", "self.tp_worker = TpModelWorker("),
    (
        "<site-packages>/sglang/srt/model_executor/model_runner.py",
        2318,
        "init_device_graphs",
        "self.graph_runner = CudaGraphRunner(self)",
    ),
]
#: Frames down to ModelRunner's set_device in sglang 0.5.23 (a rank whose GPU id is not
#: below the device count; the frames of the other init failures are 0.5.16's).
SCHEDULER_DEVICE_FRAMES = [
    (
        "<site-packages>/sglang/srt/managers/scheduler.py",
        6362,
        "run_scheduler_process",
        "scheduler = Scheduler(server_args, port_args)",
    ),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 568, "__init__", "self.init_model_worker()"),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 1130, "init_model_worker", "self.init_tp_model_worker()"),
    (
        "<site-packages>/sglang/srt/managers/scheduler.py",
        1033,
        "init_tp_model_worker",
        "self.tp_worker = TpModelWorker(**worker_kwargs)",
    ),
    ("<site-packages>/sglang/srt/managers/tp_worker.py", 319, "__init__", "self._init_model_runner()"),
    ("<site-packages>/sglang/srt/managers/tp_worker.py", 487, "_init_model_runner", "self._model_runner = ModelRunner("),
    (
        "<site-packages>/sglang/srt/model_executor/model_runner.py",
        455,
        "__init__",
        "torch.get_device_module(self.device).set_device(get_device().gpu_id)",
    ),
    ("<site-packages>/torch/cuda/__init__.py", 638, "set_device", "torch._C._cuda_setDevice(device)"),
]


def failing_rank(gpu_count: int, tp_size: int, pp_size: int) -> tuple[int, int, int]:
    """(gpu_id, tp_rank, pp_rank) of the first rank without a GPU: SGLang numbers GPUs
    ``base_gpu_id + (pp_rank * tp_size + tp_rank) * gpu_id_step`` (base 0, step 1)."""
    gpu_id = gpu_count
    return gpu_id, gpu_id % tp_size, gpu_id // tp_size


def rank_prefix(tp_rank: int, tp_size: int, pp_rank: int, pp_size: int) -> str:
    """The scheduler's log prefix (0.5.23 ``configure_scheduler_process``): `` PP1`` when
    pp_size > 1, then `` TP3`` when tp_size > 1."""
    return (f" PP{pp_rank}" if pp_size > 1 else "") + (f" TP{tp_rank}" if tp_size > 1 else "")


def set_device_context(gpu_id: int, tp_rank: int, tp_size: int, visible_devices: str | None) -> str:
    """The warning 0.5.23's ``ModelRunner.__init__`` logs before re-raising a set_device
    failure (``model_executor/model_runner.py:456-462``)."""
    return (
        f"Context: self.device='cuda' get_device().gpu_id={gpu_id} "
        f"os.environ.get('CUDA_VISIBLE_DEVICES')={visible_devices!r} "
        f"get_parallel().tp_rank={tp_rank} get_parallel().tp_size={tp_size}"
    )


SCHEDULER_LOOP_FRAMES = [
    ("<site-packages>/sglang/srt/managers/scheduler.py", 4651, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("<site-packages>/sglang/srt/managers/scheduler.py", 1342, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("<site-packages>/sglang/srt/speculative/eagle_worker.py", 312, "forward_batch_generation", "self.verify(batch, spec_info)"),
]


def uses_resolve_once(sglang_version: str) -> bool:
    """True when that SGLang validates arguments in ``ServerArgs.resolve_once`` called by
    ``launch_server.run_server`` (0.5.23, checked by running it) rather than in
    ``ServerArgs.__post_init__`` under ``prepare_server_args`` (0.5.16's ngram.log)."""
    return version_at_least(sglang_version, "0.5.23")


def argument_error_traceback(error_line: str, sglang_version: str = "0.5.16", *, algorithm: str | None = None) -> list[str]:
    """The traceback ``python -m sglang.launch_server`` prints for a rejected argument, ending
    in ``error_line`` (``ValueError: <SGLang's message>``): 0.5.16's (ngram.log), or 0.5.23's
    ``resolve_once`` chain as it printed it for NGRAM (``_handle_ngram``) and STANDALONE
    (``_handle_eagle_family``) rejections, after a :func:`kill_process_tree` line."""
    if not uses_resolve_once(sglang_version):
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
            error_line,
            "",
        ]
    handler = ("_handle_ngram", 1361, 266) if algorithm == "NGRAM" else ("_handle_eagle_family", 1082, 264)
    raising = _RAISING_CODE.get(error_line.split(":", 1)[0], "raise ValueError(")
    return [
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        '  File "<site-packages>/sglang/launch_server.py", line 84, in <module>',
        "    run_server(server_args)",
        '  File "<site-packages>/sglang/launch_server.py", line 29, in run_server',
        "    server_args.resolve_once()",
        '  File "<site-packages>/sglang/srt/server_args.py", line 277, in resolve_once',
        "    run_resolution_pipeline(self)",
        '  File "<site-packages>/sglang/srt/arg_groups/pipeline.py", line 306, in run_resolution_pipeline',
        "    run_hook(handle_speculative_decoding, server_args)",
        '  File "<site-packages>/sglang/srt/arg_groups/resolution_hooks.py", line 139, in run_hook',
        "    step(server_args)",
        '  File "<site-packages>/sglang/srt/arg_groups/speculative_hook.py", line 284, in handle_speculative_decoding',
        "    algo.handle_server_args(server_args)",
        f'  File "<site-packages>/sglang/srt/speculative/spec_info.py", line {handler[2]}, in handle_server_args',
        f"    {handler[0]}(server_args)",
        f'  File "<site-packages>/sglang/srt/arg_groups/speculative_hook.py", line {handler[1]}, in {handler[0]}',
        f"    {raising}",
        error_line,
        "",
    ]


# The source line shown in the last frame, by exception class (approximate for non-ValueErrors).
_RAISING_CODE = {
    "ValueError": "raise ValueError(",
    "AssertionError": "assert (",
    "TypeError": "if server_args.speculative_eagle_topk > 1:",
}


def kill_process_tree(pid: int, include_parent: bool) -> str:
    """sglang's ``kill_process_tree`` log line (0.5.16 on a scheduler failure, 0.5.23 also
    before an argument error's traceback, with include_parent=False)."""
    return f"kill_process_tree called: parent_pid={pid}, include_parent={include_parent}, pid={pid}"


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

    def rank(self, message: str, prefix: str | None = None) -> None:
        """A line from the scheduler of rank 0 (``[time TP0]`` when tp_size > 1), or of the
        rank whose log prefix is `prefix` (e.g. ``" TP1"``)."""
        shown = self._rank_prefix if prefix is None else prefix
        self._stream.write(f"[{self._timestamp()}{shown}] {message}\n")
        self._stream.flush()

    def raw(self, lines: Iterable[str]) -> None:
        """Lines printed without a timestamp (tracebacks, continuation lines)."""
        self._stream.write("".join(f"{line}\n" for line in lines))
        self._stream.flush()

    def flush(self) -> None:
        self._stream.flush()
