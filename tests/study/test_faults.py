"""Faults during a trial: the server crashes, hangs at start, ignores SIGTERM, leaves a
child holding GPU memory, or finds its port taken by another program. Each is classified,
recorded with its server log (an artifact on the trial) and timing in the events log, and
the study moves on: the next launched trial (no fault) measures normally.

The studies run in-process (`autospec.study.optimize`) against the simulator, with a
launcher whose TERM timeout is 1 s instead of 30 s. A small wrapper injects the fault into
the *first* server launch only (`AUTOSPEC_SIM_FAULTS` for that process).
"""

from __future__ import annotations

import io
import socket
import sys
import textwrap
from pathlib import Path

import optuna
import pytest

from autospec.cli import wiring
from autospec.cli.common import load_space
from autospec.launcher import Launcher
from autospec.study import OptimizeRequest, optimize

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]

STUDY = "faults"
FAULTY_ONCE = textwrap.dedent("""
    # faulty_once.py MARKER FAULT -m autospec.sim ARGS...: the first server start (the one
    # that creates MARKER) runs with AUTOSPEC_SIM_FAULTS=FAULT; exec keeps the PID.
    import os, sys
    marker, fault, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    env = dict(os.environ)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        env["AUTOSPEC_SIM_FAULTS"] = fault
    except FileExistsError:
        pass
    os.execve(sys.executable, [sys.executable, *argv], env)
""")


def run_study(tmp_path: Path, space_path: Path, fault: str | None, *, ready_timeout_s: float | None = None) -> optuna.Study:
    """Two launched trials; the first server gets `fault`. Returns the stored study."""
    space = load_space(str(space_path))
    studies = tmp_path / "studies"
    target = wiring.build_target(
        space,
        studies_dir=studies,
        sim=True,
        sim_profile=None,
        sim_load_seconds=0.1,
        sim_time_scale=0.2,
        preflight="auto",
        out=io.StringIO(),
    )
    command = target.command
    if fault is not None:
        wrapper = tmp_path / "faulty_once.py"
        wrapper.write_text(FAULTY_ONCE)
        command = (sys.executable, str(wrapper), str(tmp_path / "fault-used"), fault, *target.command[1:])
    launcher = Launcher(
        probe=target.launcher.probe, term_timeout_s=1.0, kill_timeout_s=5.0, gpu_free_timeout_s=5.0, port_free_timeout_s=2.0
    )
    result = optimize(
        OptimizeRequest(
            space=space,
            study_name=STUDY,
            n_trials=2,
            command=command,
            studies_dir=studies,
            seed=11,
            launcher=launcher,
            preflight=target.preflight,
            to_argv=target.to_argv,
            sglang_version=target.sglang_version,
            ready_timeout_s=ready_timeout_s,
        )
    )
    assert result.launched == 2 and result.stopped_because == "target"
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{studies / STUDY}.db")


