"""A study replayed against a GPU-bound real landscape: every configuration of
`real-8b-ngram` (NGRAM draft tokens x the trie's breadth on the 8B-shaped random-weight
target, temperature 1, top_k 4) measured with real SGLang 0.5.16 on an H200
(tests/fixtures/real_8b_ngram_grid.json, written by `benchmarks/real_landscape.py --grid 8b`
from the study of docs/validation/2026-12-02-h200-8b-grid.md, "The 8B-shaped target"). The model
sampler, which takes the trie's breadth as NGRAM's tree width, reaches this front in 5 launches,
where a random 5 of the 10 reach it in 22% of subsets
(`benchmarks/real_landscape.py --grid 8b` prints the ratio per launch)."""

from __future__ import annotations

from replay import check_grid_reads_as_measured, check_model_beats_random, load_grid

from autospec.model import observation_from_record
from autospec.model.performance import PerformanceModel

SPACE, RECORDS = load_grid("real_8b_ngram_grid.json")
DRAFT, BREADTH = "speculative_num_draft_tokens", "speculative_ngram_max_bfs_breadth"


def test_the_space_enumerates_the_measured_grid_and_the_model_reads_every_record_as_measured():
    check_grid_reads_as_measured(SPACE, RECORDS)


def test_the_fitted_acceptance_is_partial_and_orders_the_wide_trie_against_the_chain_as_measured():
    """What makes this landscape worth tuning: accept lengths well below the draft, and the
    breadth-10 trie against the chain wherever it has more than one token to draft. Fitted
    on the whole grid, the model's accept lengths say the same as the measurements."""
    observations = [observation_from_record(r, base_flags=SPACE.server.flags) for r in RECORDS.values()]
    model = PerformanceModel([o for o in observations if o is not None])
    fitted, measured = {}, {}
    for record, obs in zip(RECORDS.values(), observations):
        assert obs is not None
        e = float(model.accept_draws(model.params, [obs.shape])[0, 0])
        fitted[(record.candidate[DRAFT], record.candidate[BREADTH])] = e * model.length / (model.length - 1.0)
        measured[(record.candidate[DRAFT], record.candidate[BREADTH])] = obs.value("accept_length", 32)
    assert all(1.0 < e < draft for (draft, _), e in fitted.items())
    for draft in sorted({d for d, _ in fitted if d > 2}):
        assert (fitted[(draft, 10)] > fitted[(draft, 1)]) == (measured[(draft, 10)] > measured[(draft, 1)]), draft


def test_the_model_reaches_95_percent_of_the_real_front_in_fewer_launches_than_random_search():
    launches, rate = check_model_beats_random(SPACE, RECORDS, within=8)
    assert launches <= 5, (launches, rate)
