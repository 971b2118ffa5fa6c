"""A study replayed against the trained pair's landscape: `real-8b-standalone` (STANDALONE
speculation, a trained draft, greedy decoding) measured with real SGLang 0.5.16 on two H100s
(tests/fixtures/real_8b_standalone_grid.json, written by `benchmarks/real_landscape.py --grid
standalone` from the grid study of docs/validation/2026-12-06-h100-grid-continued.md). 25 of
the space's 30 configurations are measured so far (steps 1-2 with top-k 2 or 4 are not); the
replay asserts that the model sampler asks for none of those before it reaches the front."""

from __future__ import annotations

from replay import check_grid_reads_as_measured, check_model_beats_random, load_grid

SPACE, RECORDS = load_grid("real_8b_standalone_grid.json")


def test_the_space_holds_the_measured_configurations_and_the_model_reads_every_record_as_measured():
    check_grid_reads_as_measured(SPACE, RECORDS, complete=False)


def test_the_model_reaches_the_front_in_fewer_launches_than_random_search():
    launches, rate = check_model_beats_random(SPACE, RECORDS, within=6)
    assert launches <= 4, (launches, rate)
