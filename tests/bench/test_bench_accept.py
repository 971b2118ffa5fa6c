"""Accept length per level where responses carry none: from the change of /server_info's
cumulative average across the level, or from the scheduler's decode log lines."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from autospec.bench import AcceptTracker, BenchClient, LevelPlan, Workload, run_level_with
from autospec.bench.records import RequestRecord
from autospec.metrics import summarize
from autospec.metrics.accept import (
    AcceptEstimate,
    accept_from_log,
    accept_from_server_info,
    decode_tokens,
    per_request_definition,
    server_info_accept,
)

from .fake_server import Reply
from .sim_process import SimProcess

# Lines as SGLang 0.5.16 printed them on an H200 (../shared/data/real-sglang-0.5.16-h200/eagle.log),
# with a non-speculative line and another log line mixed in.
SGLANG_LOG = """\
[2026-11-29 09:51:07] Decode batch, #running-req: 1, #token: 143, token usage: 0.00, accept len: 2.00, \
accept rate: 0.07, cuda graph: True, gen throughput (token/s): 362.81, #queue-req: 0
[2026-11-29 09:51:07] INFO:     127.0.0.1:50422 - "POST /generate HTTP/1.1" 200 OK
[2026-11-29 09:51:08] Decode batch, #running-req: 3, #token: 183, token usage: 0.00, accept len: 4.00, \
accept rate: 0.00, cuda graph: True, gen throughput (token/s): 355.98, #queue-req: 0
[2026-11-29 09:51:09] Decode batch, #running-req: 2, #token: 103, token usage: 0.00, cuda graph: True, \
gen throughput (token/s): 6.52, #queue-req: 0
"""


def info(value: float) -> dict:
    return {"status": "ready", "internal_states": [{"last_gen_throughput": 1.0, "avg_spec_accept_length": value}]}


# ------------------------------------------------------------------- arithmetic


def test_server_info_deltas_give_the_levels_own_accept_length() -> None:
    # Before: 300 decode tokens in 100 passes (3.0). The level: 400 tokens at 4.0 (100
    # passes). After: 700 tokens in 200 passes, a cumulative 3.5.
    assert accept_from_server_info(3.0, 300, 3.5, 400) == pytest.approx(4.0)
    assert accept_from_server_info(0.0, 0, 3.5, 400) == pytest.approx(3.5)  # nothing decoded before
    assert accept_from_server_info(None, 0, 3.5, 400) == pytest.approx(3.5)
    assert accept_from_server_info(None, 300, 3.5, 400) is None  # tokens before, but no figure for them
    assert accept_from_server_info(3.0, 300, None, 400) is None
    assert accept_from_server_info(3.0, 300, 3.0, 0) is None  # the level decoded nothing


def test_server_info_answers_are_read_where_sglang_puts_the_figure() -> None:
    assert server_info_accept(info(3.25)) == 3.25
    assert server_info_accept({"avg_spec_accept_length": 2.5}) == 2.5  # older flat answer
    assert server_info_accept({"internal_states": [{"last_gen_throughput": 1.0}]}) is None  # no speculation
    assert server_info_accept(None) is None and server_info_accept({"internal_states": [{"avg_spec_accept_length": "x"}]}) is None


def test_log_lines_give_a_mean_weighted_by_running_requests() -> None:
    assert accept_from_log(SGLANG_LOG) == pytest.approx((1 * 2.0 + 3 * 4.0) / 4)
    assert accept_from_log("Decode batch, #running-req: 4, #token: 9, cuda graph: True") is None
    assert accept_from_log("") is None


def test_decode_figures_convert_to_the_responses_definition() -> None:
    # 400 decode tokens at 4.0 per pass = 100 passes; 10 requests' first tokens came from
    # prefill: completion tokens per pass = 410 / 100.
    assert per_request_definition(4.0, 400, 10) == pytest.approx(4.1)
    ok = RequestRecord(ok=True, error_kind=None, t_sent=0, t_first=1, t_done=2, completion_tokens=11)
    partial = RequestRecord(
        ok=False, error_kind="truncated", t_sent=0, t_first=1, t_done=2, chunk_times=(1, 2), chunk_tokens=(1, 4)
    )
    assert decode_tokens([ok, ok, partial]) == (10 + 10 + 4, 3)


# ------------------------------------------------------------- against servers


def _level(url: str, workload: Workload, tracker_log: Path | None, plan: LevelPlan, before=None):
    async def go() -> tuple:
        async with BenchClient(url, workload) as client:
            await client.resolve_model()
            tracker = AcceptTracker(client, tracker_log)
            if before is not None:
                before(client)
            await tracker.begin()
            result = await run_level_with(client, plan)
            if tracker_log is not None:
                with open(tracker_log, "a") as f:  # the server's lines during the level
                    f.write(SGLANG_LOG)
            return result, await tracker.end(result)

    return asyncio.run(go())


def test_the_tracker_uses_server_info_first(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=1, verify=False))
    answers = iter([info(0.0), info(2.5)])
    server.info = lambda: next(answers)
    result, estimate = _level(
        server.url, Workload("synthetic", output_len=6, api="completions"), None, LevelPlan(2, num_requests=4)
    )
    assert summarize(result).accept_length is None  # the OpenAI API carries no speculative fields
    # 4 requests x 5 decode tokens at 2.5 per pass = 8 passes; with the first tokens: 24 / 8.
    assert estimate == AcceptEstimate(pytest.approx(3.0), "server_info")
    assert server.info_paths == ["/server_info", "/server_info"]


def test_the_tracker_falls_back_to_the_log(fake_server, tmp_path: Path) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=1, verify=False))  # no /server_info (404)
    log = tmp_path / "server.log"
    log.write_text("Decode batch, #running-req: 9, #token: 1, token usage: 0.00, accept len: 9.00, cuda graph: True\n")
    _, estimate = _level(server.url, Workload("synthetic", output_len=6, api="chat"), log, LevelPlan(2, num_requests=4))
    assert estimate is not None and estimate.source == "log"  # only the lines written during the level
    assert estimate.value == pytest.approx(per_request_definition(3.5, 20, 4))
    assert server.info_paths == ["/server_info", "/get_server_info"] * 2


def test_no_server_figure_and_no_log_gives_none(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, verify=False))
    _, estimate = _level(server.url, Workload("synthetic", output_len=6, api="completions"), None, LevelPlan(1))
    assert estimate is None


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    process = SimProcess(0.2, tmp_path_factory.mktemp("sim") / "sim.log")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_the_simulator_agrees_with_itself_across_sources(sim: SimProcess) -> None:
    """Noise off: the native API's per-request figure, the /server_info delta on the
    completions API, and the decode log lines give the same accept length."""
    plan = LevelPlan(4, num_requests=16)
    native, _ = _level(sim.url, Workload("synthetic", output_len=64), None, plan)
    response = summarize(native).accept_length
    assert response is not None and response > 1

    async def levels() -> list[AcceptEstimate | None]:
        async with BenchClient(sim.url, Workload("synthetic", output_len=64, api="completions")) as client:
            await client.resolve_model()
            tracker = AcceptTracker(client, sim.log_path)
            tracker.decode_before = decode_tokens(native.records)[0]  # what this server decoded before
            out = []
            for _ in range(2):
                await tracker.begin()
                out.append(await tracker.end(await run_level_with(client, plan)))
            tracker._client = _NoInfo(client)  # type: ignore[assignment]  # as a server without /server_info
            await tracker.begin()
            out.append(await tracker.end(await run_level_with(client, LevelPlan(4, num_requests=64))))
            return out

    first, second, from_log = asyncio.run(levels())
    assert first is not None and first.source == "server_info" and first.value == pytest.approx(response, rel=0.01)
    assert second is not None and second.source == "server_info" and second.value == pytest.approx(response, rel=0.01)
    assert from_log is not None and from_log.source == "log" and from_log.value == pytest.approx(response, rel=0.03)


class _NoInfo:
    def __init__(self, client: BenchClient) -> None:
        self._client = client

    async def server_info(self) -> None:
        return None


def test_a_levels_summary_sums_the_verify_steps_by_accepted_drafts_over_its_measured_requests() -> None:
    def record(i: int, histogram: tuple[int, ...], *, ok: bool = True, warmup: bool = False) -> RequestRecord:
        return RequestRecord(
            ok=ok, error_kind=None if ok else "http_status", t_sent=float(i), t_first=i + 0.1, t_done=i + 1.0,
            chunk_times=(i + 0.1, i + 1.0), chunk_tokens=(1, 9), completion_tokens=10 if ok else 0,
            spec_verify_ct=4, spec_accept_histogram=histogram, warmup=warmup, request_id=f"{i}.0", position=i, prompt_index=0,
        )  # fmt: skip

    from autospec.bench.records import LevelResult

    records = (record(0, (1, 0, 2)), record(1, (0, 1, 0, 1)), record(2, (9, 9)), record(3, (5,), ok=False))
    records += (record(4, (7, 7), warmup=True),)
    assert summarize(LevelResult(records, 5.0, 1)).accept_by_depth == (10, 10, 2, 1)
    assert summarize(LevelResult(records[3:], 5.0, 1)).accept_by_depth == ()  # no successful measured request
