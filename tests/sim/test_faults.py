"""Faults the simulator injects (``--sim-fault`` / ``AUTOSPEC_SIM_FAULTS``)."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from autospec.sim.faults import HANG_STOPPED, Faults, FaultSpecError, parse_faults

from .conftest import SPEC_FLAGS, pid_alive

FAST = ("--sim-noise", "off", "--sim-load-seconds", "0.2", "--sim-time-scale", "0.05")
BODY = {"text": "w1 w2 w3", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}


def test_parse_faults_reads_every_spec():
    faults = parse_faults(
        [
            "crash_after_requests=3",
            "hang_at_start",
            "ignore_sigterm",
            "zombie_child",
            "slow_start=1.5",
            "crash_at_start",
            "error_rate=0.25",
            "stall_after_requests=8:2.5",
            " ",
        ]
    )
    assert faults == Faults(
        crash_after_requests=3,
        hang_at_start=True,
        ignore_sigterm=True,
        zombie_child=True,
        slow_start_s=1.5,
        crash_at_start=True,
        error_rate=0.25,
        stall_after_requests=(8, 2.5),
    )
    assert parse_faults([]) == Faults()


@pytest.mark.parametrize(
    "spec",
    [
        "explode",
        "crash_after_requests=x",
        "error_rate=2",
        "slow_start=-1",
        "hang_at_start=1",
        "stall_after_requests=3",
        "stall_after_requests=3:0",
        "stall_after_requests=-1:2",
    ],
)
def test_bad_fault_specs_are_one_line_errors(spec):
    with pytest.raises(FaultSpecError) as error:
        parse_faults([spec])
    assert spec in str(error.value) and "\n" not in str(error.value)


def test_bad_fault_spec_exits_2_without_starting(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "explode")
    assert sim.wait_exit() == 2
    assert sim.log().startswith("autospec.sim: error: unknown --sim-fault 'explode'")


def test_crash_after_requests(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, env_extra={"AUTOSPEC_SIM_FAULTS": "crash_after_requests=2"})
    sim.wait_ready()
    for _ in range(2):
        assert httpx.post(sim.url + "/generate", json=BODY, timeout=30).status_code == 200
    assert sim.wait_exit() == -signal.SIGKILL
    log = sim.log()
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert "Received sigquit from a child process." in log


def test_hang_at_start_never_becomes_ready(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "hang_at_start")
    sim.wait_log("Load weight begin")  # the fault's hang begins as this line is written
    assert httpx.get(sim.url + "/health_generate").status_code == 503
    os.killpg(sim.proc.pid, signal.SIGTERM)
    assert sim.wait_exit() == 0
    # Stopping the server cancelled its startup while it still hung there: loading never went on.
    log = sim.log()
    assert HANG_STOPPED in log
    assert "Load weight end" not in log.split(HANG_STOPPED)[0]


def test_ignore_sigterm_needs_kill(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "ignore_sigterm")
    sim.wait_ready()
    os.killpg(sim.proc.pid, signal.SIGTERM)
    sim.wait_log("SIGTERM received.")
    # The handler that logs the line starts the shutdown in the same step, before the server
    # answers another request: still ready afterwards means SIGTERM was ignored.
    assert httpx.get(sim.url + "/health_generate").status_code == 200
    os.killpg(sim.proc.pid, signal.SIGKILL)
    assert sim.wait_exit() == -signal.SIGKILL  # not an exit of its own


def test_zombie_child_outlives_its_group_and_holds_memory(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "zombie_child")
    sim.wait_ready()
    children = [r for r in sim.state_records() if r["pid"] != sim.proc.pid]
    assert len(children) == 1
    child = children[0]["pid"]
    assert children[0]["mem_mb"] > 0
    assert os.getpgid(child) != sim.proc.pid  # setsid: not in the server's process group
    os.killpg(sim.proc.pid, signal.SIGKILL)
    assert sim.wait_exit() == -signal.SIGKILL
    # SIGTERM makes the child remove its file and exit; a child the group's SIGKILL reached
    # can run no handler again, so a removed file proves it outlived its group.
    os.kill(child, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while any(r["pid"] == child for r in sim.state_records()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r for r in sim.state_records() if r["pid"] == child] == []
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(child)
    # The parent was SIGKILLed: its file stays, naming a dead PID (which readers ignore).
    assert [r["pid"] for r in sim.state_records()] == [sim.proc.pid] and not pid_alive(sim.proc.pid)


def test_slow_start_delays_readiness_after_startup_lines(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "slow_start=1.5")
    sim.wait_log("Uvicorn running on")
    assert httpx.get(sim.url + "/health_generate").status_code == 503
    sim.wait_ready()
    assert "The server is fired up and ready to roll!" in sim.log()


def test_crash_at_start_dies_with_a_cuda_error(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "crash_at_start")
    assert sim.wait_exit() != 0
    log = sim.log()
    assert "RuntimeError: CUDA error: an illegal memory access was encountered" in log
    assert "Load weight end" not in log and "fired up" not in log


def test_error_rate_one_fails_every_request(sim_factory):
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "error_rate=1")
    sim.wait_ready()
    assert httpx.post(sim.url + "/generate", json=BODY, timeout=30).status_code == 500
    outcomes: set[str] = set()
    # each failing stream is a 500 or a cut-off with probability 1/2 each: 8 tries once saw
    # only cut-offs (p = 1/128 per run), so ask until both came (64 tries miss one with p = 2^-63)
    for _ in range(64):
        if outcomes == {"500", "truncated"}:
            break
        stream_body = {**BODY, "stream": True}
        try:
            with httpx.stream("POST", sim.url + "/generate", json=stream_body, timeout=30) as response:
                if response.status_code == 500:
                    outcomes.add("500")
                    continue
                lines = list(response.iter_lines())
            outcomes.add("complete" if "data: [DONE]" in lines else "no-done")
        except httpx.RemoteProtocolError:
            outcomes.add("truncated")
    assert outcomes == {"500", "truncated"}


def test_stall_after_requests_holds_one_prefill_once(sim_factory):
    # 0.05 time scale: 20 simulated seconds are 1 s of wall time.
    sim = sim_factory(*SPEC_FLAGS, *FAST, "--sim-fault", "stall_after_requests=2:20")
    sim.wait_ready()

    def scheduled() -> float:
        return httpx.get(sim.url + "/server_info", timeout=30).json()["internal_states"][0]["sim_scheduled_seconds"]

    def seconds() -> tuple[float, float]:
        """(wall seconds, seconds its steps were scheduled to take) of one request."""
        t0, schedule = time.monotonic(), scheduled()
        assert httpx.post(sim.url + "/generate", json=BODY, timeout=30).status_code == 200
        return time.monotonic() - t0, scheduled() - schedule

    before = [seconds() for _ in range(2)]
    stalled, after = seconds(), seconds()
    # Identical requests are scheduled identically, but for the third's stall (once); and it
    # really waited (a loaded machine can only make it wait longer).
    assert [s for _, s in before] == pytest.approx([after[1]] * 2)
    assert stalled[1] == pytest.approx(after[1] + 1.0)
    assert stalled[0] >= 1.0
