"""Stop signals on a running study (`autospec optimize` as a subprocess in its own session):

- first Ctrl-C / SIGTERM / SIGHUP: the server is torn down by the tuner itself, the trial is
  stored as FAIL "interrupted" with its server log and queued again, exit 130 with a
  message saying how to resume; the same command then continues to the target;
- a second signal kills a server that ignores SIGTERM at once instead of waiting out the
  launcher's 30 s TERM timeout;
- `--timeout` stops between trials: the trial in flight is finished, not interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import optuna
import pytest

from autospec.cli.main import main
from autospec.study.processes.identity import LAUNCH_ID_ENV
from autospec.study.processes.stopping import LiveServers, StopSignals

STUDY = "sig"
READY_200 = 'GET /health_generate HTTP/1.1" 200'  # readiness answered: benchmarking starts next
# 300 output tokens: a benchmark level lasts about a second, long enough for a signal to land in it.
SIM_FLAGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--output-len", "300", "--quiet"]
FAST_SIM_FLAGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


def argv(tmp_path: Path, space: Path, trials: int, *extra: str, flags: list[str] = SIM_FLAGS) -> list[str]:
    return [
        "optimize",
        "--space",
        str(space),
        "--study",
        STUDY,
        "--studies-dir",
        str(tmp_path / "studies"),
        "--trials",
        str(trials),
        "--seed",
        "5",
        *flags,
        *extra,
    ]


def load(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{tmp_path / 'studies' / STUDY}.db")


def server_log(tmp_path: Path, number: int = 0) -> Path:
    return tmp_path / "studies" / f"{STUDY}-trials" / f"trial-{number:04d}" / "server.log"


def log_has(path: Path, text: str) -> bool:
    return path.is_file() and text in path.read_text(errors="replace")


def benchmarking(path: Path) -> bool:
    """A benchmark request reached the server (after readiness answered 200)."""
    text = path.read_text(errors="replace") if path.is_file() else ""
    return READY_200 in text and "POST /generate" in text.split(READY_200, 1)[1]


def artifact_names(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> set[str]:
    return {m.filename for m in optuna.artifacts.get_all_artifact_meta(trial, storage=study._storage)}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_first_signal_tears_down_records_the_trial_and_exits_130(tmp_path, sim_space, tuners, sig):
    tuner = tuners(argv(tmp_path, sim_space, 2)).start()
    log = server_log(tmp_path)
    tuner.wait_until(lambda: benchmarking(log), "the first benchmark request")
    tuner.signal(sig)
    code = tuner.wait()

    assert code == 130, tuner.stderr
    assert f"autospec: {sig.name}: stopping" in tuner.stderr
    assert "run the same command again to continue" in tuner.stderr.splitlines()[-1]
    # The tuner tore its server down itself before exiting (no recovery involved).
    assert tuners.leftovers() == {}
    assert log_has(log, "SIGTERM received")

    study = load(tmp_path)
    interrupted = study.trials[0]
    assert interrupted.state == optuna.trial.TrialState.FAIL
    assert interrupted.user_attrs["outcome"] == "interrupted"
    assert interrupted.user_attrs["launched"] is True
    assert "server torn down" in interrupted.user_attrs["reason"]
    assert "server.log" in artifact_names(study, interrupted)
    retry = [t for t in study.trials if t.user_attrs.get("retry_of") == interrupted.number]
    assert len(retry) == 1 and retry[0].state == optuna.trial.TrialState.WAITING
    assert retry[0].system_attrs["fixed_params"] == interrupted.params
    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    line = next(x for x in events.splitlines() if f"trial {interrupted.number}: outcome=interrupted" in x)
    assert "stopped by a signal during bench" in line and "queued again" in line

    if sig == signal.SIGINT:  # resuming: same command, the retry runs first, target met exactly
        again = tuners(argv(tmp_path, sim_space, 2)).start()
        assert again.wait() == 0, again.stderr
        study = load(tmp_path)
        launched = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched")]
        assert len(launched) == 2
        rerun = study.trials[retry[0].number]
        assert rerun.state == optuna.trial.TrialState.COMPLETE and rerun.params == interrupted.params


@pytest.mark.slow
def test_second_signal_kills_a_server_that_ignores_sigterm_at_once(tmp_path, sim_space, tuners):
    tuner = tuners(argv(tmp_path, sim_space, 2), env={"AUTOSPEC_SIM_FAULTS": "ignore_sigterm"}).start()
    log = server_log(tmp_path)
    tuner.wait_until(lambda: benchmarking(log), "the first benchmark request")
    tuner.signal(signal.SIGTERM)
    tuner.wait_until(lambda: log_has(log, "SIGTERM received"), "the server to ignore SIGTERM")
    assert tuners.leftovers(), "the server ignores TERM and is still running"
    tuner.signal(signal.SIGTERM)
    # The launcher would wait 30 s before KILL; the second signal must not wait for that.
    code = tuner.wait(timeout_s=20)

    assert code == 130
    assert "SIGTERM again: killing the server now" in tuner.stderr
    assert tuners.leftovers() == {}
    trial = load(tmp_path).trials[0]
    assert trial.state == optuna.trial.TrialState.FAIL
    assert trial.user_attrs["outcome"] == "interrupted"
    assert "killed at once by a second signal" in trial.user_attrs["reason"]


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_timeout_stops_between_trials_and_the_same_command_continues(tmp_path, sim_space, capsys):
    args = argv(tmp_path, sim_space, 2, flags=FAST_SIM_FLAGS)
    assert main(args + ["--timeout", "1s"]) == 0
    out = capsys.readouterr().out
    assert "stopped at --timeout with 1/2 trials; run the same command to continue" in out
    study = load(tmp_path)
    # The trial in flight when the time ran out was finished, not interrupted (WAITING
    # trials are configurations queued for later).
    states = {t.state for t in study.trials}
    assert optuna.trial.TrialState.COMPLETE in states
    assert states <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.WAITING}
    assert sum(1 for t in study.trials if t.user_attrs.get("launched")) == 1

    assert main(args) == 0
    assert sum(1 for t in load(tmp_path).trials if t.user_attrs.get("launched")) == 2


# ---------------------------------------------------------------- the stop policy, piece by piece
def test_first_signal_interrupts_at_once_or_right_after_a_storage_write():
    stop = StopSignals()
    with pytest.raises(KeyboardInterrupt):
        stop.handle(signal.SIGINT)

    stop.reset()
    written = []
    with pytest.raises(KeyboardInterrupt), stop.deferred():
        stop.handle(signal.SIGTERM)  # arrives in the middle of the write...
        written.append("trial stored")  # ...which still completes
    assert written == ["trial stored"]


def test_second_signal_kills_the_servers_and_interrupts_even_inside_a_write(monkeypatch):
    killed = []
    live = LiveServers()
    monkeypatch.setattr(live, "kill_now", lambda: killed.append("kill") or [])
    stop = StopSignals(live)
    written = []
    with pytest.raises(KeyboardInterrupt), stop.deferred():
        stop.handle(signal.SIGINT)
        stop.handle(signal.SIGINT)
        written.append("not reached")
    assert killed == ["kill"] and written == []


def test_live_servers_kill_now_reaches_only_processes_with_a_registered_launch_id():
    def sleeper(launch_id):
        env = {**os.environ, LAUNCH_ID_ENV: launch_id}
        return subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)

    ours, other = sleeper("a" * 32), sleeper("b" * 32)
    live = LiveServers()
    live.add("a" * 32)
    try:
        assert live.kill_now() == [ours.pid]
        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for proc in (ours, other):
            proc.kill()
            proc.wait()
