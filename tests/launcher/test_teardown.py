"""stop_process_group used on its own (leftovers of earlier runs), ports and /proc helpers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from autospec.launcher import stop_process_group, wait_port_free
from autospec.launcher.ports import is_port_free, pick_free_port
from autospec.launcher.proctree import ProcessTracker, is_alive, read_cmdline, read_proc
from autospec.launcher.readiness import check_once

from .conftest import FAKE_SERVER

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def wait_for(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def test_leftover_group_with_escaped_child_is_stopped_from_recorded_ids(tmp_path, ledger):
    state = tmp_path / "gpu"
    state.mkdir()
    env = dict(os.environ, FAKE_PID_DIR=str(ledger.pid_dir))
    server = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "--fake-mode", "hang", "--fake-child", "setsid", "--port", str(pick_free_port())],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert wait_for(lambda: len(ledger.pids()) == 2)
    child = (ledger.pids() - {server.pid}).pop()
    recorded = {child: read_proc(child).starttime}
    report = stop_process_group(server.pid, recorded, term_timeout_s=2, reap=server.poll)
    assert report.leftover_pids == ()
    assert set(report.stopped_pids) >= {server.pid, child}
    assert not is_alive(child) and not is_alive(server.pid)
    assert server.wait(timeout=5) is not None  # reapable: it really exited


def test_a_recycled_pid_is_not_signalled():
    bystander = subprocess.Popen(SLEEP, start_new_session=True)
    try:
        wrong_start = read_proc(bystander.pid).starttime + 1
        gone_group = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
        gone_group.wait()
        report = stop_process_group(gone_group.pid, {bystander.pid: wrong_start}, term_timeout_s=0.2)
        assert report.leftover_pids == ()
        assert bystander.poll() is None and is_alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_tracker_finds_descendants_by_parent_link():
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        tracker = ProcessTracker(parent.pid, pgid=parent.pid)
        assert wait_for(lambda: (tracker.refresh(), len(tracker.alive()) == 2)[1])
        child = next(pid for pid in tracker.alive() if pid != parent.pid)
        assert read_proc(child).sid == child  # it called setsid
        assert "time.sleep(60)" in read_cmdline(child)
    finally:
        report = stop_process_group(parent.pid, tracker=tracker, term_timeout_s=2, reap=parent.poll)
    assert report.leftover_pids == ()
    assert not is_alive(child)


def test_port_helpers():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not is_port_free("127.0.0.1", port)
        assert wait_port_free("127.0.0.1", port, timeout_s=0.1) is False
        assert check_once("127.0.0.1", port, "/health_generate", timeout_s=0.2) is None  # accepts, never answers
    assert wait_port_free("127.0.0.1", port, timeout_s=2)
    assert check_once("127.0.0.1", port, "/health_generate", timeout_s=0.5) is None  # refused


def test_stop_of_a_group_already_gone_is_quick_and_clean():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    proc.wait()
    report = stop_process_group(proc.pid, term_timeout_s=5)
    assert report.signal_sent == "TERM" and report.leftover_pids == () and report.port_released
    assert report.as_dict()["leftover_pids"] == []


def test_zombie_counts_as_gone():
    proc = subprocess.Popen(SLEEP, start_new_session=True)
    os.kill(proc.pid, signal.SIGKILL)
    assert wait_for(lambda: read_proc(proc.pid) is not None and read_proc(proc.pid).zombie)
    assert not is_alive(proc.pid)
    proc.wait()


def test_interrupt_during_teardown_kills_at_once_and_propagates():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ok', flush=True); time.sleep(60)",
        ],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout.readline() == b"ok\n"  # TERM is ignored from now on
    calls = []

    def interrupting_reap():
        calls.append(1)
        if len(calls) == 3:  # while waiting for TERM to work, the user presses Ctrl-C again
            raise KeyboardInterrupt

    try:
        stop_process_group(proc.pid, term_timeout_s=30, kill_timeout_s=5, reap=interrupting_reap)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt must propagate")
    assert proc.wait(timeout=5) == -signal.SIGKILL
    proc.stdout.close()


def test_process_whose_main_thread_exited_but_other_threads_run_is_alive():
    script = (
        "import ctypes, threading, time\n"
        "threading.Thread(target=lambda: time.sleep(60)).start()\n"
        "print('ok', flush=True)\n"
        "ctypes.CDLL(None).pthread_exit(None)\n"
    )  # the main thread ends at OS level
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ok\n"
        assert wait_for(lambda: read_proc(proc.pid).zombie)  # /proc/<pid>/stat reads "Z" now
        assert is_alive(proc.pid)  # but a thread still runs (and would still hold its memory)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert not is_alive(proc.pid)
