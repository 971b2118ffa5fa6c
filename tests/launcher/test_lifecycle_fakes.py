"""Every lifecycle path of Launcher.start / RunningServer, against tiny fake servers."""

from __future__ import annotations

import socket
import time

import pytest

from autospec.errors import UsageError
from autospec.launcher import (
    ArgumentsRejected,
    KvPoolTooSmall,
    LaunchRequest,
    PortInUse,
    ServerCrashed,
    SimGpuProbe,
    StartupTimeout,
    UnknownLaunchFailure,
    is_port_free,
)
from autospec.launcher.proctree import is_alive, read_proc

from .conftest import FIXTURES


def test_normal_start_and_stop(fake_request, quick_launcher, ledger):
    spawned = []
    server = quick_launcher().start(fake_request(fake_ready_after=0.2), on_spawn=lambda *info: spawned.append(info))
    try:
        assert spawned == [(server.pid, server.pgid, server.argv, server.port)]
        assert server.argv[-4:] == ["--host", "127.0.0.1", "--port", str(server.port)]
        assert "--model-path" in server.argv
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.ready_path == "/health_generate"
        assert server.startup.max_total_num_tokens == 1000
        assert server.startup.max_running_requests == 48
        assert server.startup.ready_seconds is not None and server.startup.ready_seconds > 0
        server.check_alive()  # running: no exception
        assert is_alive(server.pid)
        assert not is_port_free("127.0.0.1", server.port)
    finally:
        report = server.stop()
    assert report.signal_sent == "TERM" and not report.killed_after_timeout
    assert report.leftover_pids == ()
    assert report.port_released and is_port_free("127.0.0.1", server.port)
    assert report.gpu_memory_released is None  # no probe
    assert server.pid in report.stopped_pids
    assert server.stop() is report  # idempotent
    assert ledger.alive() == []


@pytest.mark.parametrize(
    "fixture, error_type",
    [("kvsmall.log", KvPoolTooSmall), ("ngram.log", ArgumentsRejected)],
)
def test_crash_at_start_fails_fast_and_is_classified(fake_request, quick_launcher, ledger, fixture, error_type):
    deadline = 600.0
    req = fake_request(ready_timeout_s=deadline, fake_mode="crash_at_start", fake_log_file=str(FIXTURES / fixture))
    started = time.monotonic()
    with pytest.raises(error_type) as caught:
        quick_launcher().start(req)
    elapsed = time.monotonic() - started
    error = caught.value
    assert elapsed < deadline / 10  # behaviour: polled every tick, not waited out
    assert error.returncode == 1
    assert error.teardown is not None and error.teardown.leftover_pids == ()
    assert error.log_path == req.log_path and "Traceback" in req.log_path.read_text()
    assert "ValueError" in error.log_excerpt
    assert "\n" not in str(error)


def test_crash_without_known_cause_stays_unknown_with_tail(fake_request, quick_launcher, ledger):
    with pytest.raises(UnknownLaunchFailure) as caught:
        quick_launcher().start(fake_request(fake_mode="crash_at_start", fake_exit_code=3))
    assert caught.value.returncode == 3
    assert "argv" in caught.value.log_excerpt  # the tail of what it printed


def test_hang_at_start_times_out(fake_request, quick_launcher, ledger):
    with pytest.raises(StartupTimeout) as caught:
        quick_launcher().start(fake_request(ready_timeout_s=0.5, fake_mode="hang"))
    error = caught.value
    assert error.returncode is None
    assert error.teardown.signal_sent == "TERM" and error.teardown.leftover_pids == ()
    assert error.teardown.port_released


def test_server_that_never_listens_times_out(fake_request, quick_launcher, ledger):
    with pytest.raises(StartupTimeout):
        quick_launcher().start(fake_request(ready_timeout_s=0.5, fake_mode="no_listen"))


def test_crash_mid_benchmark_raises_from_check_alive(fake_request, quick_launcher, ledger):
    server = quick_launcher().start(fake_request(fake_mode="crash_after_ready", fake_crash_after=0.2))
    try:
        deadline = time.monotonic() + 10
        with pytest.raises(ServerCrashed) as caught:
            while time.monotonic() < deadline:
                server.check_alive()
                time.sleep(0.05)
        error = caught.value
        assert error.returncode == 1
        assert "illegal memory access" in error.detail
        assert error.teardown is not None and error.teardown.leftover_pids == ()
        assert server.stopped
    finally:
        server.stop()


def test_a_grace_wait_catches_a_crash_that_comes_a_moment_later(fake_request, quick_launcher, ledger):
    """What the chain does after a level whose requests failed (`CRASH_GRACE_S`): the process
    is still running when asked at once, and has died, classified, within the grace."""
    server = quick_launcher().start(fake_request(fake_mode="crash_after_ready", fake_crash_after=1.0))
    try:
        server.check_alive()  # running: no exception, and no wait
        with pytest.raises(ServerCrashed) as caught:
            server.check_alive(grace_s=10.0)
        assert "illegal memory access" in caught.value.detail and server.stopped
    finally:
        server.stop()


