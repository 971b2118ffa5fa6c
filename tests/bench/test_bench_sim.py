"""The client against the simulator (`python -m autospec.sim`, noise off) at C=1, 4, 16, 32,
for the seed's synthetic workload (native API) and a chat workload (chat API).

Nothing checked here depends on how fast or how loaded the machine is: every token the
simulator emitted reaches the client, accept lengths are the noiseless per-request values,
the client never measures the simulator faster than the simulator scheduled its steps
(real time can only add to the scheduled seconds), a C=1 level is scheduled as `predict()`
replays it, the levels order as the model predicts (by margins that only a level slowed
twice as much as another could close), and the steady window is the stretch the records
say the whole batch was streaming. How close the measured speeds come to `predict()` on
a given machine (the 3% it was tuned for) is benchmarks/sim_speed.py's figure; that the
simulator's scheduler serves a closed loop exactly as `predict()` replays it, in
simulated time, is tests/sim/test_engine.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx
import pytest

from autospec.bench import BenchClient, LevelPlan, RequestRecord, Workload, prompts, run_level_with
from autospec.bench.records import LevelResult
from autospec.metrics import LevelSummary, summarize
from autospec.sim import Prediction, classify_prompt, default_profile_path, load_profile, noiseless_emit, predict

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


@dataclass(frozen=True)
class Level:
    """One level's records and what the simulator counted while it ran."""

    workload: str
    result: LevelResult
    summary: LevelSummary
    emitted_tokens: float  # tokens the simulator emitted during the level
    scheduled_s: float  # the seconds its steps were scheduled to take (simulated seconds x the time scale)

    def prediction(self) -> Prediction:
        return predict(
            load_profile(default_profile_path()),
            FLAGS,
            self.summary.concurrency,
            self.workload,
            input_len=round(self.summary.prompt_tokens_mean),
            output_len=OUTPUT_LEN,
            num_requests=self.summary.n_requests,
        )


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = SimProcess(TIME_SCALE, tmp_path_factory.mktemp("sim") / "sim.log")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


async def _counters(http: httpx.AsyncClient, url: str) -> tuple[float, float]:
    state = (await http.get(url + "/server_info")).json()["internal_states"][0]
    return float(state["sim_emitted_tokens"]), float(state["sim_scheduled_seconds"])


async def _levels(url: str, name: str) -> dict[int, Level]:
    """The levels one after another through one client, each bracketed by the simulator's
    counters; one warmup request first (the simulator's first request is slower)."""
    out: dict[int, Level] = {}
    async with BenchClient(url, WORKLOADS[name]) as client, httpx.AsyncClient(timeout=30) as http:
        await client.resolve_model()
        await run_level_with(client, LevelPlan(1, num_requests=1))
        for concurrency in LEVELS:
            emitted, scheduled = await _counters(http, url)
            result = await run_level_with(client, LevelPlan(concurrency))
            emitted_after, scheduled_after = await _counters(http, url)
            out[concurrency] = Level(name, result, summarize(result), emitted_after - emitted, scheduled_after - scheduled)
    return out


@pytest.fixture(scope="module")
def measured(sim: SimProcess) -> dict[str, dict[int, Level]]:
    return {name: asyncio.run(_levels(sim.url, name)) for name in WORKLOADS}


def test_builtin_chat_prompts_are_chat_for_the_simulator() -> None:
    assert {classify_prompt(p.text) for p in prompts(WORKLOADS["chat"], 32)} == {"chat"}
    assert classify_prompt(prompts(WORKLOADS["synthetic"], 1)[0].text) == "synthetic"


@pytest.mark.parametrize("concurrency", LEVELS)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_every_token_the_simulator_emitted_is_counted(measured, workload: str, concurrency: int) -> None:
    level = measured[workload][concurrency]
    summary = level.summary
    assert summary.failed_reason is None
    assert summary.n_ok == (4 if concurrency == 1 else 2 * concurrency)
    assert all(r.completion_tokens == OUTPUT_LEN for r in level.result.measured)
    assert level.emitted_tokens == summary.completion_tokens
    for r in level.result.measured:
        assert r.t_first is not None and r.t_done is not None
        assert r.t_sent < r.t_first <= r.chunk_times[-1] <= r.t_done
        assert list(r.chunk_times) == sorted(r.chunk_times)
    if workload == "synthetic":  # the native API reports spec_verify_ct
        assert summary.accept_length == pytest.approx(_per_request_accept_length(level.prediction().accept_length))


