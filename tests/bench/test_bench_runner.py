from __future__ import annotations

import asyncio
import time
import types

import pytest

import autospec.bench.runner as runner_module
from autospec.bench import LevelPlan, Progress, Workload, default_num_requests, prompts, run_level, run_levels
from autospec.errors import ConfigError
from autospec.metrics import summarize

from .fake_server import Reply
from .sim_process import free_port


def test_default_request_counts_follow_the_seed() -> None:
    assert default_num_requests(1) == 4
    assert default_num_requests(32) == 64
    assert LevelPlan(8).request_limit == 16
    assert LevelPlan(8, duration_s=1.0).request_limit is None
    assert LevelPlan(8, num_requests=3, duration_s=1.0).request_limit == 3


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"concurrency": 1, "num_requests": 0}, "num_requests must be at least 1"),
        ({"concurrency": 1, "duration_s": 0}, "duration must be positive"),
        ({"concurrency": 1, "warmup_requests": -1}, "warmup_requests must be >= 0"),
    ],
)
def test_bad_plans(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        LevelPlan(**kwargs)


def test_closed_loop_keeps_exactly_c_in_flight_and_excludes_warmup(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=8, per_event=2, delay_s=0.01))
    events: list[Progress] = []
    results = run_levels(
        server.url,
        Workload("random", input_len=5, output_len=8, seed=7),
        [LevelPlan(1), LevelPlan(4, warmup_requests=3)],
        on_progress=events.append,
    )
    assert set(results) == {1, 4}
    one, four = results[1], results[4]
    assert len(one.records) == 4 and not any(r.warmup for r in one.records)
    assert sum(r.warmup for r in four.records) == 3 and len(four.measured) == 8
    assert server.max_open_streams == 4
    assert server.model_lookups == 4  # one connection opened per worker, before sending
    # Measured prompts are the workload's first n, whatever the level; warmup uses others.
    expected = [p.text for p in prompts(Workload("random", input_len=5, output_len=8, seed=7), 8)]
    measured_texts = [b["text"] for b in server.bodies[4 + 3 :]]
    assert sorted(measured_texts) == sorted(expected)
    assert not set(b["text"] for b in server.bodies[4 : 4 + 3]) & set(expected)
    assert [e.phase for e in events if e.concurrency == 4][:3] == ["warmup"] * 3
    assert events[-1].completed == 8 and events[-1].total == 8
    summary = summarize(four)
    assert summary.n_requests == 8 and summary.completion_tokens == 64


@pytest.mark.parametrize("can_freeze", [True, False])
def test_a_level_freezes_the_servers_gc_after_its_warmup_and_before_measuring(fake_server, can_freeze) -> None:
    server = fake_server(lambda n, body: Reply(tokens=8, per_event=2))
    server.can_freeze_gc = can_freeze
    results = run_levels(
        server.url,
        Workload("random", input_len=5, output_len=8, seed=7),
        [LevelPlan(1), LevelPlan(4, warmup_requests=3, freeze_gc=True)],
    )
    assert server.freezes == [4 + 3]  # not for the level without it; after its 3 warmup requests ended
    assert "gc_frozen" not in results[1].metadata and results[4].metadata["gc_frozen"] is can_freeze
    assert summarize(results[1]).gc_frozen is None and summarize(results[4]).gc_frozen is can_freeze
    assert len(results[4].measured) == 8  # a server without the endpoint is measured all the same


def test_warmup_requests_have_the_workloads_length_unless_the_plan_says_another(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=4))
    workload = Workload("random", input_len=5, output_len=300, seed=7)
    run_levels(
        server.url,
        workload,
        [LevelPlan(2, num_requests=2, warmup_requests=2), LevelPlan(4, num_requests=4, warmup_requests=4, warmup_output_len=200)],
    )
    lengths = [b["sampling_params"]["max_new_tokens"] for b in server.bodies]
    assert lengths == [300] * 2 + [300] * 2 + [200] * 4 + [300] * 4


def test_duration_mode_stops_sending_at_the_deadline(fake_server, monkeypatch) -> None:
    # The runner's clock stands still until the 4th request has ended, then jumps past the
    # deadline: the worker that ended it sends nothing more, the other worker's request in
    # flight finishes and counts. (A clock of its own: real time would make the count
    # depend on the machine's speed.)
    now = 0.0

    def jump_at_the_fourth(progress: Progress) -> None:
        nonlocal now
        if progress.completed == 4:
            now = 1000.0

    monkeypatch.setattr(runner_module, "time", types.SimpleNamespace(perf_counter=lambda: now))
    server = fake_server(lambda n, body: Reply(tokens=4, per_event=1))
    level = run_level(
        server.url, Workload("synthetic", output_len=4), LevelPlan(2, duration_s=0.3), on_progress=jump_at_the_fourth
    )
    result = asyncio.run(asyncio.wait_for(level, 60))  # a runner that ignored its deadline would never stop
    assert len(result.records) == len(server.bodies) == 5
    assert all(r.ok for r in result.records)


