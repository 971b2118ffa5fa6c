"""Resume after `kill -9` of the tuner, for each storage (SQLite, journal file, PostgreSQL).

The tuner (`autospec optimize` in its own session) is SIGKILLed while its second trial's
server is benchmarking. Its server lives in a session of its own and survives, with a
child that left the server's process group (simulator fault ``zombie_child``). Running
the same command again must:

- stop every leftover process, verified as the trial's own (launch ID + start time), and
  wait for their GPU memory, before launching anything;
- fail the trial that was running (outcome ``stale``, its server log attached) and run its
  parameters again (``retry_of``): not lost, not counted twice;
- leave the trial finished before the kill unchanged, and reach exactly the target;
- log all of it in ``<study>-events.log``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import optuna
import psutil
import pytest

from autospec.launcher import Launcher
from autospec.launcher.proctree import boot_id, read_cmdline, read_proc
from autospec.records import SERVER_KEY, WORKER_KEY, TrialStore
from autospec.study.processes import recovery
from autospec.study.processes.identity import LAUNCH_ID_ENV, is_same_process, recorded_start, this_worker
from autospec.study.processes.owners import owner_env, owner_from_environ
from autospec.study.storage import open_storage

from .conftest import storage_spec

STUDY = "resume"


def load(spec: str, tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=open_storage(spec, STUDY, tmp_path / "studies").storage)


def ready_servers(tmp_path: Path) -> list[Path]:
    """Trial folders whose server answered readiness and got a benchmark request."""
    folder = tmp_path / "studies" / f"{STUDY}-trials"
    out = []
    for log in sorted(folder.glob("trial-*/server.log")):
        text = log.read_text(errors="replace")
        marker = 'GET /health_generate HTTP/1.1" 200'
        if marker in text and "POST /generate" in text.split(marker, 1)[1]:
            out.append(log.parent)
    return out


def snapshot(study: optuna.Study) -> dict[int, tuple]:
    return {t.number: (t.state, t.values, t.params, t.user_attrs) for t in study.trials if t.state.is_finished()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "backend",
    ["sqlite", "journal", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def test_kill_9_mid_trial_then_the_same_command_recovers_and_reaches_the_target(tmp_path, sim_space, tuners, backend, request):
    (tmp_path / "studies").mkdir()
    spec = storage_spec(backend, STUDY, tmp_path, request)
    argv = [
        "optimize",
        "--space",
        str(sim_space),
        "--study",
        STUDY,
        "--storage",
        spec,
        "--studies-dir",
        str(tmp_path / "studies"),
        "--trials",
        "2",
        "--seed",
        "7",
        *tuners.sim_flags,
    ]
    env = {"AUTOSPEC_SIM_FAULTS": "zombie_child"}

    first = tuners(argv, env).start()
    first.wait_until(lambda: len(ready_servers(tmp_path)) == 2, "the second server to be benchmarked")
    first.kill9()

    survivors = tuners.leftovers()
    assert len(survivors) == 3, f"server, its scheduler child and the setsid child survive the kill: {survivors}"
    study = load(spec, tmp_path)
    before = snapshot(study)
    assert [s for s, *_ in before.values()] == [optuna.trial.TrialState.COMPLETE]
    (killed,) = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert killed.system_attrs[WORKER_KEY]["launch_id"]
    assert killed.system_attrs[SERVER_KEY]["pid"] in survivors

    second = tuners(argv, env).start()
    assert second.wait() == 0, second.stderr
    assert tuners.leftovers() == {}

    study = load(spec, tmp_path)
    after = {t.number: t for t in study.trials}
    for number, data in before.items():  # finished before the kill: unchanged
        t = after[number]
        assert (t.state, t.values, t.params, t.user_attrs) == data
    stale = after[killed.number]
    assert stale.state == optuna.trial.TrialState.FAIL
    assert stale.user_attrs["outcome"] == "stale" and stale.user_attrs["launched"] is True
    metas = optuna.artifacts.get_all_artifact_meta(stale, storage=study._storage)
    assert "server.log" in {m.filename for m in metas}
    (retry,) = [t for t in study.trials if t.user_attrs.get("retry_of") == killed.number]
    assert retry.state == optuna.trial.TrialState.COMPLETE and retry.params == killed.params
    assert retry.user_attrs["outcome"] == "ok"
    launched = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched")]
    assert len(launched) == 2

    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    stopped = [line for line in events.splitlines() if f"stopped leftover server of trial {killed.number} " in line]
    assert len(stopped) == 1 and "GPU memory released" in stopped[0]
    for pid in survivors:
        assert str(pid) in stopped[0]
    assert f"trial {killed.number} was running when the tuner stopped; failed it" in events
    assert f"queued the parameters of trial {killed.number} again" in events
    for t in launched:
        assert f"trial {t.number}: outcome=ok launched=True" in events


# ---------------------------------------------------------------- recovery, piece by piece
# (in-memory studies and `sleep` processes standing in for servers; no simulator)


@pytest.fixture
def sleepers():
    """Start `sleep` processes in sessions of their own (optionally with a launch ID);
    all are killed at teardown."""
    procs: list[subprocess.Popen] = []

    def start(launch_id: str | None = None) -> subprocess.Popen:
        env = dict(os.environ)
        if launch_id:
            env[LAUNCH_ID_ENV] = launch_id
        proc = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
        procs.append(proc)
        recovery_wait_started(proc.pid)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def recovery_wait_started(pid: int) -> None:
    """Until the child has exec'd `sleep` (its command line reads as such)."""
    deadline = time.monotonic() + 10
    while not read_cmdline(pid).startswith("sleep"):
        assert time.monotonic() < deadline, f"process {pid} did not start"
        time.sleep(0.01)


