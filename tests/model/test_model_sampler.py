"""`--sampler model` (autospec.study.proposing.samplers): what it proposes, what it leaves out,
and when it declines the study."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from replay import key, replay

from autospec.config import parse_search_space
from autospec.model import hypervolume_ratio
from autospec.records import TrialRecord, TrialStore
from autospec.space import suggest
from autospec.study.proposing.samplers import ModelSampler, unsupported_reason

SPACE = parse_search_space(
    {
        "server": {"flags": {"model_path": "m", "speculative_algorithm": "NGRAM"}},
        "params": {
            "speculative_num_draft_tokens": {"type": "categorical", "choices": [2, 4, 6, 8, 12, 16]},
            "speculative_ngram_max_bfs_breadth": {"type": "categorical", "choices": [1, 10]},
        },
        "workload": {"output_len": 256},
    }
)
GRID = [
    {"speculative_num_draft_tokens": d, "speculative_ngram_max_bfs_breadth": b} for d in (2, 4, 6, 8, 12, 16) for b in (1, 10)
]


def measured(candidate: dict) -> TrialRecord:
    """A launch of a made-up landscape (not the model's forms): C=1 speed grows with the
    draft and saturates, the C=32 aggregate peaks at 8 draft tokens; the wide trie costs 5%."""
    d, wide = candidate["speculative_num_draft_tokens"], candidate["speculative_ngram_max_bfs_breadth"] > 1
    c1 = (700 + 160 * d - 4 * d * d) * (0.95 if wide else 1.0)
    c32 = (9000 + 3000 * d - 180 * d * d) * (0.95 if wide else 1.0)
    accept = 0.85 * d + 0.2

    def level(agg: float, n: int) -> dict:
        return {
            "output_tok_s": agg / (1 if n < 32 else 32),
            "agg_output_tok_s": agg,
            "n_ok": n,
            "n_requests": n,
            "completion_tokens": 256 * n,
            "accept_length": accept,
        }

    return TrialRecord(
        "ok",
        dict(candidate),
        launched=True,
        values=[c1, c32],
        startup={"max_running_requests": 48, "max_total_num_tokens": 400_000},
        bench={1: level(c1, 8), 32: level(c32, 64)},
    )


RECORDS = {key(c): measured(c) for c in GRID}


def test_it_launches_distinct_accepted_configurations_and_finds_the_front():
    rejected = {"speculative_num_draft_tokens": 2, "speculative_ngram_max_bfs_breadth": 10}

    def accepts(flags):
        return None if all(flags.get(k) == v for k, v in rejected.items()) else {}

    launched = replay(SPACE, RECORDS, 8, accepts=accepts)
    assert len({key(c) for c in launched}) == 8
    assert rejected not in launched
    every = [r.values for r in RECORDS.values()]
    found = [RECORDS[key(c)].values for c in launched]
    assert hypervolume_ratio(found, every, [True, True]) >= 0.95


def study_with(sampler: ModelSampler) -> tuple[optuna.Study, TrialStore]:
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    return study, TrialStore(study, [True, True], [])


def test_configurations_in_flight_or_answered_since_the_last_launch_are_not_proposed_again():
    sampler = ModelSampler(SPACE, dict, lambda flags: {}, seed=0)
    study, store = study_with(sampler)
    first = study.ask()
    store.tell(first, measured(suggest(first, SPACE)))
    in_flight = study.ask()  # proposed, not told: a trial being measured
    skipped = study.ask()
    store.tell(skipped, TrialRecord("skipped", suggest(skipped, SPACE), reason="predicted to fail"))
    third = study.ask()
    proposals = [suggest(t, SPACE) for t in (first, in_flight, skipped, third)]
    assert len({key(c) for c in proposals}) == 4
    # after the next launch, what the gate skipped may be proposed again (its rules moved)
    store.tell(third, measured(proposals[3]))
    assert sampler._choose(study, exclude_number=-1) is not None
    open_keys = {key(c) for c in GRID} - {key(proposals[i]) for i in (0, 1, 3)}
    assert key(proposals[2]) in open_keys


def test_every_configuration_taken_leaves_the_choice_to_the_fallback():
    sampler = ModelSampler(SPACE, dict, lambda flags: {}, seed=0)
    study, store = study_with(sampler)
    for candidate in GRID:
        from autospec.space import to_distribution_params

        study.enqueue_trial(to_distribution_params(candidate, SPACE))
        trial = study.ask()
        store.tell(trial, measured(suggest(trial, SPACE)))
    assert sampler._choose(study, exclude_number=-1) is None
    trial = study.ask()  # still answers: the random fallback
    assert key(suggest(trial, SPACE)) in RECORDS


@pytest.mark.parametrize(
    "objectives, needle",
    [
        ([{"metric": "ttft_ms_p99", "concurrency": 1}], "does not predict 'ttft_ms_p99'"),
        (
            [
                {"metric": "output_tok_s", "concurrency": 1},
                {"metric": "agg_output_tok_s", "concurrency": 32},
                {"metric": "tpot_ms_mean", "concurrency": 32},
            ],
            "one or two objectives, not 3",
        ),
    ],
)
def test_objectives_it_cannot_predict_are_named(objectives, needle):
    space = parse_search_space(
        {
            "server": {"flags": {"model_path": "m"}},
            "params": {"speculative_num_steps": {"type": "int", "low": 1, "high": 4}},
            "objectives": objectives,
        }
    )
    assert needle in (unsupported_reason(space) or "")
    assert unsupported_reason(SPACE) is None


def test_imported_measurements_inform_the_model_and_are_not_launched_again():
    from autospec.records import Markers
    from autospec.space import to_distribution_params

    sampler = ModelSampler(SPACE, dict, lambda flags: {}, seed=0)
    study, store = study_with(sampler)
    known = GRID[9]  # draft 12, breadth 10
    params = to_distribution_params(known, SPACE)
    distributions = {k: optuna.distributions.CategoricalDistribution(SPACE.param(k).choices) for k in params}
    record = measured(known)
    record.launched = False
    store.add_measured(params, distributions, record, Markers(imported={"source": "bench_speculative.py"}))
    proposals = []
    for _ in range(4):
        trial = study.ask()
        proposals.append(suggest(trial, SPACE))
        store.tell(trial, measured(proposals[-1]))
    assert known not in proposals
    assert sampler.prediction_for(1)["launches"] == 1  # the imported measurement was the first observation


def test_other_tuned_flags_are_told_apart_by_their_own_launches():
    """A flag the model has no form for (here the attention backend) is context: launches in
    each context set that context's level."""
    from autospec.model import SpecModel, Target, observation_from_record

    def launch(draft: int, backend: str) -> TrialRecord:
        record = measured({"speculative_num_draft_tokens": draft, "speculative_ngram_max_bfs_breadth": 1})
        faster = 1.3 if backend == "fa3" else 1.0
        record.candidate = {**record.candidate, "attention_backend": backend}
        record.values = [v * faster for v in record.values]
        for level in record.bench.values():
            for k in ("output_tok_s", "agg_output_tok_s"):
                level[k] *= faster
        return record

    base = dict(SPACE.server.flags)
    seen = [launch(d, b) for d in (2, 8, 16) for b in ("triton", "fa3")]
    model = SpecModel.fit(
        [observation_from_record(r, base_flags=base) for r in seen],
        [Target("output_tok_s", 1), Target("agg_output_tok_s", 32)],
        base_flags=base,
    )
    unseen = {"speculative_num_draft_tokens": 6, "speculative_ngram_max_bfs_breadth": 1}
    triton, fa3 = model.predict([{**unseen, "attention_backend": "triton"}, {**unseen, "attention_backend": "fa3"}]).point
    assert fa3[0] > 1.15 * triton[0] and fa3[1] > 1.15 * triton[1]


def test_a_numerical_failure_of_the_model_falls_back_to_a_random_proposal(monkeypatch):
    import autospec.study.proposing.samplers as module

    sampler = ModelSampler(SPACE, dict, lambda flags: {}, seed=0)
    study, _ = study_with(sampler)

    def broken(*args, **kwargs):
        raise np.linalg.LinAlgError("Matrix is not positive definite")

    monkeypatch.setattr(module, "rank", broken)
    trial = study.ask()
    assert key(suggest(trial, SPACE)) in RECORDS  # a configuration of the space, from the fallback
    assert sampler.failures == 1 and sampler.prediction_for(trial.number) is None


def test_a_configuration_in_flight_on_another_slot_is_believed_on_the_front():
    """Kriging believer: what another slot is measuring counts at the model's prediction, so
    a candidate just like it is worth (almost) nothing more, and concurrent slots spread."""
    from autospec.records import read_trials

    sampler = ModelSampler(SPACE, dict, lambda flags: {}, seed=0)
    study, store = study_with(sampler)
    for candidate in GRID[:12:3]:  # four launches: drafts 2, 4, 8, 12 at breadth 1/10
        from autospec.space import to_distribution_params

        study.enqueue_trial(to_distribution_params(candidate, SPACE))
        trial = study.ask()
        store.tell(trial, measured(suggest(trial, SPACE)))
    trials = read_trials(study)
    flags = [{**SPACE.server.flags, **c} for c in GRID]
    _, alone = sampler._rank(trials, flags)
    best = int(np.argmax(alone.ehvi))
    assert alone.ehvi[best] > 0.001
    _, believed = sampler._rank(trials, flags, in_flight=[flags[best]])
    assert "in flight 1" in believed.front_labels
    assert believed.ehvi[best] < 0.25 * alone.ehvi[best]  # what is left: the draws above its mean