def test_faults_mid_level_are_counted_never_raised_never_tokens(fake_server) -> None:
    kinds = ["ok", "status", "ok", "truncate", "ok", "hang", "ok", "error_event"]

    def script(n: int, body: dict) -> Reply:
        return Reply(kind=kinds[n % len(kinds)], tokens=6, per_event=2)

    server = fake_server(script)
    result = asyncio.run(run_level(server.url, Workload("synthetic", output_len=6), LevelPlan(4, num_requests=16), timeout_s=0.5))
    summary = summarize(result)
    assert summary.n_requests == 16 and summary.n_ok == 8
    assert summary.errors_by_kind == {"http_status": 2, "truncated": 2, "timeout": 2, "stream_error": 2}
    assert summary.completion_tokens == 8 * 6
    assert summary.error_rate == 0.5
    assert summary.failed_reason is not None and "8 of 16 requests failed" in summary.failed_reason


def test_a_dead_server_stops_the_level_after_consecutive_errors() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = asyncio.run(run_level(url, Workload("synthetic"), LevelPlan(2, duration_s=30)))
    assert 8 <= len(result.records) <= 8 + 2  # stops after max(8, 2C) failures in a row
    assert {r.error_kind for r in result.records} == {"connection"}
    assert summarize(result).failed_reason.startswith("no request succeeded (connection x")


def test_cancellation_closes_every_in_flight_stream(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=500, per_event=1, delay_s=0.02))

    async def scenario() -> None:
        task = asyncio.create_task(run_level(server.url, Workload("synthetic", output_len=500), LevelPlan(5, num_requests=50)))
        for _ in range(500):
            if server.open_streams == 5:
                break
            await asyncio.sleep(0.01)
        assert server.open_streams == 5
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    for _ in range(500):  # the server notices closed sockets on its next write
        if server.open_streams == 0:
            break
        time.sleep(0.01)
    assert server.open_streams == 0
    assert server.client_disconnects == 5
    assert len(server.bodies) == 5  # nothing new was sent after the cancellation


def test_levels_must_be_distinct() -> None:
    with pytest.raises(ConfigError, match="concurrency 4 is listed twice"):
        run_levels("http://127.0.0.1:1", Workload("synthetic"), [LevelPlan(4), LevelPlan(4)])


def test_ctrl_c_in_run_levels_closes_every_stream(fake_server) -> None:
    import os
    import signal
    import threading

    server = fake_server(lambda n, body: Reply(tokens=500, per_event=1, delay_s=0.02))

    def interrupt_when_streaming() -> None:
        for _ in range(500):
            if server.open_streams == 3:
                break
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own Ctrl-C handler, whatever this process inherited (a shell that starts it in
    # the background without job control has it ignore SIGINT)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=interrupt_when_streaming, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_levels(server.url, Workload("synthetic", output_len=500), [LevelPlan(3, num_requests=30)])
    finally:
        signal.signal(signal.SIGINT, inherited)
    for _ in range(500):
        if server.open_streams == 0:
            break
        time.sleep(0.01)
    assert server.open_streams == 0 and server.client_disconnects == 3
    assert len(server.bodies) == 3


def test_a_levels_requests_carry_the_workloads_top_k_and_its_metadata_records_it(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=4, per_event=2))
    workload = Workload("random", input_len=5, output_len=4, temperature=1, top_k=4)
    results = run_levels(server.url, workload, [LevelPlan(2, warmup_requests=2)])
    assert len(server.bodies) == 2 + 4  # the warmup's requests too
    assert all(b["sampling_params"]["top_k"] == 4 for b in server.bodies)
    assert results[2].metadata["workload"]["top_k"] == 4
    assert results[2].metadata["workload"]["temperature"] == 1


