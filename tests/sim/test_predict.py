"""predict(): the noiseless replay of the sim server's scheduler, and the optimum search."""

from __future__ import annotations

import pytest

from autospec.sim import (
    accept_length,
    exhaustive_optimum,
    init_outcome,
    load_profile,
    noiseless_emit,
    predict,
    prefill_seconds,
    resolve_args,
    step_seconds,
)

SEED = load_profile()
LLAMA = load_profile("llama31-8b-eagle3-1x-h100")
DEEPSEEK = load_profile("deepseek-v3-mtp-8x-h200")


def mtp(steps: int, topk: int = 1, draft: int | None = None, **extra) -> dict:
    return {
        "speculative_algorithm": "NEXTN",
        "speculative_num_steps": steps,
        "speculative_eagle_topk": topk,
        "speculative_num_draft_tokens": steps + 1 if draft is None else draft,
        **extra,
    }


def reference_loop(profile, flags, concurrency, num_requests, input_len, output_len, workload="synthetic"):
    """The server's scheduler written out one step at a time (the contract in predict's
    docstring): admit while there is room (one prefill step), else one decode step."""
    cfg = resolve_args(profile, flags)
    mrr = init_outcome(profile, cfg).max_running_requests
    e = accept_length(profile, cfg, workload, 0.0)
    t, sent = 0.0, min(concurrency, num_requests)
    waiting = [{"sent": 0.0} for _ in range(sent)]
    running, done = [], []
    while waiting or running:
        if waiting and len(running) < mrr:
            n = min(len(waiting), mrr - len(running))
            batch, waiting = waiting[:n], waiting[n:]
            t += prefill_seconds(profile, cfg, n * input_len, n)
            for req in batch:
                req.update(first=t, remaining=output_len - 1, acc=0.0)
            running += batch
        else:
            t += step_seconds(profile, cfg, len(running))
            for req in running:
                k, req["acc"] = noiseless_emit(req["acc"], e, req["remaining"])
                req["remaining"] -= k
        finished = [r for r in running if r["remaining"] == 0]
        running = [r for r in running if r["remaining"] > 0]
        for req in finished:
            req["done"] = t
            done.append(req)
            if sent < num_requests:
                sent += 1
                waiting.append({"sent": t})
    per_request = sum(output_len / (r["done"] - r["sent"]) for r in done) / len(done)
    aggregate = output_len * len(done) / (max(r["done"] for r in done) - min(r["sent"] for r in done))
    return per_request, aggregate


@pytest.mark.parametrize(
    ("profile", "flags", "concurrency", "num_requests", "output_len"),
    [
        (SEED, mtp(3), 1, 4, 1000),
        (SEED, mtp(3), 4, 8, 1000),
        (SEED, mtp(3), 16, 32, 1000),
        (SEED, mtp(3), 32, 64, 1000),  # 17 slots: waves of 17, 17, 17, 13 with queueing
        (SEED, mtp(5), 64, 128, 1000),
        (SEED, mtp(2), 7, 23, 257),  # uneven numbers
        (LLAMA, mtp(5, 4, 8), 16, 40, 300),
        (SEED, {"speculative_algorithm": None}, 8, 16, 200),
    ],
)
def test_predict_replays_the_scheduler_exactly(profile, flags, concurrency, num_requests, output_len):
    pred = predict(profile, flags, concurrency, num_requests=num_requests, output_len=output_len)
    per_request, aggregate = reference_loop(profile, flags, concurrency, num_requests, 32, output_len)
    assert pred.per_request_tok_s == pytest.approx(per_request, rel=1e-9)
    assert pred.aggregate_tok_s == pytest.approx(aggregate, rel=1e-9)


def test_default_number_of_requests_is_twice_the_concurrency_and_four_at_c1():
    for c in (1, 16):
        assert predict(SEED, mtp(3), c) == predict(SEED, mtp(3), c, num_requests=max(2 * c, 4))


