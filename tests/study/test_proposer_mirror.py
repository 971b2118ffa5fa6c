"""Mirroring the real study into the proposer's scratch study (`Proposer.mirror`)."""

from __future__ import annotations

import types

import optuna

from autospec.records import Markers, StoredTrial, TrialClass
from autospec.study.proposing.proposer import Proposer

RUNNING = optuna.trial.TrialState.RUNNING


def test_a_trial_running_elsewhere_is_mirrored_from_one_read_of_its_parameters():
    # Another worker sets its trial's parameters one by one: read first with one of them
    # (the StoredTrial), the trial holds both by the time its distributions are read. The
    # mirror takes parameters and distributions from that one later read.
    real = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    other = real.ask()
    other.suggest_int("speculative_num_steps", 1, 4)
    stored = StoredTrial(
        number=other.number,
        trial_id=other._trial_id,
        state=RUNNING,
        trial_class=TrialClass.RUNNING,
        params=dict(real.trials[0].params),
        values=None,
        constraints={},
        record=None,
        markers=Markers(),
    )
    other.suggest_categorical("speculative_eagle_topk", [1, 2])
    compiled = types.SimpleNamespace(space=None)
    proposer = Proposer(compiled, optuna.samplers.RandomSampler(seed=0), None, [True], [])  # type: ignore[arg-type]
    proposer.mirror([stored], lambda t: real._storage.get_trial(t.trial_id))
    (mirrored,) = proposer.scratch.get_trials(states=(RUNNING,))
    assert mirrored.params == real.trials[0].params and set(mirrored.distributions) == set(mirrored.params) == {
        "speculative_num_steps",
        "speculative_eagle_topk",
    }
