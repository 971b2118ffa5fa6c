"""A study replayed against a GPU-bound real landscape: every configuration of
`real-8b-ngram` (NGRAM draft tokens x the trie's breadth on the 8B-shaped random-weight
target, temperature 1, top_k 4) measured with real SGLang 0.5.16 on an H200
(tests/fixtures/real_8b_ngram_grid.json, written by `benchmarks/real_landscape.py --grid 8b`
from the study of docs/real-gpu-validation.md, "The 8B-shaped target"). The model sampler,
which takes the trie's breadth as NGRAM's tree width, reaches this front within 8 launches
(`benchmarks/real_landscape.py --grid 8b` prints the ratio per launch)."""

from __future__ import annotations

from replay import key, load_grid, replay

from autospec.model import hypervolume_ratio, observation_from_record
from autospec.space import grid

SPACE, RECORDS = load_grid("real_8b_ngram_grid.json")
EVERY = [r.values for r in RECORDS.values()]
MAXIMIZE = [o.direction == "maximize" for o in SPACE.objectives]
DRAFT, BREADTH = "speculative_num_draft_tokens", "speculative_ngram_max_bfs_breadth"


def test_the_fixture_is_the_whole_grid_as_measured():
    assert {key(c) for c in grid(SPACE)} == set(RECORDS)
    assert SPACE.workload.temperature == 1.0 and SPACE.workload.top_k == 4
    for record in RECORDS.values():
        obs = observation_from_record(record, base_flags=SPACE.server.flags)
        assert obs is not None and obs.started
        assert obs.value("accept_length", 1) and obs.value("agg_output_tok_s", 32)  # what the model learns from
        assert obs.max_running_requests  # start-up facts from the real log


def test_acceptance_is_partial_and_the_wide_trie_accepts_more_under_load():
    """What makes this landscape worth tuning: accept lengths well below the draft (not the
    tiny target's greedy loops that accept everything), and the breadth-10 trie ahead of the
    chain at C=32 wherever it has more than one token to draft."""
    accept = {}
    for record in RECORDS.values():
        obs = observation_from_record(record, base_flags=SPACE.server.flags)
        assert obs is not None
        accept[(record.candidate[DRAFT], record.candidate[BREADTH])] = obs.value("accept_length", 32)
    assert all(1.0 < a < 2.0 for a in accept.values())
    assert all(accept[(d, 10)] > accept[(d, 1)] for d in (4, 8, 12, 16))


def test_eight_launches_of_the_model_reach_95_percent_of_the_real_front():
    launched = replay(SPACE, RECORDS, 8)
    assert len({key(c) for c in launched}) == 8
    ratio = hypervolume_ratio([RECORDS[key(c)].values for c in launched], EVERY, MAXIMIZE)
    assert ratio >= 0.95, f"hypervolume ratio {ratio:.3f} after 8 launches: {launched}"
