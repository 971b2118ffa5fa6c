"""The scheduler in-process (no HTTP): KV-pool admission and retraction, and the closed
loop predict() replays.

The engine runs on a private asyncio loop at a tiny time scale; the expected numbers come
from the request sizes and the pool size given to it, or from predict(), never from the
engine itself. Timings are read on the engine's simulated clock (the simulated seconds of
the steps it scheduled), which no wall-clock delay changes.
"""

from __future__ import annotations

import asyncio
import io
import random
import re

import pytest

from autospec.launcher import RUNTIME_EVENT_PATTERNS
from autospec.sim import accept_length, init_outcome, load_profile, predict, resolve_args
from autospec.sim.engine import Engine, Generation
from autospec.sim.logs import SglangLog

from .conftest import SPEC

PROMPT_TOKENS = 32
OUTPUT_TOKENS = 300


def run_requests(profile, *, requests: int, pool_tokens: int, max_running: int = 48) -> tuple[Engine, str, list]:
    """Submit `requests` identical requests at once, run until all finished; (engine, log, gens).
    Every step checks that the pool never holds more than `pool_tokens`."""
    cfg = resolve_args(profile, SPEC)
    stream = io.StringIO()
    overfull: list[int] = []

    async def main() -> tuple[Engine, list[Generation]]:
        done = asyncio.Event()
        engine = Engine(
            profile=profile,
            cfg=cfg,
            max_running=max_running,
            max_total_tokens=pool_tokens,
            time_scale=1e-4,
            noise=False,
            rng=random.Random(0),
            log=SglangLog(stream),
            on_complete=lambda gen: done.set() if all(g.finished for g in gens) else None,
        )

        def on_step(gen: Generation, text: str) -> None:
            if engine.kv_tokens > pool_tokens:
                overfull.append(engine.kv_tokens)

        mean = accept_length(profile, cfg, "synthetic", 0.0)
        gens = [
            Generation(
                rid=str(i),
                prompt_tokens=PROMPT_TOKENS,
                max_new_tokens=OUTPUT_TOKENS,
                stop_at=OUTPUT_TOKENS,
                accept_mean=mean,
                accept_cdf=None,
                on_step=on_step,
            )
            for i in range(requests)
        ]
        task = asyncio.create_task(engine.run())
        for gen in gens:
            engine.submit(gen)
        await asyncio.wait_for(done.wait(), 30)
        task.cancel()
        return engine, gens

    engine, gens = asyncio.run(main())
    assert not overfull, f"the KV pool of {pool_tokens} tokens held {max(overfull)}"
    return engine, stream.getvalue(), gens


@pytest.fixture(scope="module")
def profile():
    return load_profile()


def test_a_pool_that_fits_every_request_never_retracts(profile):
    engine, log, gens = run_requests(profile, requests=8, pool_tokens=8 * (PROMPT_TOKENS + OUTPUT_TOKENS) + 64)
    assert all(g.completion_tokens == OUTPUT_TOKENS for g in gens)
    assert engine.stats.retracted == 0 and "Retract" not in log
    assert engine.kv_tokens == 0  # every finished request gave its tokens back


def test_a_full_pool_retracts_requests_which_resume_and_finish(profile):
    pool = 4 * (PROMPT_TOKENS + OUTPUT_TOKENS)  # room for 4 of the 8 at full length
    engine, log, gens = run_requests(profile, requests=8, pool_tokens=pool)
    assert all(g.finished and g.completion_tokens == OUTPUT_TOKENS for g in gens)
    assert engine.stats.retracted > 0 and engine.kv_tokens == 0
    needle = next(p.needle for p in RUNTIME_EVENT_PATTERNS if p.kind == "retractions")
    lines = [line for line in log.splitlines() if needle in line]
    assert lines, log[-2000:]
    # sglang 0.5.16/0.5.23 wording; the default profile is a hybrid model (#mamba_num_gained).
    pattern = re.compile(
        r"^\[[\d\- :]+\] KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+), "
        r"#new_tokens_gained: (\d+), #mamba_num_gained: (\d+), #new_token_ratio: "
        r"[01]\.\d{4} -> [01]\.\d{4}$"
    )
    parsed = [pattern.match(line) for line in lines]
    assert all(parsed), lines
    assert sum(int(m.group(1)) for m in parsed) == engine.stats.retracted
    assert all(int(m.group(2)) > PROMPT_TOKENS for m in parsed)  # prompt and some output freed
    # A retracted request's second prefill covers its prompt and the output it had.
    prefills = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)", log)]
    assert sum(prefills) > 8 * PROMPT_TOKENS


