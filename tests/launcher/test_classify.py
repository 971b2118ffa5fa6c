from __future__ import annotations

import pytest

from autospec.launcher import (
    CLASSIFY_ORDER,
    FAILURE_PATTERNS,
    ArgumentsRejected,
    CudaGraphOOM,
    ForeignGpuMemory,
    KvPoolTooSmall,
    PortInUse,
    ServerCrashed,
    StartupTimeout,
    UnknownLaunchFailure,
    WeightsOOM,
    classify_failure,
)
from autospec.launcher.errors import ERROR_BY_KIND

from .conftest import FIXTURES

T = "[2026-11-29 09:55:06]"
LOAD = f"{T} Load weight begin. avail mem=139.13 GB"


def traceback(*frames: str, last: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for frame in frames:
        lines.append(f'  File "<site-packages>/sglang/srt/x.py", line 1, in {frame}')
    return "\n".join(lines + [last])


def test_real_kv_failure_0_5_16_is_kv_pool_too_small():
    error = classify_failure((FIXTURES / "kvsmall.log").read_text(), 137)
    assert isinstance(error, KvPoolTooSmall)
    assert error.detail.startswith("ValueError: Loaded weights leave no GPU memory for the KV cache")
    assert "--mem-fraction-static=0.0105" in error.log_excerpt


def test_real_rejection_0_5_16_is_arguments_rejected():
    error = classify_failure((FIXTURES / "ngram.log").read_text(), 1)
    assert isinstance(error, ArgumentsRejected)
    assert error.detail.startswith("ValueError: speculative_eagle_topk(10) > 1 with page_size(16) > 1")


@pytest.mark.parametrize("name", ["eagle.log", "tree.log"])
def test_healthy_real_logs_match_no_cause(name):
    assert isinstance(classify_failure((FIXTURES / name).read_text(), 1), UnknownLaunchFailure)


CASES = [
    # KV wording of MemoryPoolConfig (0.5.x) and model_runner (0.4.x)
    (
        LOAD
        + "\n"
        + traceback(
            "init_memory_pool",
            last="RuntimeError: Not enough memory. Please try to increase "
            "--mem-fraction-static. Current value: mem_fraction_static=0.3",
        ),
        KvPoolTooSmall,
    ),
    (LOAD + "\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", KvPoolTooSmall),
    # graph capture failing with an OOM inside: the graph kind wins over the generic OOM
    (
        LOAD
        + "\n"
        + traceback(
            "capture",
            last="Exception: Capture cuda graph failed: CUDA out of memory. Tried to "
            "allocate 2.00 GiB\nPossible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        ),
        CudaGraphOOM,
    ),
    (
        LOAD
        + "\n"
        + traceback(
            "load_model",
            last="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "1.00 GiB. GPU 0 has a total capacity of 139.81 GiB",
        ),
        WeightsOOM,
    ),
    (LOAD + "\nRuntimeError: CUDA error: out of memory", WeightsOOM),
    # leftovers of another server: the root cause beats the OOM it provokes
    (
        f"{T} RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        "pre_model_load_memory=10.0, local_gpu_memory=139.0\ntorch.OutOfMemoryError: CUDA out of memory.",
        ForeignGpuMemory,
    ),
    # argparse
    (
        "usage: launch_server.py [-h] --model-path MODEL_PATH\nlaunch_server.py: error: unrecognized arguments: --bogus 1",
        ArgumentsRejected,
    ),
    (
        "usage: launch_server.py [-h]\nlaunch_server.py: error: argument --speculative-algorithm: invalid choice: "
        "'FOO' (choose from 'EAGLE', 'NGRAM')",
        ArgumentsRejected,
    ),
    # 0.5.23's resolver raising inside resolve_once, before any model work
    (
        traceback(
            "<module>",
            "run_server",
            "resolve_once",
            "run_resolution_pipeline",
            last="ValueError: STANDALONE speculative decoding does not support dp attention.",
        ),
        ArgumentsRejected,
    ),
    # port in use: uvicorn (0.5.16) and SGLang's own OSError log (0.5.23)
    (
        f"{T} ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
        PortInUse,
    ),
    (f"{T} [Errno 98] Address already in use\nSystemExit: 1", PortInUse),
]


@pytest.mark.parametrize("log, error_type", CASES)
def test_synthetic_failures(log, error_type):
    error = classify_failure(log, 1)
    assert type(error) is error_type
    assert error.log_excerpt
    assert "\n" not in str(error)


#: torch.cuda.set_device(1) on a 1-GPU H200 (torch 2.11.0+cu130), captured verbatim; SGLang
#: 0.5.23's ModelRunner.__init__ makes that call for a rank whose GPU id the host lacks
#: (model_runner.py:455), logs the Context line (456-462) and re-raises.
CAPTURED_SET_DEVICE = """Traceback (most recent call last):
  File "<stdin>", line 5, in <module>
  File "/opt/torch/.venv/lib/python3.12/site-packages/torch/cuda/__init__.py", line 638, in set_device
    torch._C._cuda_setDevice(device)
torch.AcceleratorError: CUDA error: invalid device ordinal
GPU device may be out of range, do you have enough GPUs?
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
"""


def test_a_rank_without_a_gpu_is_a_layout_the_host_rejects():
    log = (
        f"{T[:-1]} TP1] Context: self.device='cuda' get_device().gpu_id=1 os.environ.get('CUDA_VISIBLE_DEVICES')=None "
        "get_parallel().tp_rank=1 get_parallel().tp_size=4\n"
        f"{T[:-1]} TP1] Scheduler hit an exception: "
        + CAPTURED_SET_DEVICE
        + f"{T} Received sigquit from a child process. It usually means the child failed.\n"
    )
    error = classify_failure(log, -9)
    assert type(error) is ArgumentsRejected
    assert error.detail == "torch.AcceleratorError: CUDA error: invalid device ordinal"
    assert "do you have enough GPUs?" in error.log_excerpt
    # the ordinal error is its own cause, also after weights began loading on other ranks
    assert type(classify_failure(LOAD + "\n" + CAPTURED_SET_DEVICE, 1)) is ArgumentsRejected


def test_a_value_error_after_model_load_is_not_an_argument_rejection():
    log = LOAD + "\n" + traceback("prepare_server_args", "init", last="ValueError: something at runtime")
    error = classify_failure(log, 1)
    assert type(error) is UnknownLaunchFailure
    assert error.detail == "ValueError: something at runtime"


def test_frame_without_exception_line_is_not_a_rejection():
    assert type(classify_failure("prepare_server_args was mentioned", 1)) is UnknownLaunchFailure


def test_after_ready_every_death_is_a_crash():
    log = f"{T} The server is fired up and ready to roll!\ntorch.OutOfMemoryError: CUDA out of memory."
    error = classify_failure(log, -9, after_ready=True, seconds=12.5)
    assert type(error) is ServerCrashed
    assert error.detail.startswith("torch.OutOfMemoryError")
    assert error.returncode == -9 and error.seconds == 12.5


def test_timeout_without_cause_and_with_cause():
    plain = classify_failure(f"{T} Load weight begin.", None, timed_out=True, seconds=30.0)
    assert type(plain) is StartupTimeout and "30 s" in str(plain)
    hung = classify_failure(
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.", None, timed_out=True
    )
    assert type(hung) is ForeignGpuMemory


def test_unknown_keeps_the_tail_and_never_guesses():
    log = "\n".join(f"line {i}" for i in range(100)) + "\nKeyError: 'x'"
    error = classify_failure(log, 1, log_path="/tmp/s.log")
    assert type(error) is UnknownLaunchFailure
    assert error.detail == "KeyError: 'x'"
    assert error.log_excerpt.splitlines()[-1] == "KeyError: 'x'"
    assert "line 99" in error.log_excerpt and "line 10\n" not in error.log_excerpt
    assert "/tmp/s.log" in str(error)


def test_progress_bar_frames_are_cleaned_in_the_tail():
    error = classify_failure("Capturing 1/3\rCapturing 2/3\rCapturing 3/3\nSystemExit: 1", 1)
    assert error.log_excerpt.splitlines()[0] == "Capturing 3/3"


def test_pattern_table_is_consistent():
    kinds = {p.kind for p in FAILURE_PATTERNS}
    assert kinds == set(CLASSIFY_ORDER)
    for kind in CLASSIFY_ORDER:
        assert ERROR_BY_KIND[kind].kind == kind
        assert any(p.role == "cause" for p in FAILURE_PATTERNS if p.kind == kind) or kind == "rejected_args"
    for pattern in FAILURE_PATTERNS:
        assert pattern.origin in {"sglang", "torch", "python", "os"}
        assert pattern.role in {"cause", "frame", "guard"}
        assert pattern.checked and pattern.note
        assert pattern.needle and "\n" not in pattern.needle
    assert {p.needle for p in FAILURE_PATTERNS if p.in_sglang_source} >= {
        "Loaded weights leave no GPU memory for the KV cache",
        "Not enough memory. Please try to increase --mem-fraction-static.",
        "Capture cuda graph failed",
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
    }


def test_sglang_patterns_occur_in_the_real_0_5_16_logs_where_they_were_seen():
    kvsmall = (FIXTURES / "kvsmall.log").read_text()
    ngram = (FIXTURES / "ngram.log").read_text()
    by_needle = {p.needle: p for p in FAILURE_PATTERNS}
    assert by_needle["Loaded weights leave no GPU memory for the KV cache"].matches(kvsmall)
    assert by_needle["prepare_server_args"].matches(ngram)
    assert by_needle["Load weight begin"].matches(kvsmall)


def test_every_pattern_is_documented():
    from pathlib import Path

    from autospec.launcher import RUNTIME_EVENT_PATTERNS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "launcher.md").read_text()
    missing = [p.needle for p in FAILURE_PATTERNS + RUNTIME_EVENT_PATTERNS if p.needle not in doc]
    assert missing == []


def test_errors_survive_pickling_with_their_attributes():
    import pickle

    error = classify_failure((FIXTURES / "kvsmall.log").read_text(), 137, log_path="/tmp/x.log", seconds=48.0)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is KvPoolTooSmall and str(copy) == str(error)
    assert copy.as_dict() == error.as_dict()
