"""Scale-out end to end against the simulator (real processes, real storages): GPU slots
on one host, workers of two hosts sharing a PostgreSQL study, and workers SIGKILLed in
the middle of trials. Each asserts what a user counts on: exactly ``--trials`` launched
trials, no configuration launched twice, every trial's host and slot recorded, and no
server left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import psutil
import pytest

from autospec.records import STALE, WITHDRAWN, read_trials
from autospec.study.slots import PORT_BASE, PORT_SPAN
from autospec.study.storage import open_storage

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]

# Loads of 3-4 s so that several trials overlap (the simulator sleeps; the CPU is free).
SIM = ["--sim", "--sim-warmup-seconds", "0.2", "--output-len", "24", "--concurrency", "1,4", "--sampler", "random"]


def autospec(args, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "autospec", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def finish(proc: subprocess.Popen, timeout: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


def study_trials(storage: str, name: str):
    """The study's trials, read the way a worker opens the storage (a reader that starts
    while the workers create the database's tables retries that race as they do)."""
    handle = open_storage(storage, name, Path())
    return read_trials(optuna.load_study(study_name=name, storage=handle.storage))


def assert_exact_and_unique(trials, n):
    """Exactly `n` launches; the search launched no configuration twice, and the
    confirmation launches (at most a quarter of the budget, the default) relaunch
    configurations the search launched."""
    launched = [t for t in trials if t.counts_as_launch]
    assert len(launched) == n
    searched = [t for t in launched if t.markers.confirm_of is None]
    twice = [p for p, k in Counter(tuple(sorted(t.params.items())) for t in searched).items() if k > 1]
    assert not twice, f"launched twice: {twice}"
    confirmations = [t for t in launched if t.markers.confirm_of is not None]
    assert len(confirmations) <= n // 4
    by_number = {t.number: t for t in searched}
    assert all(t.params == by_number[t.markers.confirm_of].params for t in confirmations)
    return launched


@pytest.mark.parametrize("backend", ["sqlite", "journal"])
def test_two_slots_on_one_host_share_the_study_and_keep_to_their_gpus_and_ports(tmp_path, fast_space, backend):
    storage = f"sqlite:///{tmp_path}/s.db" if backend == "sqlite" else str(tmp_path / "s.log")
    out = finish(
        autospec(
            [
                "optimize",
                "--space",
                str(fast_space),
                "--study",
                "s",
                "--storage",
                storage,
                "--studies-dir",
                str(tmp_path / "studies"),
                "--trials",
                "6",
                "--gpus",
                "0,1",
                "--gpus-per-trial",
                "1",
                "--sim-load-seconds",
                "3",
                *SIM,
            ]
        )
    )
    assert "slot 0: GPU 0" in out and "slot 1: GPU 1" in out and "[slot 1]" in out
    launched = assert_exact_and_unique(study_trials(storage, "s"), 6)
    used = Counter(t.worker["slot"]["index"] for t in launched)
    assert set(used) == {0, 1}, used
    for t in launched:
        slot = t.worker["slot"]
        assert slot["gpus"] == [slot["index"]] and not slot["shared"]
        window = range(PORT_BASE + slot["index"] * PORT_SPAN, PORT_BASE + (slot["index"] + 1) * PORT_SPAN)
        argv = t.record.server_args
        assert int(argv[argv.index("--port") + 1]) in window
        assert int(argv[argv.index("--nccl-port") + 1]) in window
        assert t.worker["hardware"].endswith("x1")