def test_queueing_beyond_max_running_requests_counts_in_per_request_speed():
    below = predict(SEED, mtp(3), 16)  # 17 slots: no queue
    above = predict(SEED, mtp(3), 32)  # half the requests wait a full wave
    assert above.max_running_requests == 17
    assert above.decode_tok_s == pytest.approx(below.decode_tok_s, rel=0.02)
    assert above.per_request_tok_s < 0.8 * below.per_request_tok_s
    assert above.ttft_s > 10 * below.ttft_s


def test_first_token_and_decode_speed_are_consistent():
    pred = predict(SEED, mtp(3), 1)
    total_time = pred.ttft_s + 999 / pred.decode_tok_s
    assert pred.per_request_tok_s == pytest.approx(1000 / total_time, rel=1e-9)


def test_infeasible_configurations_predict_zero_speed():
    failed = predict(SEED, mtp(10), 1)
    assert failed.init == "kv_pool_too_small" and not failed.ok
    assert (failed.per_request_tok_s, failed.aggregate_tok_s, failed.max_total_num_tokens) == (0.0, 0.0, 0)
    assert "Not enough memory" in failed.message
    rejected = predict(SEED, mtp(3, 4, 8), 1)
    assert rejected.init == "rejected" and "page_size > 1" in rejected.message and rejected.aggregate_tok_s == 0.0


def test_temperature_and_workload_lower_the_prediction():
    hot = predict(SEED, mtp(3), 1, workload="chat", temperature=1.0)
    cold = predict(SEED, mtp(3), 1, workload="chat")
    synthetic = predict(SEED, mtp(3), 1)
    assert hot.per_request_tok_s < cold.per_request_tok_s < synthetic.per_request_tok_s
    assert hot.accept_length < cold.accept_length < synthetic.accept_length


def test_bad_arguments():
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        predict(SEED, mtp(3), 0)
    with pytest.raises(ValueError, match="unknown metric"):
        exhaustive_optimum(SEED, [mtp(3)], 1, "speed")
    with pytest.raises(ValueError, match="no feasible configuration"):
        exhaustive_optimum(SEED, [mtp(10), mtp(3, 4, 8)], 1, "per_request_tok_s")


def test_exhaustive_optimum_returns_the_best_feasible_candidate():
    space = [mtp(s) for s in range(1, 11)]
    best, value = exhaustive_optimum(SEED, space, 1, "per_request_tok_s")
    values = [predict(SEED, f, 1).per_request_tok_s for f in space]
    assert value == max(values) and best == space[values.index(value)]


def spec_space(algorithm: str) -> list[dict]:
    """steps 1-8 x topk {1, 2, 4, 8} x draft tokens 2-16 (topk = 1 implies draft = steps + 1)."""
    out = []
    for steps in range(1, 9):
        for topk in (1, 2, 4, 8):
            for draft in range(2, 17):
                if topk == 1 and draft != steps + 1:
                    continue
                out.append(
                    {
                        "speculative_algorithm": algorithm,
                        "speculative_num_steps": steps,
                        "speculative_eagle_topk": topk,
                        "speculative_num_draft_tokens": draft,
                    }
                )
    return out


def shape(flags: dict) -> tuple[int, int]:
    return flags["speculative_num_steps"], flags["speculative_eagle_topk"]


def test_profiles_have_different_optima():
    optima = {}
    for profile in (SEED, LLAMA, DEEPSEEK):
        space = spec_space(profile.speculative_algorithm)
        latency, _ = exhaustive_optimum(profile, space, 1, "per_request_tok_s")
        throughput, _ = exhaustive_optimum(profile, space, 32, "aggregate_tok_s")
        optima[profile.name] = (shape(latency), shape(throughput))
    seed, llama, deepseek = (optima[p.name] for p in (SEED, LLAMA, DEEPSEEK))
    assert seed[0][1] == 1  # trees are rejected on triton with page_size 16 in the seed's version
    assert llama[0][1] > 1 and deepseek[0][1] > 1  # a tree wins at batch 1 elsewhere
    assert len({seed[0], llama[0], deepseek[0]}) == 3  # the batch-1 optima all differ in steps or topk
    assert llama[1] != seed[1]  # so do the C=32 optima of the small dense model and the seed
    for latency, throughput in (seed, llama, deepseek):
        assert throughput[0] < latency[0]  # fewer steps pay off at high batch
