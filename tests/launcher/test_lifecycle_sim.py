"""Lifecycle paths against the simulator (`python -m autospec.sim`), launched like SGLang."""

from __future__ import annotations

import http.client
import json
import socket
import sys
import time
from pathlib import Path

import pytest

from autospec.launcher import (
    ArgumentsRejected,
    KvPoolTooSmall,
    LaunchError,
    LaunchRequest,
    PortInUse,
    ServerCrashed,
    SimGpuProbe,
    StartupTimeout,
    UnknownLaunchFailure,
)
from autospec.launcher.proctree import is_alive, read_proc

EAGLE = {
    "speculative_algorithm": "EAGLE",
    "speculative_draft_model_path": "/models/draft",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


@pytest.fixture
def gpu_dir(tmp_path: Path) -> Path:
    path = tmp_path / "gpu"
    path.mkdir()
    return path


@pytest.fixture
def sim(tmp_path, gpu_dir, ledger, quick_launcher):
    """Factory: start (or fail to start) the simulator; every PID it had joins the ledger."""
    launcher = quick_launcher(SimGpuProbe(gpu_dir), term_timeout_s=1.0)

    def record(pids):
        ledger.extra.update(pids)

    def start(ready_timeout_s: float = 60.0, port: int | None = None, **flags):
        req = LaunchRequest(
            command=(sys.executable, "-m", "autospec.sim"),
            flags={
                "model_path": "/models/m",
                "sim_time_scale": 0.01,
                "sim_noise": "off",
                "sim_gpu_state_dir": str(gpu_dir),
                **flags,
            },
            log_path=tmp_path / "server.log",
            port=port,
            ready_timeout_s=ready_timeout_s,
            poll_interval_s=0.05,
        )
        try:
            server = launcher.start(req, on_spawn=lambda pid, pgid, argv, port: record([pid]))
        except LaunchError as error:
            if error.teardown is not None:
                record(error.teardown.stopped_pids)
            raise
        record(server.tracked_pids())
        return server

    start.probe = launcher.probe
    return start


def generate(url_port: int, tokens: int = 8) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", url_port, timeout=10)
    try:
        body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": tokens, "temperature": 0}})
        conn.request("POST", "/generate", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    except OSError:
        return -1
    finally:
        conn.close()


def test_normal_start_and_stop(sim):
    server = sim(**EAGLE)
    try:
        facts = server.startup
        assert facts.max_total_num_tokens and facts.max_total_num_tokens > 0
        assert facts.max_running_requests and facts.context_len and facts.available_gpu_mem_gb
        assert facts.kv_cache_tokens == facts.max_total_num_tokens
        assert server.ready_path == "/health_generate"
        assert generate(server.port) == 200
        held = sim.probe.snapshot()
        assert server.pid in held.pids and sum(held.used_mb.values()) > 0
    finally:
        report = server.stop()
    assert report.signal_sent == "TERM" and report.leftover_pids == ()
    assert report.gpu_memory_released is True and sim.probe.snapshot().used_mb == {}
    assert report.port_released


def test_crash_at_start_fails_fast_and_stays_unknown(sim):
    deadline = 600.0
    started = time.monotonic()
    with pytest.raises(UnknownLaunchFailure) as caught:  # a CUDA error line: no known cause
        sim(ready_timeout_s=deadline, sim_fault="crash_at_start")
    assert time.monotonic() - started < deadline / 10
    assert "illegal memory access" in caught.value.detail
    assert caught.value.teardown.gpu_memory_released is True


def test_kv_pool_too_small(sim):
    with pytest.raises(KvPoolTooSmall) as caught:
        sim(mem_fraction_static=0.05)
    assert "--mem-fraction-static" in caught.value.detail


@pytest.mark.parametrize(
    "flags",
    [
        {"bogus_flag": 1},
        {"speculative_algorithm": "NGRAM", "page_size": 16, "attention_backend": "triton"},
    ],
)
def test_rejected_arguments(sim, flags):
    with pytest.raises(ArgumentsRejected):
        sim(**flags)


def test_hang_at_start_hits_the_deadline(sim):
    with pytest.raises(StartupTimeout) as caught:
        sim(ready_timeout_s=1.0, sim_fault="hang_at_start")
    assert caught.value.teardown.leftover_pids == ()


def test_crash_mid_benchmark(sim):
    server = sim(sim_fault="crash_after_requests=2")
    try:
        with pytest.raises(ServerCrashed) as caught:
            for _ in range(20):
                generate(server.port)
                server.check_alive()
                time.sleep(0.05)
        assert caught.value.teardown.gpu_memory_released is True
    finally:
        server.stop()


def test_server_ignoring_term_is_killed(sim):
    server = sim(sim_fault="ignore_sigterm")
    report = server.stop()
    assert report.signal_sent == "KILL" and report.killed_after_timeout
    assert report.leftover_pids == () and report.gpu_memory_released is True


def test_child_that_leaves_the_group_and_holds_memory(sim):
    server = sim(sim_fault="zombie_child")
    try:
        holders = sim.probe.snapshot().pids
        child = next(pid for pid in holders if pid != server.pid)
        assert read_proc(child).pgid != server.pgid
    finally:
        report = server.stop()
    assert child in report.stopped_pids and not is_alive(child)
    assert report.gpu_memory_released is True and sim.probe.snapshot().used_mb == {}


def test_port_already_taken(sim):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(PortInUse):
            sim(port=taken.getsockname()[1])
