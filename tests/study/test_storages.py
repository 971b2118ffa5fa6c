"""What each storage offers for recovery.

- RDB storages (SQLite, PostgreSQL): autospec records a heartbeat for the running trial
  itself (it drives ask/tell, not `Study.optimize`). A RUNNING trial whose heartbeat is
  older than the grace period (its tuner died, possibly on another host) is failed with
  Optuna's own check before the next `ask`, and its parameters are run again.
- Journal files have no heartbeat: only trials of this host are recovered (by worker PID
  and start time, `test_resume.py`); another host's RUNNING trial is left alone, as is
  an RDB trial whose heartbeat is fresh.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import optuna
import pytest
import sqlalchemy

from autospec.cli.common import load_space
from autospec.cli.main import main
from autospec.launcher import Launcher
from autospec.records import WORKER_KEY, TrialStore
from autospec.study.processes import recovery
from autospec.study.storage import open_storage, open_study

from .conftest import storage_spec

STUDY = "store"
PARAMS = {"speculative_num_steps": 2, "speculative_eagle_topk": 1, "mem_fraction_static": 0.84}
OTHER_HOST = {"host": "another-host.example", "pid": 4242, "start_time": 1, "launch_id": "0" * 32}


def study_with_a_running_trial(spec: str, tmp_path: Path, space_path: Path) -> tuple[optuna.Study, optuna.Trial]:
    """A study made by the storage code, with one RUNNING trial of a tuner on another host."""
    (tmp_path / "studies").mkdir(exist_ok=True)
    handle = open_storage(spec, STUDY, tmp_path / "studies")
    study = open_study(handle, STUDY, load_space(str(space_path)), optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(PARAMS)
    trial = study.ask()  # its tuner died before suggesting: the parameters are the enqueued ones
    study._storage.set_trial_system_attr(trial._trial_id, WORKER_KEY, OTHER_HOST)
    if handle.heartbeat:
        handle.storage.record_heartbeat(trial._trial_id)
    return study, trial


def backdate_heartbeats(storage: optuna.storages.RDBStorage, hours: float = 24) -> None:
    then = datetime.datetime.now() - datetime.timedelta(hours=hours)
    with storage.engine.begin() as conn:
        conn.execute(sqlalchemy.text("UPDATE trial_heartbeats SET heartbeat = :t"), {"t": then})


def heartbeat_trial_ids(storage: optuna.storages.RDBStorage) -> set[int]:
    with storage.engine.begin() as conn:
        return {row[0] for row in conn.execute(sqlalchemy.text("SELECT trial_id FROM trial_heartbeats"))}


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_trial_whose_heartbeat_stopped_is_failed_and_its_parameters_run_again(tmp_path, sim_space, backend, request):
    spec = storage_spec(backend, STUDY, tmp_path, request)
    study, trial = study_with_a_running_trial(spec, tmp_path, sim_space)
    backdate_heartbeats(study._storage._backend)

    code = main(
        [
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
            "1",
            "--seed",
            "1",
            "--no-learn",
            "--sim",
            "--sim-load-seconds",
            "0.1",
            "--sim-time-scale",
            "0.2",
            "--quiet",
        ]
    )
    assert code == 0

    study = optuna.load_study(study_name=STUDY, storage=open_storage(spec, STUDY, tmp_path / "studies").storage)
    stale = study.trials[trial.number]
    assert stale.state == optuna.trial.TrialState.FAIL
    (retry,) = [t for t in study.trials if t.user_attrs.get("retry_of") == trial.number]
    assert retry.state == optuna.trial.TrialState.COMPLETE and retry.user_attrs["launched"] is True
    assert {k: retry.user_attrs["candidate"][k] for k in PARAMS} == PARAMS  # the configuration that ran
    # autospec recorded a heartbeat for the trial it ran itself
    assert retry._trial_id in heartbeat_trial_ids(study._storage._backend)
    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    assert f"trial {trial.number}: its tuner stopped sending heartbeats; failed it" in events
    assert f"queued the parameters of trial {trial.number} again" in events


@pytest.mark.parametrize("backend", ["sqlite", "journal"])
def test_another_hosts_running_trial_is_left_alone_without_a_stale_heartbeat(tmp_path, sim_space, backend, request):
    spec = storage_spec(backend, STUDY, tmp_path, request)
    study, trial = study_with_a_running_trial(spec, tmp_path, sim_space)

    store = TrialStore(study, [True, True], [])
    assert recovery.recover(store, Launcher()) == []
    assert recovery.fail_stale_heartbeats(store) == []  # fresh heartbeat (RDB) / no heartbeat (journal)
    assert study.trials[trial.number].state == optuna.trial.TrialState.RUNNING
    assert [t for t in study.trials if t.state == optuna.trial.TrialState.WAITING] == []
