"""The client against the simulator (`python -m autospec.sim`, noise off): measured
per-request and aggregate tok/s agree with the simulator's noiseless `predict()`
within 3% at C=1, 4, 16, 32, for the seed's synthetic workload and a chat workload.
The whole-run aggregate matches `predict()` for the same request count; the steady
aggregate (ramp-up and drain left out) matches it for a long level (40 waves), which
is what steady state means."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autospec.bench import LevelPlan, Workload, prompts, run_levels
from autospec.bench.records import LevelResult
from autospec.metrics import LevelSummary, summarize
from autospec.sim import classify_prompt, default_profile_path, load_profile, noiseless_emit, predict

from .sim_process import SimProcess

TIME_SCALE = 1.0  # simulated durations as in the profile (smaller is faster but noisier on 2 cores)
OUTPUT_LEN = 64
LEVELS = (1, 4, 16, 32)
FLAGS = {
    "model_path": "sim",
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}
WORKLOADS = {
    "synthetic": Workload("synthetic", input_len=32, output_len=OUTPUT_LEN),
    "chat": Workload("builtin", name="chat", api="chat", output_len=OUTPUT_LEN),
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = SimProcess(TIME_SCALE, tmp_path_factory.mktemp("sim") / "sim.log")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def measured(sim: SimProcess) -> dict[str, dict[int, LevelResult]]:
    # One warmup request warms the simulator up (its first request is slower); the
    # runner opens each level's connections before sending.
    plans = [LevelPlan(c, warmup_requests=1 if c == LEVELS[0] else 0) for c in LEVELS]
    return {name: run_levels(sim.url, workload, plans) for name, workload in WORKLOADS.items()}


def test_builtin_chat_prompts_are_chat_for_the_simulator() -> None:
    assert {classify_prompt(p.text) for p in prompts(WORKLOADS["chat"], 32)} == {"chat"}
    assert classify_prompt(prompts(WORKLOADS["synthetic"], 1)[0].text) == "synthetic"


@pytest.mark.parametrize("concurrency", LEVELS)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_measured_speeds_match_the_prediction(measured, workload: str, concurrency: int) -> None:
    result = measured[workload][concurrency]
    summary: LevelSummary = summarize(result)
    assert summary.failed_reason is None
    assert summary.n_ok == (4 if concurrency == 1 else 2 * concurrency)
    assert all(r.completion_tokens == OUTPUT_LEN for r in result.measured)
    prediction = predict(
        load_profile(default_profile_path()),
        FLAGS,
        concurrency,
        workload,
        input_len=round(summary.prompt_tokens_mean),
        output_len=OUTPUT_LEN,
        num_requests=summary.n_requests,
    )
    long_run = predict(
        load_profile(default_profile_path()), FLAGS, concurrency, workload,
        input_len=round(summary.prompt_tokens_mean), output_len=OUTPUT_LEN, num_requests=40 * concurrency,
    )
    per_request = summary.output_tok_s * TIME_SCALE
    assert per_request == pytest.approx(prediction.per_request_tok_s, rel=0.03)
    assert summary.agg_output_tok_s_whole * TIME_SCALE == pytest.approx(prediction.aggregate_tok_s, rel=0.03)
    assert summary.agg_output_tok_s * TIME_SCALE == pytest.approx(long_run.aggregate_tok_s, rel=0.03)
    # how much of a short run is at full concurrency depends on this machine's scheduling;
    # the steady figure itself is checked against the long run just above
    assert 0 < summary.steady_share <= 1
    if workload == "synthetic":  # the native API reports spec_verify_ct
        assert summary.accept_length == pytest.approx(_per_request_accept_length(prediction.accept_length))


def _per_request_accept_length(model_accept_length: float) -> float:
    """completion_tokens / spec_verify_ct of one noiseless request: the first token comes
    from prefill, the rest from verify steps emitting `noiseless_emit` tokens each."""
    remaining, accumulator, steps = OUTPUT_LEN - 1, 0.0, 0
    while remaining > 0:
        emitted, accumulator = noiseless_emit(accumulator, model_accept_length, remaining)
        remaining -= emitted
        steps += 1
    return OUTPUT_LEN / steps
