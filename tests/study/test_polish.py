"""Local refinement at the end of a budget."""

from __future__ import annotations

import optuna

from autospec.config import parse_search_space
from autospec.study.polish import neighbours, next_polish_candidate, polish_trials

SPACE = parse_search_space({
    "server": {"flags": {"model_path": "m"}},
    "params": {
        "speculative_num_steps": {"type": "int", "low": 1, "high": 6},
        "speculative_eagle_topk": {"type": "categorical", "choices": [1, 2]},
        "speculative_num_draft_tokens": {"type": "draft_tokens"},
        "mem_fraction_static": {"type": "float", "low": 0.80, "high": 0.90, "step": 0.02},
    },
})


def test_budget_share():
    assert polish_trials(5) == 0 and polish_trials(20) == 5 and polish_trials(60) == 15


def test_neighbours_move_one_parameter_one_step_and_keep_draft_tokens_valid():
    c = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
         "mem_fraction_static": 0.9}
    got = neighbours(c, SPACE)
    assert {"speculative_num_steps": 4, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 5,
            "mem_fraction_static": 0.9} in got  # draft follows steps for top-k 1
    assert {**c, "mem_fraction_static": 0.88} in got
    assert all(n["mem_fraction_static"] <= 0.9 for n in got)  # the grid's end is not crossed
    assert {**c, "speculative_eagle_topk": 2} in got  # 4 draft tokens fit steps 3 x topk 2 + 1
    assert len(got) == 4  # steps 2 and 4, topk 2, mem 0.88


def test_next_candidate_is_an_untried_runnable_neighbour_of_the_best():
    study = optuna.create_study(directions=["maximize", "maximize"])
    best = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
            "mem_fraction_static": 0.9}
    for cand, values in [(best, [200.0, 1800.0]), ({**best, "speculative_num_steps": 1, "speculative_num_draft_tokens": 2}, [120.0, 1500.0])]:
        study.add_trial(optuna.trial.create_trial(
            values=values, user_attrs={"launched": True, "outcome": "ok", "candidate": cand}))
    tried = {"mem_fraction_static": 0.88}
    runs = lambda flags: flags["mem_fraction_static"] != tried["mem_fraction_static"] and flags["speculative_eagle_topk"] == 1
    got = next_polish_candidate(study, SPACE, runs, turn=1)
    assert got is not None and got != best
    assert sum(got[k] != best[k] for k in ("speculative_num_steps", "mem_fraction_static")) == 1
    assert got["mem_fraction_static"] != 0.88 and got["speculative_eagle_topk"] == 1
    assert next_polish_candidate(study, SPACE, lambda flags: False, turn=0) is None


def test_the_neighbour_nearest_to_good_measurements_goes_first():
    study = optuna.create_study(directions=["maximize", "maximize"])
    base = {"speculative_eagle_topk": 1, "speculative_num_draft_tokens": 0}
    rows = [((2, 0.9), [300.0, 1800.0]), ((3, 0.86), [330.0, 1790.0]), ((3, 0.88), [330.0, 1795.0]), ((1, 0.86), [150.0, 1200.0])]
    for (steps, mem), values in rows:
        cand = {**base, "speculative_num_steps": steps, "speculative_num_draft_tokens": steps + 1, "mem_fraction_static": mem}
        study.add_trial(optuna.trial.create_trial(values=values, user_attrs={"launched": True, "outcome": "ok", "candidate": cand}))
    tried = {(2, 0.9), (3, 0.86), (3, 0.88), (1, 0.86)}
    runs = lambda f: (f["speculative_num_steps"], f["mem_fraction_static"]) not in tried and f["speculative_eagle_topk"] == 1
    got = next_polish_candidate(study, SPACE, runs, turn=1)  # neighbours of (2, 0.9): (1, .9), (3, .9), (2, .88)
    assert (got["speculative_num_steps"], got["mem_fraction_static"]) == (3, 0.9)
