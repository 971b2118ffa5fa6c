"""Search space -> Optuna suggestions -> candidates, and back."""

from __future__ import annotations

import optuna
import pytest

from autospec.config import parse_search_space
from autospec.sglang_facts import draft_token_range, max_draft_tokens
from autospec.space import DRAFT_FRACTION, calibration_points, grid, param_values, suggest, to_distribution_params

SPACE = parse_search_space(
    {
        "server": {"flags": {"model_path": "m"}},
        "params": {
            "speculative_num_steps": {"type": "int", "low": 1, "high": 6},
            "speculative_eagle_topk": {"type": "categorical", "choices": [1, 2, 4, 8]},
            "speculative_num_draft_tokens": {"type": "draft_tokens", "high": 16, "step": 0.25},
            "mem_fraction_static": {"type": "float", "low": 0.7, "high": 0.9, "step": 0.05},
            "cuda_graph_max_bs": {"type": "categorical", "choices": [8, 32], "when": {"speculative_eagle_topk": [4, 8]}},
        },
    }
)


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
            assert steps + 1 <= draft <= min(max_draft_tokens(steps, topk), 16)
        assert ("cuda_graph_max_bs" in c) == (topk in (4, 8))
        study.tell(trial, 0.0)


@pytest.mark.parametrize(
    "steps, topk, cap, expected",
    [
        (3, 1, 16, (4, 4)),
        (3, 4, 16, (4, 16)),
        (3, 4, None, (4, 37)),
        (6, 8, 16, (7, 16)),
        (2, 2, None, (3, 7)),
        (1, 4, 16, (2, 5)),
    ],
)
def test_draft_token_range_is_sglangs_bound(steps, topk, cap, expected):
    assert draft_token_range(steps, topk, cap) == expected


def fixed(**params):
    return optuna.trial.FixedTrial(
        {"speculative_num_steps": 3, "speculative_eagle_topk": 4, "mem_fraction_static": 0.8, "cuda_graph_max_bs": 8, **params}
    )


def test_draft_tokens_reach_sglangs_bound_not_steps_times_topk_plus_one():
    """steps 3, topk 4: SGLang can verify 1 + 4 + 2 * 16 = 37 draft tokens; the cap is 16,
    above the 13 that `steps * topk + 1` allowed."""
    assert suggest(fixed(draft_tokens_fraction=1.0), SPACE)["speculative_num_draft_tokens"] == 16
    assert suggest(fixed(draft_tokens_fraction=0.0), SPACE)["speculative_num_draft_tokens"] == 4
    drafts = {
        p["speculative_num_draft_tokens"]
        for p in grid(SPACE)
        if (p["speculative_num_steps"], p["speculative_eagle_topk"]) == (3, 4)
    }
    assert drafts == {4, 7, 10, 13, 16}


class RecordingTrial(optuna.trial.FixedTrial):
    """A FixedTrial that records every suggest_* call, in order."""

    def __init__(self, params):
        super().__init__(params)
        self.calls = []

    def suggest_int(self, name, low, high, *, step=1, log=False):
        self.calls.append(("int", name, low, high, step, log))
        return super().suggest_int(name, low, high, step=step, log=log)

    def suggest_float(self, name, low, high, *, step=None, log=False):
        self.calls.append(("float", name, low, high, step, log))
        return super().suggest_float(name, low, high, step=step, log=log)

    def suggest_categorical(self, name, choices):
        self.calls.append(("categorical", name, tuple(choices)))
        return super().suggest_categorical(name, choices)


def test_the_sampler_sees_the_same_parameters_distributions_and_order():
    """Studies resumed across versions need identical Optuna parameters: names,
    distributions and the order of the suggest calls (draft tokens last)."""
    trial = RecordingTrial(
        {
            "speculative_num_steps": 3,
            "speculative_eagle_topk": 4,
            "mem_fraction_static": 0.8,
            "cuda_graph_max_bs": 8,
            DRAFT_FRACTION: 0.5,
        }
    )
    suggest(trial, SPACE)
    assert trial.calls == [
        ("int", "speculative_num_steps", 1, 6, 1, False),
        ("categorical", "speculative_eagle_topk", (1, 2, 4, 8)),
        ("float", "mem_fraction_static", 0.7, 0.9, 0.05, False),
        ("categorical", "cuda_graph_max_bs", (8, 32)),
        ("float", DRAFT_FRACTION, 0.0, 1.0, 0.25, False),
    ]


def test_each_parameter_variant_suggests_its_own_distribution():
    space = parse_search_space(
        {
            "server": {"flags": {"model_path": "m"}},
            "params": {
                "chunked_prefill_size": {"type": "int", "low": 1024, "high": 8192, "log": True},
                "page_size": {"type": "int", "low": 16, "high": 64, "step": 16},
                "schedule_conservativeness": {"type": "float", "low": 0.5, "high": 2},
                "attention_backend": {"type": "categorical", "choices": ["fa3", "triton"]},
            },
        }
    )
    trial = RecordingTrial(
        {"chunked_prefill_size": 2048, "page_size": 32, "schedule_conservativeness": 1.0, "attention_backend": "fa3"}
    )
    assert suggest(trial, space) == {
        "chunked_prefill_size": 2048,
        "page_size": 32,
        "schedule_conservativeness": 1.0,
        "attention_backend": "fa3",
    }
    assert trial.calls == [
        ("int", "chunked_prefill_size", 1024, 8192, 1, True),
        ("int", "page_size", 16, 64, 16, False),
        ("float", "schedule_conservativeness", 0.5, 2.0, None, False),
        ("categorical", "attention_backend", ("fa3", "triton")),
    ]
    assert param_values(space.param("page_size")) == [16, 32, 48, 64]
    assert param_values(space.param("schedule_conservativeness"))[:3] == [0.5, 0.65, 0.8]


def test_draft_tokens_have_no_fixed_values():
    with pytest.raises(ValueError, match="depends on steps and top-k"):
        param_values(SPACE.param("speculative_num_draft_tokens"))


def test_calibration_points_are_chains_at_the_middle_mem_fraction():
    assert calibration_points(SPACE) == [
        {"speculative_eagle_topk": 1, "mem_fraction_static": 0.8, "speculative_num_steps": 3},
        {"speculative_eagle_topk": 1, "mem_fraction_static": 0.8, "speculative_num_steps": 1},
    ]


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
