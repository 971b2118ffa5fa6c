"""The simulator as a process: flags, start-up, HTTP surface, memory record, speed.

Each test starts ``python -m autospec.sim`` (see conftest.py) and talks to it over HTTP.
Expected values come from the model API (``autospec.sim``), never from copies of it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import time

import httpx
import pytest

from autospec.launcher import classify_failure
from autospec.sim import (
    ArgumentRejected,
    accept_length,
    init_outcome,
    load_profile,
    predict,
    resolve_args,
)

from .conftest import SPEC, SPEC_FLAGS, flags_for_status, pid_alive, to_argv

FAST = ("--sim-noise", "off", "--sim-load-seconds", "0.2", "--sim-time-scale", "0.05")
PROMPT = " ".join(f"w{i}" for i in range(32))  # 32 tokens for the sim's whitespace tokenizer


def sse_payloads(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


@pytest.fixture(scope="module")
def profile():
    return load_profile()


@pytest.fixture
def ready_sim(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST)
    sim.wait_ready()
    return sim


# ------------------------------------------------------------------ start-up and readiness


def test_readiness_goes_from_503_to_200_and_logs_sglang_startup(sim_factory, profile):
    # Ready after (1 s load + the profile's 5 s warmup) x 0.25: time to see the 503 first.
    sim = sim_factory(*SPEC_FLAGS, "--sim-noise", "off", "--sim-load-seconds", "1", "--sim-time-scale", "0.25")
    first = None
    deadline = time.monotonic() + 20
    while first is None and time.monotonic() < deadline:
        try:
            first = httpx.get(sim.url + "/health_generate", timeout=2).status_code
        except httpx.HTTPError:
            time.sleep(0.02)
    assert first == 503
    assert httpx.get(sim.url + "/ready").status_code == 503
    assert httpx.get(sim.url + "/model_info").status_code == 200  # answers before warmup
    sim.wait_ready()
    for path in ("/health", "/health_generate", "/ready"):
        assert httpx.get(sim.url + path).status_code == 200
    log = sim.log()
    outcome = init_outcome(profile, resolve_args(profile, SPEC))
    order = [
        "server_args=ServerArgs(",
        "Load weight begin. avail mem=",
        "Load weight end. elapsed=",
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {outcome.max_total_num_tokens}, K size:",
        "Memory pool end. avail mem=",
        f"max_total_num_tokens={outcome.max_total_num_tokens}, chunked_prefill_size=",
        "INFO:     Uvicorn running on http://127.0.0.1:",
        "The server is fired up and ready to roll!",
    ]
    positions = [log.index(text) for text in order]
    assert positions == sorted(positions)
    summary = re.search(r"max_running_requests=(\d+), context_len=(\d+), available_gpu_mem=([\d.]+) GB", log)
    assert summary and int(summary.group(1)) == outcome.max_running_requests
    assert int(summary.group(2)) == outcome.context_len
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( TP0)?\] Load weight begin", log, re.MULTILINE)
    assert "Capture cuda graph" in log or "CUDA graph begin" in log


def test_gpu_state_file_appears_and_is_removed_on_term(sim_factory, profile):
    sim = sim_factory(*SPEC_FLAGS, *FAST)
    sim.wait_ready()
    records = [r for r in sim.state_records() if r["pid"] == sim.proc.pid]
    assert len(records) == 1
    outcome = init_outcome(profile, resolve_args(profile, SPEC))
    assert records[0]["gpus"] == list(range(profile.tp_size))
    assert records[0]["mem_mb"] == pytest.approx(outcome.gpu_mem_used_gb * 1e9 / 2**20, rel=0.01)
    assert "autospec.sim" in records[0]["cmdline"]
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit(timeout=10) == 0
    assert sim.state_records() == []
    assert "SIGTERM received." in sim.log()


def test_term_to_the_group_ends_every_process(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST)
    sim.wait_ready()
    children = [int(pid) for pid in os.popen(f"pgrep -g {sim.proc.pid}").read().split()]
    assert len(children) >= 2  # the server and its sglang::scheduler child
    os.killpg(sim.proc.pid, signal.SIGTERM)
    sim.wait_exit(timeout=10)
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(pid_alive(pid) for pid in children)


# ------------------------------------------------------------------ arguments


def test_unknown_flag_is_rejected_like_sglang(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, "--no-such-flag", "3")
    assert sim.wait_exit() == 2
    log = sim.log()
    assert log.startswith("usage: launch_server.py")
    assert "launch_server.py: error: unrecognized arguments: --no-such-flag 3" in log


def test_rejected_combination_prints_sglang_message_before_loading(sim_factory, profile):
    flags = {
        **SPEC,
        "speculative_eagle_topk": 2,
        "speculative_num_draft_tokens": 6,
        "page_size": 16,
        "attention_backend": "triton",
    }
    with pytest.raises(ArgumentRejected) as rejected:
        resolve_args(profile, flags)
    sim = sim_factory(*to_argv(flags), "--sim-load-seconds", "100")
    assert sim.wait_exit(timeout=10) == 1  # with a 100 s load, only an argument-time exit is this fast
    log = sim.log()
    assert f"ValueError: {rejected.value}" in log
    assert "Load weight begin" not in log


# ------------------------------------------------------------------ init failures


@pytest.mark.parametrize("status", ["kv_pool_too_small", "cuda_graph_oom", "weights_oom", "invalid_draft_tree"])
def test_init_failure_prints_sglang_chain_and_exits(sim_factory, profile, status):
    flags = flags_for_status(profile, status)
    outcome = init_outcome(profile, resolve_args(profile, flags))
    sim = sim_factory(*to_argv(flags), "--sim-load-seconds", "0.2", "--sim-time-scale", "0.1")
    assert sim.wait_exit() != 0
    log = sim.log()
    assert outcome.message.splitlines()[0] in log
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "The server is fired up" not in log
    assert log.index("Scheduler hit an exception") < log.index(outcome.message.splitlines()[0])
    assert not [r for r in sim.state_records() if pid_alive(r["pid"])]


def test_more_ranks_than_gpus_die_in_set_device_before_loading(sim_factory):
    # deepseek (sglang 0.5.23) has 8 GPUs: with tp 16 the rank of GPU 8 (TP8) has none
    flags = {**SPEC, "tp_size": 16}
    sim = sim_factory(
        "--sim-profile",
        "deepseek-v3-mtp-8x-h200",
        *to_argv(flags),
        "--sim-load-seconds",
        "0.2",
        "--sim-time-scale",
        "0.1",
        env_extra={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
    )
    assert sim.wait_exit() != 0
    log = sim.log()
    assert (
        "TP8] Context: self.device='cuda' get_device().gpu_id=8 os.environ.get('CUDA_VISIBLE_DEVICES')="
        "'0,1,2,3,4,5,6,7' get_parallel().tp_rank=8 get_parallel().tp_size=16"
    ) in log
    assert "TP8] Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "    torch.get_device_module(self.device).set_device(get_device().gpu_id)" in log
    assert "\ntorch.AcceleratorError: CUDA error: invalid device ordinal\nGPU device may be out of range" in log
    assert "Load weight begin" not in log and "The server is fired up" not in log
    assert not [r for r in sim.state_records() if pid_alive(r["pid"])]
    assert classify_failure(log, -9).kind == "rejected_args"


# ------------------------------------------------------------------ HTTP surface


def test_generate_non_stream_reports_meta_info(ready_sim, profile):
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": 60, "ignore_eos": True, "temperature": 0}}
    reply = httpx.post(ready_sim.url + "/generate", json=body, timeout=30).json()
    meta = reply["meta_info"]
    assert meta["prompt_tokens"] == 32
    assert meta["completion_tokens"] == 60
    assert len(reply["text"].split()) == 60 and reply["text"].startswith(" w")
    assert meta["finish_reason"] == {"type": "length", "length": 60}
    assert meta["e2e_latency"] > 0
    cfg = resolve_args(profile, SPEC)
    expected = accept_length(profile, cfg, "synthetic", 0.0)
    # 1 token from prefill, then k per verify step (noise off: floor of an accumulator).
    assert meta["spec_verify_ct"] == pytest.approx(59 / expected, abs=1.0)
    assert meta["spec_accept_length"] == pytest.approx(60 / meta["spec_verify_ct"])


def test_generate_stream_sends_one_event_per_verify_step(ready_sim):
    body = {"text": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 50, "ignore_eos": True, "temperature": 0}}
    text = httpx.post(ready_sim.url + "/generate", json=body, timeout=30).text
    payloads = sse_payloads(text)
    assert payloads[-1] == "[DONE]"
    events = [json.loads(p) for p in payloads[:-1]]
    counts = [e["meta_info"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 50
    bursts = [b - a for a, b in itertools.pairwise(counts)]
    assert all(1 <= burst <= 4 for burst in bursts)  # at most the 4 draft tokens per step
    assert len(events) == 1 + events[-1]["meta_info"]["spec_verify_ct"]
    assert all(len(e["text"].split()) == c for e, c in zip(events, counts))  # cumulative text
    assert events[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])


def test_openai_completions_stream_and_usage(ready_sim):
    body = {
        "model": "sim",
        "prompt": PROMPT,
        "max_tokens": 40,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    payloads = sse_payloads(httpx.post(ready_sim.url + "/v1/completions", json=body, timeout=30).text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 40
    assert usage["usage"]["prompt_tokens"] == 32 and usage["usage"]["total_tokens"] == 72
    content = chunks[:-1]
    assert all(c["object"] == "text_completion" and c["model"] == "sim" for c in content)
    assert len("".join(c["choices"][0]["text"] for c in content).split()) == 40
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    plain = httpx.post(
        ready_sim.url + "/v1/completions", timeout=30, json={"prompt": PROMPT, "max_tokens": 7, "ignore_eos": True}
    ).json()
    assert plain["usage"]["completion_tokens"] == 7 and len(plain["choices"][0]["text"].split()) == 7


def test_openai_chat_stream_with_usage(ready_sim):
    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": "Tell me about the sea, please."}],
        "max_tokens": 30,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }
    payloads = sse_payloads(httpx.post(ready_sim.url + "/v1/chat/completions", json=body, timeout=30).text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["usage"]["completion_tokens"] == 30 and chunks[-1]["choices"] == []
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"]["content"] or "" for c in chunks[1:-2])
    assert len(text.split()) == 30
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    plain = httpx.post(
        ready_sim.url + "/v1/chat/completions",
        timeout=30,
        json={"messages": body["messages"], "max_tokens": 5, "ignore_eos": True},
    ).json()
    assert plain["usage"]["completion_tokens"] == 5
    assert plain["choices"][0]["message"]["role"] == "assistant"


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_continuous_usage_stats_put_cumulative_usage_on_every_content_chunk(ready_sim, api):
    body = {
        "model": "sim",
        "max_tokens": 30,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if api == "chat":
        body["messages"] = [{"role": "user", "content": PROMPT}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = PROMPT
        path = "/v1/completions"
    chunks = [json.loads(p) for p in sse_payloads(httpx.post(ready_sim.url + path, json=body, timeout=30).text)[:-1]]
    if api == "chat":  # sglang 0.5.23 serving_chat: the role and finish chunks carry no usage
        assert chunks[0]["usage"] is None and chunks[-2]["usage"] is None
        content, texts = chunks[1:-2], [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
    else:
        content, texts = chunks[:-1], [c["choices"][0]["text"] for c in chunks[:-1]]
    counts = [c["usage"]["completion_tokens"] for c in content]
    assert counts == sorted(counts) and counts[-1] == 30
    # Each chunk's usage counts the tokens streamed so far (the sim's words are its tokens).
    assert [len("".join(texts[: i + 1]).split()) for i in range(len(texts))] == counts
    assert all(c["usage"]["prompt_tokens"] == 32 and c["usage"]["total_tokens"] == 32 + n for c, n in zip(content, counts))
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 30
    without = {**body, "stream_options": {"include_usage": True}}
    plain = [json.loads(p) for p in sse_payloads(httpx.post(ready_sim.url + path, json=without, timeout=30).text)[:-1]]
    assert all(c["usage"] is None for c in plain[:-1])


def test_eos_stops_early_unless_ignored(ready_sim):
    stops = []
    for _ in range(6):
        reply = httpx.post(
            ready_sim.url + "/generate", timeout=60, json={"text": PROMPT, "sampling_params": {"max_new_tokens": 3000}}
        ).json()
        stops.append(reply["meta_info"]["finish_reason"]["type"])
    assert "stop" in stops


def test_info_endpoints(ready_sim, profile):
    info = httpx.get(ready_sim.url + "/server_info").json()
    cfg = resolve_args(profile, SPEC)
    assert info["speculative_algorithm"] == "EAGLE"  # NEXTN is rewritten
    assert info["speculative_num_draft_tokens"] == cfg.speculative_num_draft_tokens
    assert info["max_total_num_tokens"] == init_outcome(profile, cfg).max_total_num_tokens
    assert info["version"] == profile.sglang_version
    httpx.post(
        ready_sim.url + "/generate",
        timeout=30,
        json={"text": PROMPT, "sampling_params": {"max_new_tokens": 30, "ignore_eos": True}},
    )
    state = httpx.get(ready_sim.url + "/get_server_info").json()["internal_states"][0]
    assert state["avg_spec_accept_length"] > 1.0
    assert httpx.get(ready_sim.url + "/get_model_info").json()["model_path"] == "sim"
    models = httpx.get(ready_sim.url + "/v1/models").json()
    assert models["data"][0]["id"] == "sim" and models["data"][0]["owned_by"] == "sglang"
    assert httpx.get(ready_sim.url + "/nope").status_code == 404
    flushed = httpx.post(ready_sim.url + "/flush_cache")  # bench_serving calls it in SGLang's CI
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed.")
    log = ready_sim.log()
    assert "Endpoint '/get_server_info' is deprecated" in log
    assert re.search(r'INFO:     127\.0\.0\.1:\d+ - "GET /v1/models HTTP/1\.1" 200 OK', log)


def test_decode_log_line_every_40_steps(ready_sim):
    httpx.post(
        ready_sim.url + "/generate",
        timeout=60,
        json={"text": PROMPT, "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}},
    )
    line = re.search(
        r"Decode batch, #running-req: (\d+), #token: (\d+), token usage: [\d.]+, "
        r"accept len: ([\d.]+), accept rate: [\d.]+, cuda graph: True, "
        r"gen throughput \(token/s\): [\d.]+, #queue-req: (\d+)",
        ready_sim.log(),
    )
    assert line and int(line.group(1)) == 1 and float(line.group(3)) > 1.0


def test_disconnect_aborts_the_request_and_frees_its_slot(sim_factory):
    sim = sim_factory(
        *SPEC_FLAGS, "--max-running-requests", "1", "--sim-noise", "off", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2"
    )
    sim.wait_ready()
    body = {"text": PROMPT, "stream": True, "sampling_params": {"max_new_tokens": 20000, "ignore_eos": True}}
    with httpx.Client(timeout=30) as client, client.stream("POST", sim.url + "/generate", json=body) as response:
        next(response.iter_lines())  # first token arrived: the request holds the only slot
    reply = httpx.post(
        sim.url + "/generate", timeout=30, json={"text": PROMPT, "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    )
    assert reply.status_code == 200 and reply.json()["meta_info"]["completion_tokens"] == 8
    # With the only slot still taken, the second request would have waited for all 20000
    # tokens of the first: the abort freed it, whatever the machine's speed.
    state = httpx.get(sim.url + "/server_info", timeout=30).json()["internal_states"][0]
    assert state["sim_emitted_tokens"] < 20000


# ------------------------------------------------------------------ speed against predict()


async def _closed_loop(url: str, concurrency: int, requests: int, output_len: int) -> tuple[int, float]:
    """Completion tokens and aggregate output tok/s, as docs/architecture.md defines them;
    `sent` is when the request headers went out (httpcore trace), `done` when [DONE] arrived."""
    records: list[tuple[float, float, int]] = []
    body = {
        "prompt": PROMPT,
        "stream": True,
        "max_tokens": output_len,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    remaining = requests
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one() -> None:
            sent: list[float] = []

            async def trace(name: str, info: dict) -> None:
                if name == "http11.send_request_headers.started" and not sent:
                    sent.append(time.perf_counter())

            tokens, done = 0, 0.0
            async with client.stream("POST", url + "/v1/completions", json=body, extensions={"trace": trace}) as response:
                async for line in response.aiter_lines():
                    if line == "data: [DONE]":
                        done = time.perf_counter()
                    elif line.startswith("data: {") and '"usage":{' in line:
                        tokens = json.loads(line[6:])["usage"]["completion_tokens"]
            records.append((sent[0], done, tokens))

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await one()

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    span = max(done for _, done, _ in records) - min(sent for sent, _, _ in records)
    total = sum(tokens for *_, tokens in records)
    return total, total / span


def _schedule(url: str) -> tuple[float, float]:
    """(tokens emitted, seconds its steps were scheduled to take) since the simulator started."""
    state = httpx.get(url + "/server_info", timeout=30).json()["internal_states"][0]
    return state["sim_emitted_tokens"], state["sim_scheduled_seconds"]


@pytest.mark.slow
def test_a_plain_client_never_sees_the_simulator_beat_its_schedule(sim_factory, profile):
    """Noise off, a bare httpx client: every token arrives, no level is served faster than
    the simulator scheduled its steps (a loaded machine can only make it slower), and one
    request at a time is scheduled exactly as predict() replays it. How close the measured
    speeds come to predict() on a given machine: benchmarks/sim_speed.py."""
    scale, output_len = 0.5, 300
    sim = sim_factory(*SPEC_FLAGS, "--sim-noise", "off", "--sim-load-seconds", "0", "--sim-time-scale", str(scale))
    sim.wait_ready()
    for concurrency in (1, 4, 16, 32):
        requests = max(2 * concurrency, 4)
        expected = predict(profile, SPEC, concurrency, "synthetic", input_len=32, output_len=output_len, num_requests=requests)
        emitted, scheduled = _schedule(sim.url)
        tokens, aggregate = asyncio.run(_closed_loop(sim.url, concurrency, requests, output_len))
        emitted_after, scheduled_after = _schedule(sim.url)
        assert tokens == emitted_after - emitted == requests * output_len, concurrency
        scheduled_rate = tokens / (scheduled_after - scheduled)
        assert aggregate <= scheduled_rate * (1 + 1e-9), concurrency
        if concurrency == 1:  # alone, a request's steps do not depend on when it arrived
            assert scheduled_rate * scale == pytest.approx(expected.aggregate_tok_s, rel=1e-9)


# ------------------------------------------------------------------ arguments (in-process)


def test_command_line_keeps_only_set_flags_and_reads_the_environment():
    from autospec.sim.args import parse_command_line

    command = parse_command_line(
        [
            "--model-path",
            "m",
            "--cuda-graph-max-bs-decode",
            "8",
            "--sim-fault",
            "hang_at_start",
            "--enable-dp-attention",
            "--sim-noise",
            "off",
        ],
        {"AUTOSPEC_SIM_FAULTS": "slow_start=1, zombie_child", "AUTOSPEC_SIM_GPU_STATE_DIR": "/tmp/state"},
    )
    assert command.flags == {"model_path": "m", "cuda_graph_max_bs": 8, "enable_dp_attention": True}
    assert command.sim.faults == ("hang_at_start", "slow_start=1", "zombie_child")
    assert command.sim.gpu_state_dir == "/tmp/state" and command.sim.noise is False
    assert (command.host, command.port) == ("127.0.0.1", 30000)


def test_sim_warmup_seconds_overrides_the_profiles_warmup(sim_factory):
    from autospec.sim.args import parse_command_line

    assert parse_command_line(["--model-path", "m", "--sim-warmup-seconds", "0.5"]).sim.warmup_seconds == 0.5
    assert parse_command_line(["--model-path", "m"]).sim.warmup_seconds is None
    with pytest.raises(SystemExit):
        parse_command_line(["--model-path", "m", "--sim-warmup-seconds", "-1"])
    # The DeepSeek profile warms up for 20 s (and loads for 600 s); both overridden to 0 it
    # is ready long before its own warmup could have ended.
    assert load_profile("deepseek-v3-mtp-8x-h200").warmup_seconds >= 20
    sim = sim_factory(
        "--model-path", "sim", "--sim-profile", "deepseek-v3-mtp-8x-h200", "--sim-load-seconds", "0", "--sim-warmup-seconds", "0"
    )
    sim.wait_ready(timeout=15)
    log = sim.log()
    assert log.index("Uvicorn running on") < log.index("The server is fired up and ready to roll!")


def test_noise_on_samples_accept_lengths_from_the_distribution(sim_factory):
    sim = sim_factory(
        *SPEC_FLAGS, "--sim-noise", "on", "--sim-seed", "7", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.02"
    )
    sim.wait_ready()
    prompt = "Could you explain, in plain words, why the sky looks blue on a clear afternoon?"  # chat
    meta = httpx.post(
        sim.url + "/generate",
        timeout=30,
        json={"text": prompt, "sampling_params": {"max_new_tokens": 400, "ignore_eos": True, "temperature": 0}},
    ).json()["meta_info"]
    histogram = meta["spec_accept_histogram"]
    assert sum(histogram) == meta["spec_verify_ct"]
    # Noiseless emission only ever gives floor/ceil of the mean; sampling spreads wider.
    assert sum(1 for count in histogram if count) >= 3