def launched(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched")]


def server_log_artifact(tmp_path: Path, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> str:
    metas = [m for m in optuna.artifacts.get_all_artifact_meta(trial, storage=study._storage) if m.filename == "server.log"]
    assert len(metas) == 1, "the server log is attached to the trial"
    store = optuna.artifacts.FileSystemArtifactStore(str(tmp_path / "studies" / f"{STUDY}-artifacts"))
    with store.open_reader(metas[0].artifact_id) as reader:
        return reader.read().decode(errors="replace")


def check_recorded_and_moved_on(tmp_path: Path, study: optuna.Study, outcome: str) -> optuna.trial.FrozenTrial:
    """The first launched trial has `outcome`, its log and timing; the second one is ok."""
    first, second = launched(study)
    assert first.user_attrs["outcome"] == outcome
    assert first.constraints["feasible"] == (0 if outcome == "ok" else 1)
    assert {"launch", "total"} <= set(first.user_attrs["seconds"])
    teardown = first.user_attrs["teardown"]
    assert teardown["leftover_pids"] == [] and teardown["gpu_memory_released"] is True
    assert teardown["port_released"] is True
    assert second.user_attrs["outcome"] == "ok" and second.values[0] > 0
    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    assert f"trial {first.number}: outcome={outcome} launched=True" in events
    assert f"trial {second.number}: outcome=ok launched=True" in events
    return first


@pytest.mark.parametrize(
    "fault, outcome, evidence",
    [
        ("crash_after_requests=1", "crashed", "CUDA error: an illegal memory access"),
        ("crash_at_start", "unknown", "CUDA error: an illegal memory access"),
        ("hang_at_start", "startup_timeout", "not ready after"),
    ],
)
def test_a_failing_server_is_classified_recorded_with_its_log_and_the_study_moves_on(
    tmp_path, sim_space, fault, outcome, evidence
):
    # A hung server is given 5 s (a healthy one is ready in about 2 s).
    study = run_study(tmp_path, sim_space, fault, ready_timeout_s=5.0 if fault == "hang_at_start" else None)
    first = check_recorded_and_moved_on(tmp_path, study, outcome)
    assert evidence in first.user_attrs["reason"]
    assert first.user_attrs["reason"].endswith(f"(log: {first.user_attrs['log_path']})")
    log = server_log_artifact(tmp_path, study, first)
    assert "Load weight begin" in log
    if fault != "crash_after_requests=1":
        assert "fired up" not in log


def test_a_server_ignoring_sigterm_is_killed_and_its_measurement_kept(tmp_path, sim_space):
    study = run_study(tmp_path, sim_space, "ignore_sigterm")
    first = check_recorded_and_moved_on(tmp_path, study, "ok")
    assert first.user_attrs["teardown"]["signal_sent"] == "KILL"
    assert first.user_attrs["teardown"]["killed_after_timeout"] is True
    assert "SIGTERM received" in server_log_artifact(tmp_path, study, first)


def test_a_child_that_left_the_process_group_is_stopped_with_its_gpu_memory(tmp_path, sim_space):
    study = run_study(tmp_path, sim_space, "zombie_child")
    first = check_recorded_and_moved_on(tmp_path, study, "ok")
    _, second = launched(study)
    # server + scheduler child, plus the child that called setsid() in the faulty one
    assert len(first.user_attrs["teardown"]["stopped_pids"]) == len(second.user_attrs["teardown"]["stopped_pids"]) + 1
    assert (tmp_path / "studies" / ".sim-gpu").is_dir()
    assert not any((tmp_path / "studies" / ".sim-gpu").glob("*.json")), "every GPU-state file was removed"


def test_a_port_taken_by_another_program_is_classified_and_the_study_moves_on(tmp_path, sim_space, monkeypatch):
    import autospec.launcher.launch as launch

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real_pick = launch.pick_free_port
    calls = []

    def pick(host="127.0.0.1"):  # the OS said free; another program bound it before the server did
        calls.append(host)
        return taken if len(calls) == 1 else real_pick(host)

    monkeypatch.setattr(launch, "pick_free_port", pick)
    try:
        study = run_study(tmp_path, sim_space, None)
    finally:
        squatter.close()
    # Not the configuration's fault: the trial is FAIL (samplers ignore it, the budget is
    # not spent) and the same parameters are measured again.
    first = study.trials[0]
    assert first.state == optuna.trial.TrialState.FAIL
    assert first.user_attrs["outcome"] == "port_in_use"
    assert str(taken) in " ".join(first.user_attrs["server_args"])
    assert "address already in use" in server_log_artifact(tmp_path, study, first).lower()
    retry = next(t for t in study.trials if t.user_attrs.get("retry_of") == first.number)
    assert retry.params == first.params and retry.user_attrs["outcome"] == "ok"
    assert [t.user_attrs["outcome"] for t in launched(study)] == ["ok", "ok"]
    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    assert f"trial {first.number}: outcome=port_in_use launched=True" in events and "queued again" in events