def alive(proc: subprocess.Popen) -> bool:
    return proc.poll() is None


def new_study() -> optuna.Study:
    return optuna.create_study(directions=["maximize", "maximize"])


def recover(study: optuna.Study) -> list[str]:
    return recovery.recover(TrialStore(study, [True, True], []), Launcher())


def running_trial(study: optuna.Study, worker: dict, server: dict | None = None, x: int = 1) -> optuna.Trial:
    study.enqueue_trial({"x": x})
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    study._storage.set_trial_system_attr(trial._trial_id, WORKER_KEY, worker)
    if server is not None:
        study._storage.set_trial_system_attr(trial._trial_id, SERVER_KEY, server)
    return trial


def dead_worker(launch_id: str | None = None) -> dict:
    gone = subprocess.Popen(["true"])
    gone.wait()
    record = {"host": socket.gethostname(), "pid": gone.pid, "start_time": 12345}
    if launch_id:
        record["launch_id"] = launch_id
    return record


def retries_of(study: optuna.Study, number: int) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.user_attrs.get("retry_of") == number]


def test_a_dead_tuners_trial_is_failed_and_queued_again_exactly_once():
    study = new_study()
    trial = running_trial(study, dead_worker(), x=3)
    lines = recover(study)
    assert study.trials[trial.number].state == optuna.trial.TrialState.FAIL
    assert study.trials[trial.number].user_attrs["outcome"] == "stale"
    (retry,) = retries_of(study, trial.number)
    assert retry.state == optuna.trial.TrialState.WAITING and retry.system_attrs["fixed_params"] == {"x": 3}
    assert any("was running when the tuner stopped" in line for line in lines)
    assert recover(study) == []  # idempotent: no second retry
    assert len(retries_of(study, trial.number)) == 1


def test_a_live_tuners_trial_is_left_alone_but_a_reused_pid_is_not_that_tuner():
    study = new_study()
    mine = running_trial(study, this_worker("a" * 32))
    reused = dict(this_worker("b" * 32), start_s=this_worker()["start_s"] + 1)
    other = running_trial(study, reused, x=2)
    recover(study)
    assert study.trials[mine.number].state == optuna.trial.TrialState.RUNNING
    assert study.trials[other.number].state == optuna.trial.TrialState.FAIL
    assert len(retries_of(study, other.number)) == 1