def test_the_first_request_runs_even_if_it_alone_overflows_the_pool(profile):
    # One request longer than the pool: SGLang keeps at least one running; so does the sim.
    cfg = resolve_args(profile, SPEC)
    stream = io.StringIO()

    async def main() -> Generation:
        finished = asyncio.Event()
        engine = Engine(
            profile=profile,
            cfg=cfg,
            max_running=4,
            max_total_tokens=64,
            time_scale=1e-4,
            noise=False,
            rng=random.Random(0),
            log=SglangLog(stream),
            on_complete=lambda g: finished.set(),
        )
        gen = Generation(
            rid="long",
            prompt_tokens=PROMPT_TOKENS,
            max_new_tokens=200,
            stop_at=200,
            accept_mean=accept_length(profile, cfg, "synthetic", 0.0),
            accept_cdf=None,
            on_step=lambda g, t: None,
        )
        task = asyncio.create_task(engine.run())
        engine.submit(gen)
        await asyncio.wait_for(finished.wait(), 30)
        task.cancel()
        return gen

    gen = asyncio.run(main())
    assert gen.completion_tokens == 200 and "Retract" not in stream.getvalue()


def closed_loop(profile, flags, *, concurrency: int, requests: int, output_len: int) -> list[tuple[float, float, float]]:
    """(sent, first token, done) per request of a closed loop of `concurrency` clients that
    turn around instantly (what predict() assumes), on the engine's simulated clock: the
    simulated seconds of every step it scheduled so far, over the time scale."""
    cfg = resolve_args(profile, flags)
    outcome = init_outcome(profile, cfg)
    scale = 1e-4
    out: list[tuple[float, float, float]] = []

    async def main() -> None:
        done = asyncio.Event()
        sent: dict[str, float] = {}
        first: dict[str, float] = {}
        count = 0

        def now() -> float:
            return engine.stats.scheduled_seconds / scale

        def on_step(gen: Generation, text: str) -> None:
            first.setdefault(gen.rid, now())

        def send() -> None:
            nonlocal count
            gen = Generation(
                rid=str(count),
                prompt_tokens=PROMPT_TOKENS,
                max_new_tokens=output_len,
                stop_at=output_len,
                accept_mean=accept_length(profile, cfg, "synthetic", 0.0),
                accept_cdf=None,
                on_step=on_step,
            )
            count += 1
            sent[gen.rid] = now()
            engine.submit(gen)

        def on_complete(gen: Generation) -> None:
            out.append((sent[gen.rid], first[gen.rid], now()))
            if count < requests:
                send()  # the finished request's client sends its next one at once
            elif len(out) == requests:
                done.set()

        engine = Engine(
            profile=profile,
            cfg=cfg,
            max_running=outcome.max_running_requests,
            max_total_tokens=outcome.max_total_num_tokens,
            time_scale=scale,
            noise=False,
            rng=random.Random(0),
            log=SglangLog(io.StringIO()),
            on_complete=on_complete,
        )
        task = asyncio.create_task(engine.run())
        for _ in range(min(concurrency, requests)):
            send()
        await asyncio.wait_for(done.wait(), 60)
        task.cancel()

    asyncio.run(main())
    return out


@pytest.mark.parametrize(
    ("concurrency", "requests", "output_len"),
    [(1, 4, 64), (4, 8, 64), (16, 32, 64), (32, 64, 64), (7, 23, 257)],  # C=32: waves of 17, 17, 17, 13
)
def test_a_closed_loop_is_served_as_predict_replays_it(profile, concurrency, requests, output_len):
    # The speeds the simulator serves in simulated time; how closely a process on a given
    # machine keeps them in real time is benchmarks/sim_speed.py's question.
    records = closed_loop(profile, SPEC, concurrency=concurrency, requests=requests, output_len=output_len)
    expected = predict(
        profile, SPEC, concurrency, "synthetic", input_len=PROMPT_TOKENS, output_len=output_len, num_requests=requests
    )
    assert len(records) == requests
    span = max(done for _, _, done in records) - min(sent for sent, _, _ in records)
    per_request = sum(output_len / (done - sent) for sent, _, done in records) / requests
    ttft = sum(first - sent for sent, first, _ in records) / requests
    decode = sum((output_len - 1) / (done - first) for _, first, done in records) / requests
    assert output_len * requests / span == pytest.approx(expected.aggregate_tok_s, rel=1e-9)
    assert per_request == pytest.approx(expected.per_request_tok_s, rel=1e-9)
    assert ttft == pytest.approx(expected.ttft_s, rel=1e-9)
    assert decode == pytest.approx(expected.decode_tok_s, rel=1e-9)
