"""tools/gpu/launch_seconds.py: the seconds one more warm launch of a study takes, from its own records."""

from __future__ import annotations

import math

import optuna
from tests.model.replay import unpacked_storage

from autospec.records import read_trials

from .gpu_scripts import load

launch_seconds = load("launch_seconds")


def test_the_longest_recent_warm_launch_leaving_out_each_machines_first(tmp_path):
    """topk-1-2c, on two H100s: trial 0 was the first machine's first launch (172 s, ready after
    about 165 s), trial 5 the second machine's (after a warm-up); the others took 87-111 s."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_topk_1_2c_h100.db.gz")
    trials = [t for t in read_trials(optuna.load_study(study_name="topk-1-2c", storage=storage)) if t.launched]
    firsts = {t.machine: t.number for t in reversed(trials)}.values()  # each machine's first launch
    assert sorted(firsts) == [0, 5]
    warm = [t.record.seconds["total"] for t in trials if t.record is not None and t.number not in firsts]
    seconds = launch_seconds.launch_seconds(storage, "topk-1-2c")
    assert seconds == math.ceil(max(warm[-launch_seconds.RECENT :]) + launch_seconds.MARGIN_S)
    assert seconds < max(t.record.seconds["total"] for t in trials if t.record is not None and t.number in firsts)


def test_a_study_without_a_warm_launch_gives_nothing(tmp_path):
    storage = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s", storage=storage)
    assert launch_seconds.launch_seconds(storage, "s") is None
