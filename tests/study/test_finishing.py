"""Storing a trial's record (`autospec.study.finishing.TrialFinisher`)."""

from __future__ import annotations

import optuna

from autospec.records import TrialRecord, TrialStore
from autospec.study.files import Artifacts, EventLog, PendingResults
from autospec.study.finishing import TrialFinisher


def test_a_trial_another_workers_recovery_ended_keeps_that_record_and_the_run_goes_on(tmp_path):
    # The tuner's server log is ready to attach, but another worker judged this tuner gone
    # and ended its trial first: attaching fails on the finished trial (Optuna refuses it),
    # the tell finds the trial ended, and the run is told so instead of crashing.
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", directions=["maximize", "maximize"])
    store = TrialStore(study, [True, True], [])
    trial = store.ask()
    stale = TrialRecord(outcome="stale", reason="its tuner is gone", candidate={})
    store.tell_failed(trial.number, stale)  # the other worker's recovery
    folder = tmp_path / "trial-0000"
    folder.mkdir()
    (folder / "server.log").write_text("the server's log\n")
    lines: list[str] = []
    files = PendingResults(tmp_path / "pending"), Artifacts(tmp_path / "artifacts"), EventLog(tmp_path / "events.log")
    finisher = TrialFinisher(store, *files, lines.append)
    mine = TrialRecord(outcome="ok", candidate={}, values=[1.0, 2.0], launched=True, log_path=str(folder / "server.log"))
    finisher.finish(trial, mine)
    assert study.trials[0].user_attrs["outcome"] == "stale"
    assert any("was ended by another worker (stale)" in line for line in lines)