def test_a_live_tuner_stays_itself_when_the_wall_clock_moves(monkeypatch):
    """psutil's creation times add /proc/stat's btime, whole seconds that move when the
    clock is slewed or stepped; two processes could then read one start a second apart.
    Identity is the start since boot, which no clock change moves."""
    study = new_study()
    worker = this_worker("a" * 32)
    mine = running_trial(study, worker)
    env = owner_env("s", mine.number, "sqlite://", "a" * 32, worker["pid"], worker["start_s"])
    boot, created = psutil.boot_time(), psutil.Process().create_time()
    monkeypatch.setattr(psutil._psplatform, "boot_time", lambda: boot + 1.0)
    assert psutil.Process().create_time() == pytest.approx(created + 1.0)  # psutil's reading moved
    assert is_same_process(worker)
    assert owner_from_environ(env).tuner_alive
    assert recover(study) == []
    assert study.trials[mine.number].state == optuna.trial.TrialState.RUNNING


def test_a_start_from_another_boot_names_no_process_and_older_records_are_converted():
    now = this_worker()
    assert recorded_start(dict(now, boot_id="0" * 32)) is None
    assert not is_same_process(dict(now, boot_id="0" * 32))
    older = {"host": now["host"], "pid": now["pid"], "create_time": psutil.Process().create_time()}
    assert recorded_start(older) == pytest.approx(now["start_s"], abs=0.05)
    assert is_same_process(older)
    assert recorded_start({"start_time": 250}) == 250 / os.sysconf("SC_CLK_TCK")


def test_leftover_processes_are_stopped_only_when_verified_as_the_trials_own(sleepers):
    study = new_study()
    by_launch_id = sleepers("1" * 32)  # carries the dead trial's launch ID
    by_record = sleepers()  # recorded as the trial's server: same PID, start time and command line
    reused = sleepers()  # recorded PID and command line match, start time does not: a recycled PID
    foreign = sleepers("f" * 32)  # same command, another launch's ID
    host = socket.gethostname()

    def server(proc, start_offset=0):
        return {
            "host": host,
            "pid": proc.pid,
            "pgid": proc.pid,
            "port": None,
            "cmdline": read_cmdline(proc.pid),
            "start_s": read_proc(proc.pid).starttime + start_offset,
            "boot_id": boot_id(),
        }

    a = running_trial(study, dead_worker("1" * 32), server(by_record))
    running_trial(study, dead_worker("2" * 32), server(reused, start_offset=-5), x=2)
    lines = recover(study)

    by_launch_id.wait(timeout=10)
    by_record.wait(timeout=10)
    assert not alive(by_launch_id) and not alive(by_record)
    assert alive(reused) and alive(foreign)
    stopped = [line for line in lines if line.startswith("stopped leftover server")]
    assert len(stopped) == 1 and f"trial {a.number} " in stopped[0]
    assert str(by_launch_id.pid) in stopped[0] and str(by_record.pid) in stopped[0]


def test_a_failed_trial_left_without_a_retry_by_a_crash_gets_one():
    study = new_study()
    trial = running_trial(study, dead_worker(), x=4)
    study.tell(trial, state=optuna.trial.TrialState.FAIL)  # the crash came before the enqueue
    recover(study)
    (retry,) = retries_of(study, trial.number)
    assert retry.system_attrs["fixed_params"] == {"x": 4}


def test_parameters_that_were_running_at_every_crash_are_given_up_after_the_limit():
    study = new_study()
    trial = running_trial(study, dead_worker(), x=5)
    lines = recover(study)
    for _ in range(recovery.MAX_STALE_RETRIES):
        (retry,) = retries_of(study, trial.number)
        trial = study.ask()  # the retry, and the tuner dies again while it runs
        assert trial.number == retry.number and trial.suggest_int("x", 0, 9) == 5
        study._storage.set_trial_system_attr(trial._trial_id, WORKER_KEY, dead_worker())
        lines = recover(study)
    assert retries_of(study, trial.number) == []
    assert any(f"not retrying the parameters of trial {trial.number}" in line for line in lines)


def test_a_running_trial_without_a_worker_record_is_failed_once_it_is_old(monkeypatch):
    study = new_study()
    study.enqueue_trial({"x": 6})
    orphan = study.ask()  # the tuner died between ask and recording itself
    assert recover(study) == []  # young: it may be another tuner's, recording right now
    monkeypatch.setattr(recovery, "ORPHAN_AGE_S", 0.0)
    recover(study)
    assert study.trials[orphan.number].user_attrs["outcome"] == "orphaned"
    (retry,) = retries_of(study, orphan.number)
    assert retry.system_attrs["fixed_params"] == {"x": 6}
