"""The --speculative-adaptive-config ladder built from per-concurrency measurements."""

from __future__ import annotations

import json

import pytest

from autospec.errors import UsageError
from autospec.report import adaptive_flags, build_ladder, ladder_json
from autospec.report.adaptive import dumps
from autospec.report.data import StudyData, TrialView, parse_objective


def test_one_slot_per_measured_concurrency_with_the_steps_within_noise_of_the_best(data):
    ladder = build_ladder(data)
    assert [s.batch_size for s in ladder.slots] == [1, 4, 32]
    by_c = {s.batch_size: s for s in ladder.slots}
    assert by_c[1].candidate_steps == [5] and by_c[1].best_trial == 3  # 261 +-2.6 beats 250 +-2.5 beyond noise
    assert by_c[4].candidate_steps == [5]  # 810 +-8.1 vs 790 +-7.9
    assert by_c[32].candidate_steps == [2, 3]  # 1800 +-144 and 1760 +-17.6 are within noise; 1650 is not
    assert by_c[32].best_steps == 2
    assert ladder.initial_steps == 5 and ladder.all_steps == [2, 3, 5]
    assert ladder.steps_for(1) == [5] and ladder.steps_for(20) == [5] and ladder.steps_for(64) == [2, 3]


def test_the_file_has_sglangs_shape(data):
    doc = ladder_json(build_ladder(data), data.name)
    slots = {k: v for k, v in doc.items() if k.isdigit()}
    assert slots == {"1": {"candidate_steps": [5]}, "4": {"candidate_steps": [5]}, "32": {"candidate_steps": [2, 3]}}
    assert doc["_autospec"]["study"] == data.name
    assert json.loads(dumps(build_ladder(data), data.name)) == doc


def test_flags_that_run_the_ladder_start_at_the_best_low_load_depth(data):
    flags = adaptive_flags(build_ladder(data), "/etc/sglang/ladder.json")
    assert flags == {
        "speculative_eagle_topk": 1,
        "speculative_num_steps": 5,
        "speculative_num_draft_tokens": 6,
        "speculative_adaptive": True,
        "speculative_adaptive_config": "/etc/sglang/ladder.json",
    }


def _trial(number, topk, agg, algo="EAGLE", failed_at=()):
    bench = {c: {"agg_output_tok_s": v, "failed_reason": "x" if c in failed_at else None} for c, v in agg.items()}
    return TrialView(
        number=number,
        state="complete",
        kind="front",
        measured=True,
        outcome="ok",
        launched=True,
        flags={"speculative_num_steps": number, "speculative_eagle_topk": topk},
        values=[1.0],
        resolved={"speculative_algorithm": algo},
        bench=bench,
    )


def _data(*trials):
    return StudyData("s", [parse_objective("agg_output_tok_s@c8", "maximize")], list(trials))


def test_only_topk1_eagle_family_trials_count_and_failed_levels_are_ignored():
    ladder = build_ladder(
        _data(
            _trial(2, 1, {1: 100.0, 8: 500.0}),
            _trial(4, 1, {1: 150.0, 8: 900.0}, failed_at=(8,)),
            _trial(3, 4, {1: 999.0, 8: 999.0}),
            _trial(5, 1, {1: 999.0}, algo="NGRAM"),
        )
    )
    assert [(s.batch_size, s.candidate_steps) for s in ladder.slots] == [(1, [4]), (8, [2])]


def test_no_eligible_trial_is_a_usage_error():
    with pytest.raises(UsageError, match="speculative_eagle_topk=1"):
        build_ladder(_data(_trial(3, 4, {1: 10.0})))