def test_a_server_that_keeps_running_passes_the_grace_wait(fake_request, quick_launcher, ledger):
    server = quick_launcher().start(fake_request())
    try:
        server.check_alive(grace_s=0.3)  # waited 0.3 s, still running: no exception
        assert not server.stopped
    finally:
        server.stop()


def test_server_ignoring_term_is_killed_after_timeout(fake_request, quick_launcher, ledger):
    server = quick_launcher(term_timeout_s=0.3).start(fake_request(fake_ignore_term=True))
    report = server.stop()
    assert report.signal_sent == "KILL"
    assert report.killed_after_timeout
    assert report.leftover_pids == ()
    assert not is_alive(server.pid)


@pytest.mark.parametrize("child_ignores_term", [False, True])
def test_child_outside_group_holding_memory_is_stopped_and_memory_waited_for(
    tmp_path, fake_request, quick_launcher, ledger, child_ignores_term
):
    state = tmp_path / "gpu"
    state.mkdir()
    probe = SimGpuProbe(state)
    req = fake_request(
        fake_child="setsid",
        fake_child_mem_mb=1000,
        fake_mem_mb=500,
        fake_sim_gpu_state_dir=str(state),
        fake_child_ignore_term=child_ignores_term,
    )
    server = quick_launcher(probe, term_timeout_s=0.5).start(req)
    try:
        held = probe.snapshot()
        assert held.used_mb == {0: 1500.0}
        child = next(pid for pid in held.pids if pid != server.pid)
        assert read_proc(child).pgid != server.pgid  # it left the group: killpg alone misses it
        assert child in server.tracked_pids()
    finally:
        report = server.stop()
    assert child in report.stopped_pids
    assert report.leftover_pids == ()
    assert report.gpu_memory_released is True
    assert probe.snapshot().used_mb == {}
    assert report.killed_after_timeout is child_ignores_term


def test_child_that_outlives_a_crashed_parent_is_stopped(tmp_path, fake_request, quick_launcher, ledger):
    state = tmp_path / "gpu"
    state.mkdir()
    probe = SimGpuProbe(state)
    req = fake_request(
        fake_mode="crash_after_ready",
        fake_crash_after=0.2,
        fake_child="setsid",
        fake_child_mem_mb=800,
        fake_sim_gpu_state_dir=str(state),
    )
    server = quick_launcher(probe).start(req)
    try:
        child = next(pid for pid in probe.snapshot().pids)
        while is_alive(server.pid):
            time.sleep(0.02)
        assert is_alive(child)  # the parent died, its child still holds memory
        with pytest.raises(ServerCrashed) as caught:
            server.check_alive()
    finally:
        server.stop()
    report = caught.value.teardown
    assert child in report.stopped_pids and not is_alive(child)
    assert report.gpu_memory_released is True


def test_port_already_taken_fails_before_spawning(fake_request, quick_launcher, ledger):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spawned = []
        with pytest.raises(PortInUse) as caught:
            quick_launcher().start(fake_request(port=port), on_spawn=lambda *a: spawned.append(a))
    assert spawned == []
    assert str(port) in str(caught.value)
    assert ledger.pids() == set()


def test_readiness_falls_back_to_ready_endpoint(fake_request, quick_launcher, ledger):
    with quick_launcher().start(fake_request(fake_only_ready=True)) as server:
        assert server.ready_path == "/ready"


def test_runtime_events_count_retractions(fake_request, quick_launcher, ledger):
    with quick_launcher().start(fake_request(fake_retractions=3)) as server:
        deadline = time.monotonic() + 5
        while server.runtime_events()["retractions"] < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.runtime_events() == {"retractions": 3}


def test_secrets_never_reach_log_argv_or_repr(fake_request, quick_launcher, ledger):
    token, key = "hf_verysecretvalue42", "sk-another-secret-99"
    req = fake_request(env={"HF_TOKEN": token}, fake_print_env="HF_TOKEN", api_key=key)
    seen = []
    with quick_launcher().start(req, on_spawn=lambda *a: seen.append(a)) as server:
        log = req.log_path.read_text()
        assert "env HF_TOKEN=***" in log
        assert token not in log and key not in log
        assert server.argv[server.argv.index("--api-key") + 1] == "***"
        assert key not in " ".join(seen[0][2])
    assert token not in repr(req) and key not in repr(req)
    assert token not in str(req.as_dict()) and key not in str(req.as_dict())


def test_missing_command_is_a_usage_error(tmp_path):
    from autospec.launcher import Launcher

    req = LaunchRequest(command=(str(tmp_path / "no-such-python"),), flags={}, log_path=tmp_path / "s.log")
    with pytest.raises(UsageError, match="cannot start the server command"):
        Launcher().start(req)