@pytest.mark.parametrize("concurrency", LEVELS)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_the_client_never_measures_the_simulator_faster_than_it_scheduled(measured, workload: str, concurrency: int) -> None:
    # Each step ends no earlier than its scheduled duration after the step before it (or
    # after the arrival that started it), and the client's clock runs from before the first
    # arrival to after the last token: the level's span holds all the scheduled seconds,
    # and a loaded machine only adds to it.
    level = measured[workload][concurrency]
    assert level.summary.agg_output_tok_s_whole <= level.emitted_tokens / level.scheduled_s * (1 + 1e-9)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_one_request_at_a_time_is_scheduled_as_predict_replays_it(measured, workload: str) -> None:
    # At C=1 nothing depends on when requests arrive (each runs alone), so the simulated
    # seconds are the model's whatever the machine; chat prompts vary in length around the
    # mean predict() is given.
    level = measured[workload][1]
    prediction = level.prediction()
    scheduled_rate = level.emitted_tokens / level.scheduled_s * TIME_SCALE
    assert scheduled_rate == pytest.approx(prediction.aggregate_tok_s, rel=1e-3)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_levels_order_as_the_model_predicts(measured, workload: str) -> None:
    # The model puts C=16's aggregate ~8x C=1's and C=1's per-request speed ~3x C=32's;
    # these fail only where one level ran more than twice as far below its prediction as
    # the other (a simulator that did not batch, a client that serialised its requests).
    levels = measured[workload]
    predicted = {c: levels[c].prediction() for c in (1, 16, 32)}
    summary = {c: levels[c].summary for c in (1, 16, 32)}
    aggregate_gain = predicted[16].aggregate_tok_s / predicted[1].aggregate_tok_s
    per_request_loss = predicted[1].per_request_tok_s / predicted[32].per_request_tok_s
    assert aggregate_gain > 4 and per_request_loss > 2
    assert summary[16].agg_output_tok_s_whole / summary[1].agg_output_tok_s_whole > aggregate_gain / 2
    assert summary[1].output_tok_s / summary[32].output_tok_s > per_request_loss / 2


@pytest.mark.parametrize("concurrency", LEVELS)
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_the_steady_window_is_where_the_whole_batch_streamed(measured, workload: str, concurrency: int) -> None:
    level = measured[workload][concurrency]
    summary = level.summary
    batch = min(concurrency, level.prediction().max_running_requests)
    start, end, run = _full_batch_window(level.result.measured, batch)
    assert end > start
    assert summary.steady_transient_s == 0  # a window of at most 3 waves is too short to search for stalls
    assert summary.steady_window_s == pytest.approx(end - start, rel=1e-9)
    assert summary.steady_share == pytest.approx((end - start) / run, rel=1e-9)


def _full_batch_window(records: Sequence[RequestRecord], batch: int) -> tuple[float, float, float]:
    """(start, end, run seconds) of the steady window of a closed loop of identical waves,
    read off the records directly: it starts when the first wave's `batch` requests all
    received output (ramp-up over) and ends at the last first token before the drain,
    which begins when the first request ends after the last one was sent."""
    firsts = sorted(r.t_first for r in records if r.t_first is not None)
    last_sent = max(r.t_sent for r in records)
    drain = min(r.t_done for r in records if r.t_done is not None and r.t_done > last_sent)
    end = max(t for t in firsts if t < drain)
    run = max(r.t_done for r in records if r.t_done is not None) - min(r.t_sent for r in records)
    return firsts[batch - 1], end, run


def _per_request_accept_length(model_accept_length: float) -> float:
    """completion_tokens / spec_verify_ct of one noiseless request: the first token comes
    from prefill, the rest from verify steps emitting `noiseless_emit` tokens each."""
    remaining, accumulator, steps = OUTPUT_LEN - 1, 0.0, 0
    while remaining > 0:
        emitted, accumulator = noiseless_emit(accumulator, model_accept_length, remaining)
        remaining -= emitted
        steps += 1
    return OUTPUT_LEN / steps
