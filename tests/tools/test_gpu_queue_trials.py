"""tools/gpu/queue_trials.py: launches of a few configurations queued in alternation."""

from __future__ import annotations

import optuna
import pytest

from .gpu_scripts import load

queue_trials = load("queue_trials")
A, B = {"speculative_num_steps": 6}, {"speculative_num_steps": 5}


def test_the_least_launched_goes_next_and_ties_go_against_the_last():
    assert queue_trials.plan([A], [A, B], 6) == [B, A, B, A, B]
    assert queue_trials.plan([B], [A, B], 4) == [A, B, A]
    assert queue_trials.plan([A, A, B], [A, B], 6) == [B, A, B]
    assert queue_trials.plan([A, B], [A, B], 2) == []


def test_queued_trials_count_and_optuna_takes_them_in_order(tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="s", storage=storage)
    study.add_trial(
        optuna.trial.create_trial(
            params=A, distributions={"speculative_num_steps": optuna.distributions.CategoricalDistribution([5, 6])}, value=1.0
        )
    )
    queue_trials.main([storage, "s", "3", "speculative_num_steps=6", "speculative_num_steps=5"])
    queue_trials.main([storage, "s", "3", "speculative_num_steps=6", "speculative_num_steps=5"])  # nothing more
    assert capsys.readouterr().out.splitlines() == [f"queued {B}", f"queued {A}"]
    order = [study.ask({"speculative_num_steps": optuna.distributions.CategoricalDistribution([5, 6])}).params for _ in range(2)]
    assert order == [B, A]


def test_a_bad_config_or_total_exits_in_one_line_before_the_study_is_touched(tmp_path):
    storage = f"sqlite:///{tmp_path / 'none.db'}"
    with pytest.raises(SystemExit, match=r"'speculative_num_steps' is not NAME=VALUE"):
        queue_trials.main([storage, "s", "6", "speculative_num_steps"])
    with pytest.raises(SystemExit, match=r"TOTAL 'six' is not a count"):
        queue_trials.main([storage, "s", "six", "speculative_num_steps=5"])
    assert not (tmp_path / "none.db").exists()


def test_a_name_the_launch_did_not_sample_matches_any_value():
    # at top-k 1 the space samples no draft fraction (SGLang forces the draft tokens): a launch
    # of 6/1/7 is one of "steps 6, top-k 1, fraction 0" however the fraction is written
    chain = {"speculative_num_steps": 6, "speculative_eagle_topk": 1}
    spec = {**chain, "draft_tokens_fraction": 0.0}
    tree = {"speculative_num_steps": 6, "speculative_eagle_topk": 2, "draft_tokens_fraction": 1.0}
    assert queue_trials.plan([chain], [spec, tree], 2) == [tree]
    assert queue_trials.plan([{**tree, "draft_tokens_fraction": 0.0}], [tree], 1) == [tree]
