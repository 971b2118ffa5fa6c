"""Search space -> Optuna suggestions -> candidates, and back."""

from __future__ import annotations

import optuna
import pytest

from autospec.config import parse_search_space
from autospec.space import DRAFT_FRACTION, draft_range, grid, suggest, to_distribution_params

SPACE = parse_search_space({
    "server": {"flags": {"model_path": "m"}},
    "params": {
        "speculative_num_steps": {"type": "int", "low": 1, "high": 6},
        "speculative_eagle_topk": {"type": "categorical", "choices": [1, 2, 4, 8]},
        "speculative_num_draft_tokens": {"type": "draft_tokens", "high": 16, "step": 0.25},
        "mem_fraction_static": {"type": "float", "low": 0.7, "high": 0.9, "step": 0.05},
        "cuda_graph_max_bs": {"type": "categorical", "choices": [8, 32], "when": {"speculative_eagle_topk": [4, 8]}},
    },
})


def test_sampled_draft_tokens_are_always_within_what_sglang_can_run():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(300):
        trial = study.ask()
        c = suggest(trial, SPACE)
        steps, topk, draft = c["speculative_num_steps"], c["speculative_eagle_topk"], c["speculative_num_draft_tokens"]
        if topk == 1:
            assert draft == steps + 1
            assert DRAFT_FRACTION not in trial.params  # not sampled: SGLang forces it
        else:
            assert steps + 1 <= draft <= min(steps * topk + 1, 16)
        assert ("cuda_graph_max_bs" in c) == (topk in (4, 8))
        study.tell(trial, 0.0)


@pytest.mark.parametrize("steps, topk, cap, expected", [(3, 1, 16, (4, 4)), (3, 4, 16, (4, 13)), (6, 8, 16, (7, 16)), (2, 2, None, (3, 5))])
def test_draft_range(steps, topk, cap, expected):
    assert draft_range(steps, topk, cap) == expected


def test_every_grid_point_round_trips_through_enqueue():
    points = list(grid(SPACE))
    assert len(points) == len({tuple(sorted(p.items())) for p in points})
    study = optuna.create_study()
    for point in points[::37]:
        study.enqueue_trial(to_distribution_params(point, SPACE))
        trial = study.ask()
        assert suggest(trial, SPACE) == point
        study.tell(trial, 0.0)


def test_grid_topk1_has_one_draft_value_per_steps():
    topk1 = [p for p in grid(SPACE) if p["speculative_eagle_topk"] == 1]
    assert len(topk1) == 6 * 5  # steps x mem fractions
    assert all(p["speculative_num_draft_tokens"] == p["speculative_num_steps"] + 1 for p in topk1)
