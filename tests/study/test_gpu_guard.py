"""Who holds GPU memory before a study starts: its own leftovers are stopped, anything else
is refused with a message that says whose it is and how to stop it safely.

Processes stand in for servers: `sleep` with the environment autospec gives a server
(`owners.owner_env`), holding simulated GPU memory through a state file the way the
simulator records it (`launcher.probes.SimGpuProbe`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from autospec.cli.main import main
from autospec.errors import UsageError
from autospec.launcher import Launcher
from autospec.launcher.probes import SimGpuProbe
from autospec.study.processes.gpu_guard import GpuGuard
from autospec.study.processes.identity import new_launch_id
from autospec.study.processes.owners import owner_env, owner_of

STORAGE = "sqlite:////data/studies/mine.db"


@pytest.fixture
def holders(tmp_path):
    """Start a fake server holding simulated GPU memory: `start(study, tuner_pid)`."""
    state = tmp_path / "gpu"
    state.mkdir()
    procs: list[subprocess.Popen] = []

    def start(study: str | None, tuner_pid: int = 999_999, storage: str = STORAGE) -> subprocess.Popen:
        env = dict(os.environ)
        if study is not None:
            env.update(owner_env(study, 4, storage, new_launch_id(), tuner_pid, None))
        proc = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
        (state / f"{proc.pid}.json").write_text(
            json.dumps({"pid": proc.pid, "gpus": [0], "mem_mb": 1000.0, "cmdline": "sglang::scheduler"})
        )
        deadline = time.monotonic() + 10
        while owner_of(proc.pid) is None and study is not None:  # until it has exec'd with its environment
            assert time.monotonic() < deadline
            time.sleep(0.01)
        procs.append(proc)
        return proc

    start.launcher = Launcher(probe=SimGpuProbe(state), term_timeout_s=2, gpu_free_timeout_s=5)
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_leftover_of_this_study_is_stopped_and_said(holders):
    leftover = holders("mine")  # its tuner (pid 999999) is gone
    said: list[str] = []
    GpuGuard(holders.launcher, "mine", STORAGE).clear(said.append)
    assert leftover.wait(timeout=10) is not None
    assert len(said) == 1 and said[0].startswith("stopped leftover server of study mine") and "GPU memory released" in said[0]


def test_another_studys_leftover_is_refused_with_the_command_that_stops_it(holders):
    other = holders("theirs")
    with pytest.raises(UsageError) as info:
        GpuGuard(holders.launcher, "mine", STORAGE).clear(lambda line: None)
    text = str(info.value)
    assert "\n" not in text and f"pid {other.pid}" in text
    assert "is the server of trial 4 of study 'theirs'" in text and "whose tuner is gone" in text
    assert f"autospec recover --study theirs --storage {STORAGE}" in text
    assert other.poll() is None  # never touched


def test_a_server_whose_tuner_still_runs_is_refused_not_stopped(holders):
    mine_but_live = holders("mine", tuner_pid=os.getpid())  # this test process plays the live tuner
    with pytest.raises(UsageError, match=r"whose tuner .* still runs"):
        GpuGuard(holders.launcher, "mine", STORAGE).clear(lambda line: None)
    assert mine_but_live.poll() is None


def test_an_unknown_process_is_refused_unless_allowed(holders):
    stranger = holders(None)
    with pytest.raises(UsageError, match=r"not a server of an autospec study.*--allow-foreign-gpu-memory"):
        GpuGuard(holders.launcher, "mine", STORAGE).clear(lambda line: None)
    GpuGuard(holders.launcher, "mine", STORAGE, allow_foreign=True).clear(lambda line: None)
    assert stranger.poll() is None


def test_doctor_names_the_study_of_a_holder_and_how_to_stop_it(holders, tmp_path, capsys):
    other = holders("theirs")
    code = main(["doctor", "--no-sglang", "--sim-gpu-state-dir", str(tmp_path / "gpu")])
    out = capsys.readouterr().out
    assert code == 1
    assert f"PID {other.pid}" in out and "the server of trial 4 of study 'theirs'" in out
    assert f"stop it safely: autospec recover --study theirs --storage {STORAGE}" in out


def test_optimize_with_sim_refuses_another_studys_server_before_creating_its_study(holders, tmp_path, capsys):
    from simspace import sim_space_text

    studies = tmp_path / "studies"
    state = studies / ".sim-gpu"
    state.mkdir(parents=True)
    holders.launcher.probe = SimGpuProbe(state)
    other = holders("theirs")
    (tmp_path / "gpu" / f"{other.pid}.json").rename(state / f"{other.pid}.json")
    space = tmp_path / "space.toml"
    space.write_text(sim_space_text())
    code = main(
        ["optimize", "--space", str(space), "--study", "mine", "--studies-dir", str(studies), "--sim", "--trials", "1", "--quiet"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "study 'theirs'" in err and "autospec recover --study theirs" in err
    assert not list(Path(studies).glob("*.db"))


def test_on_a_shared_slot_the_other_slots_live_server_is_left_alone(holders):
    sibling = holders("mine", tuner_pid=os.getpid())  # another slot's server, its tuner alive
    GpuGuard(holders.launcher, "mine", STORAGE, shared_slot=True).clear(lambda line: None)
    assert sibling.poll() is None
    stranger = holders(None)
    with pytest.raises(UsageError, match="not a server of an autospec study"):
        GpuGuard(holders.launcher, "mine", STORAGE, shared_slot=True).clear(lambda line: None)
    assert stranger.poll() is None