@pytest.mark.postgres
def test_workers_of_two_hosts_with_two_slots_each_launch_exactly_n_distinct_configurations(tmp_path, fast_space, postgres_url):
    common = ["--study", "s", "--storage", postgres_url, "--gpus", "0,1", "--gpus-per-trial", "1"]
    first = autospec(
        [
            "optimize",
            "--space",
            str(fast_space),
            "--studies-dir",
            str(tmp_path / "a"),
            "--trials",
            "8",
            "--sim-load-seconds",
            "4",
            *SIM,
            *common,
        ],
        env={"AUTOSPEC_HOST": "host-a"},
    )
    deadline = time.monotonic() + 120
    while not any(s.study_name == "s" for s in optuna.get_all_study_summaries(postgres_url)):
        assert first.poll() is None and time.monotonic() < deadline, first.stdout.read() if first.stdout else ""
        time.sleep(0.5)
    # the second host knows only the storage and the study's name
    second = autospec(["worker", "--studies-dir", str(tmp_path / "b"), *common], env={"AUTOSPEC_HOST": "host-b"})
    out_a, out_b = finish(first), finish(second)
    trials = study_trials(postgres_url, "s")
    launched = assert_exact_and_unique(trials, 8)
    hosts = Counter(t.worker["host"] for t in launched)
    assert set(hosts) == {"host-a", "host-b"}, (hosts, out_a, out_b)
    assert all(t.worker["slot"]["index"] in (0, 1) for t in launched)
    assert (tmp_path / "b" / "s.space.toml").read_text() == fast_space.read_text()
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    # the report says where the launches ran
    pareto = subprocess.run(
        [sys.executable, "-m", "autospec", "pareto", "--study", "s", "--storage", postgres_url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    where = pareto.split("where the launches ran")[1].split("\n\n")[0]
    # the slots that launched (a slow start can leave one of the four without a launch)
    slots = len({(t.worker["host"], t.worker["slot"]["index"]) for t in launched})
    assert slots >= 3 and f"8 launches on host-a, host-b ({slots} slots)" in where, pareto


def test_workers_sigkilled_mid_trial_are_recovered_by_the_others_and_their_trials_retried_once(tmp_path, fast_space):
    storage = f"sqlite:///{tmp_path}/s.db"
    n, kills = 9, 3

    def worker(gpu: int) -> subprocess.Popen:
        return autospec(
            [
                "optimize",
                "--space",
                str(fast_space),
                "--study",
                "s",
                "--storage",
                storage,
                "--studies-dir",
                str(tmp_path / "studies"),
                "--trials",
                str(n),
                "--gpus",
                str(gpu),
                "--gpus-per-trial",
                "1",
                "--sim-load-seconds",
                "3",
                *SIM,
            ]
        )

    workers = {gpu: worker(gpu) for gpu in range(3)}
    killed: list[int] = []
    deadline = time.monotonic() + 240
    while len(killed) < kills:
        assert time.monotonic() < deadline, f"only {len(killed)} kills"
        time.sleep(0.3)
        if not os.path.exists(f"{tmp_path}/s.db"):
            continue
        try:
            trials = study_trials(storage, "s")
        except KeyError:  # the storage file is there, the study not yet
            continue
        running = [
            t
            for t in trials
            if t.state == optuna.trial.TrialState.RUNNING and t.server is not None and t.worker and t.number not in killed
        ]
        victims = [(gpu, t) for gpu, p in workers.items() for t in running if t.worker["pid"] == p.pid]
        if not victims:
            continue
        gpu, trial = victims[0]
        workers[gpu].send_signal(signal.SIGKILL)  # mid-trial: its server is up and outlives it
        workers[gpu].communicate()
        after = {t.number: t for t in study_trials(storage, "s")}[trial.number]
        if after.state == optuna.trial.TrialState.RUNNING or after.outcome == STALE:  # not told just before the kill
            killed.append(trial.number)
        workers[gpu] = worker(gpu)  # the host's next run on that GPU
    outs = [finish(p) for p in workers.values()]
    trials = study_trials(storage, "s")
    assert_exact_and_unique(trials, n)
    by_number = {t.number: t for t in trials}
    for number in killed:
        assert by_number[number].outcome == STALE
        retries = [t for t in trials if t.markers.retry_of == number]
        assert len(retries) == 1, (number, outs)
    assert not [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
    assert all(t.outcome != STALE or t.number in killed for t in trials)
    assert all(t.markers.retry_of is None or t.outcome != WITHDRAWN for t in trials)
    # the servers of the killed workers were stopped (the fixture also fails on any left)
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or ()) and "autospec.sim" in " ".join(p.info["cmdline"] or ())
    ]
