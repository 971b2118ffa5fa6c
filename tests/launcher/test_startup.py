from __future__ import annotations

import pytest

from autospec.launcher import StartupFacts, parse_startup

from .conftest import FIXTURES


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_real_eagle_log_from_sglang_0_5_16():
    facts = parse_startup(read("eagle.log"))
    assert facts.max_total_num_tokens == 2957975
    assert facts.max_running_requests == 48
    assert facts.context_len == 4096
    assert facts.available_gpu_mem_gb == 40.05
    assert facts.chunked_prefill_size == 8192
    assert facts.max_prefill_tokens == 16384
    assert facts.kv_cache_tokens == 2957975
    # five capture phases: target prefill/verify, draft prefill/decode/extend
    assert facts.cuda_graph_seconds == pytest.approx(58.47 + 2.76 + 1.30 + 4.79 + 0.99)
    assert facts.weight_load_seconds == pytest.approx(0.17 + 0.00)
    assert facts.ready_seconds == 97.0  # 09:49:26 -> 09:51:03


def test_both_kv_pools_of_a_draft_model_with_their_dtypes():
    facts = parse_startup(read("eagle.log"))  # target line, then the EAGLE draft's
    assert (facts.kv_cache_gb, facts.kv_cache_dtype) == (90.28, "torch.bfloat16")
    assert (facts.draft_kv_cache_gb, facts.draft_kv_cache_dtype) == (5.64, "torch.bfloat16")
    fp8_draft = (
        "[2026-01-01 00:00:00] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100, K size: 1.00 GB, V size: 1.00 GB\n"
        "[2026-01-01 00:00:00] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 100, KV size: 0.06 GB\n"
    )
    facts = parse_startup(fp8_draft)
    assert (facts.kv_cache_tokens, facts.kv_cache_gb) == (100, 2.0)
    assert (facts.draft_kv_cache_gb, facts.draft_kv_cache_dtype) == (0.06, "torch.float8_e4m3fn")
    assert parse_startup(read("ngram.log")).draft_kv_cache_gb is None  # no draft model


def test_real_tree_log_from_sglang_0_5_16():
    facts = parse_startup(read("tree.log"))
    assert facts.max_total_num_tokens == 2957975
    assert facts.max_running_requests == 48
    assert facts.context_len == 4096
    assert facts.available_gpu_mem_gb == 39.97
    assert facts.cuda_graph_seconds == pytest.approx(3.56 + 1.43 + 1.12 + 12.24 + 1.42)


def test_failed_start_has_no_summary():
    facts = parse_startup(read("kvsmall.log"))
    assert facts.max_total_num_tokens is None and facts.kv_cache_tokens is None
    assert facts.weight_load_seconds == pytest.approx(0.09)


def test_older_wording_and_tensor_parallel_ranks():
    log = "\n".join(
        [
            "[2025-03-08 12:28:00 TP0] Load weight end. type=LlamaForCausalLM, avail mem=60.00 GB",
            "[2025-03-08 12:29:00 TP0] KV Cache is allocated. #tokens: 549277, K size: 25.14 GB, V size: 25.14 GB",
            "[2025-03-08 12:29:00 TP1] KV Cache is allocated. #tokens: 111, K size: 25.14 GB, V size: 25.14 GB",
            "[2025-03-08 12:29:28 TP1] Capture cuda graph end. Time elapsed: 9.99 s. avail mem=0.53 GB. mem usage=0.93 GB.",
            "[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.",
            "[2025-03-08 12:29:29 TP0] Capture draft cuda graph end. Time elapsed: 1.00 s",
            "[2025-03-08 12:29:30 TP1] max_total_num_tokens=5, chunked_prefill_size=-1, max_prefill_tokens=1, "
            "max_running_requests=1, context_len=1, available_gpu_mem=1.00 GB",
            "[2025-03-08 12:29:30 TP0] max_total_num_tokens=549277, chunked_prefill_size=-1, max_prefill_tokens=16384, "
            "max_running_requests=2048, context_len=131072, available_gpu_mem=8.16 GB",
            "[2025-03-08 12:29:40] The server is fired up and ready to roll!",
        ]
    )
    facts = parse_startup(log)
    assert facts.kv_cache_tokens == 549277
    assert facts.cuda_graph_seconds == pytest.approx(7.23 + 1.00)
    assert facts.max_total_num_tokens == 549277
    assert facts.chunked_prefill_size == -1
    assert facts.max_running_requests == 2048
    assert facts.context_len == 131072
    assert facts.available_gpu_mem_gb == 8.16
    assert facts.weight_load_seconds is None  # that old line has no elapsed=
    assert facts.ready_seconds == 100.0


def test_garbage_gives_empty_facts():
    assert parse_startup("no\r\nsglang\x00 here [") == StartupFacts()
    assert set(StartupFacts().as_dict()) >= {
        "max_total_num_tokens",
        "max_running_requests",
        "context_len",
        "available_gpu_mem_gb",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "kv_cache_tokens",
        "cuda_graph_seconds",
        "ready_seconds",
    }


REAL_AUTOSPEC = FIXTURES.parent / "real-0.5.16-h200-autospec"


def test_real_logs_from_autospec_driving_sglang_0_5_16_on_an_h200():
    """Logs autospec's own launcher captured on the H200 (docs/validation/2026-11-29-h200-first-run.md)."""
    from autospec.launcher import RUNTIME_EVENT_PATTERNS

    tiny = parse_startup((REAL_AUTOSPEC / "tinypool-retract.log").read_text())
    assert tiny.kv_cache_tokens == 4530 and tiny.max_total_num_tokens == 4530
    assert tiny.kv_cache_gb == pytest.approx(0.14, abs=0.01)
    assert tiny.gpu_mem_before_load_gb is not None and tiny.gpu_mem_before_load_gb > 100
    assert tiny.cuda_graph_seconds == pytest.approx(18.87, abs=0.01)
    first = parse_startup((REAL_AUTOSPEC / "first-start-tinypool.log").read_text())
    assert first.cuda_graph_seconds == pytest.approx(95.1, abs=0.1)  # a fresh machine's JIT
    retract = next(p for p in RUNTIME_EVENT_PATTERNS if p.kind == "retractions")
    assert (REAL_AUTOSPEC / "tinypool-retract.log").read_text().count(retract.needle) == 1