def test_a_phase_spread_level_shortens_each_workers_first_request_and_keeps_it_out_of_per_request_figures(
    fake_server,
) -> None:
    server = fake_server(lambda n, body: Reply(tokens=body["sampling_params"]["max_new_tokens"], per_event=1))
    workload = Workload("random", input_len=5, output_len=8, seed=7)
    plan = LevelPlan(4, num_requests=8, warmup_requests=4, warmup_output_len=2, stagger=True)
    result = run_levels(server.url, workload, [plan, LevelPlan(1, num_requests=2, stagger=True)])
    lengths = [b["sampling_params"]["max_new_tokens"] for b in server.bodies]
    assert lengths[:4] == [2] * 4  # the warmup is not spread
    assert sorted(lengths[4:8]) == [2, 4, 6, 8]  # worker i's first request: ceil(8 (i + 1) / 4) tokens
    assert lengths[8:12] == [8] * 4 and lengths[12:] == [8, 8]  # later ones, and every one at C=1, whole
    four = result[4]
    ramp = [r for r in four.measured if r.ramp]
    assert sorted(r.completion_tokens for r in ramp) == [2, 4, 6]
    assert not any(r.ramp for r in result[1].records)
    summary = summarize(four)
    assert summary.n_requests == 8 and summary.completion_tokens == 2 + 4 + 6 + 8 * 5  # the aggregate counts them
    whole = sorted((r.t_done - r.t_sent) * 1000 for r in four.measured if not r.ramp)
    assert len(whole) == 5 and summary.e2e_ms_p50 == pytest.approx(whole[2])  # per-request figures do not


def test_two_launches_send_the_same_request_stream_and_name_each_request_by_position(fake_server) -> None:
    """One request stream per study: the same prompts, lengths and seeds in the same order,
    each record naming its request and its position, so two launches pair."""
    workload = Workload("random", input_len=5, output_len=4, temperature=1, seed=3, sampling_seed=True)
    launches = []
    for _ in range(2):
        server = fake_server(lambda n, body: Reply(tokens=4, per_event=2))
        result = run_levels(server.url, workload, [LevelPlan(2, num_requests=6, warmup_requests=2)])[2]
        launches.append((server.bodies, result))
    (bodies_a, result_a), (bodies_b, result_b) = launches
    measured_a = sorted(result_a.measured, key=lambda r: r.position or 0)
    assert [r.position for r in measured_a] == list(range(6))
    assert {r.request_id for r in result_a.measured} == {r.request_id for r in result_b.measured}
    assert len({r.request_id for r in result_a.measured}) == 6
    seeds = [b["sampling_params"].get("sampling_seed") for b in bodies_a]
    assert seeds[:2] == [None, None]  # warmup requests carry none
    by_text_a = sorted((b["text"], b["sampling_params"]["sampling_seed"]) for b in bodies_a[2:])
    by_text_b = sorted((b["text"], b["sampling_params"]["sampling_seed"]) for b in bodies_b[2:])
    assert by_text_a == by_text_b and len({s for _, s in by_text_a}) == 6
    assert all(r.request_id is not None and r.request_id.startswith("w") for r in result_a.records if r.warmup)


def test_without_the_option_no_request_carries_a_sampling_seed(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=4, per_event=2))
    run_levels(server.url, Workload("random", input_len=5, output_len=4), [LevelPlan(1, num_requests=2)])
    assert not any("sampling_seed" in b["sampling_params"] for b in server.bodies)


def test_the_warm_up_runs_until_the_rate_settles_within_its_cap(fake_server) -> None:
    """The server's first requests are slow and speed up over 8 (a cache that learns); a
    fixed warm-up of 1 would measure the climb; the adaptive one sends until the rate is
    steady and says it settled. A server that keeps speeding up reaches the cap: flagged."""
    from autospec.metrics.warmup import MIN_POINTS

    def climbing_until(n_steady: int):
        return lambda n, body: Reply(tokens=4, per_event=4, delay_s=0.05 * max(n_steady - n, 1))

    server = fake_server(climbing_until(8))
    result = run_levels(
        server.url, Workload("random", input_len=5, output_len=4), [LevelPlan(1, 4, warmup_requests=1, warmup_cap=24)]
    )[1]
    warm = result.metadata["warmup"]
    assert warm["settled"] and MIN_POINTS <= warm["sent"] < 24
    assert sum(r.warmup for r in result.records) == warm["sent"] and len(result.measured) == 4
    summary = summarize(result)
    assert summary.warmup_settled is True and summary.warmup_sent == warm["sent"]

    never = fake_server(climbing_until(11))
    flagged = run_levels(
        never.url, Workload("random", input_len=5, output_len=4), [LevelPlan(1, 2, warmup_requests=1, warmup_cap=10)]
    )[1]
    assert flagged.metadata["warmup"] == {"sent": 10, "cap": 10, "settled": False}
    assert summarize(flagged).warmup_settled is False

    fixed = run_levels(
        fake_server(climbing_until(8)).url, Workload("random", input_len=5, output_len=4), [LevelPlan(1, 2, warmup_requests=1)]
    )[1]
    assert "warmup" not in fixed.metadata and summarize(fixed).warmup_settled is None
