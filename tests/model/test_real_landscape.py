"""A study replayed against a real landscape: every configuration of
`real-tiny-ngram-breadth` measured with real SGLang 0.5.16 on an H200
(tests/fixtures/real_ngram_grid.json, written by benchmarks/real_landscape.py from the
study of docs/validation/2026-12-01-h200-model-on-real-sglang.md, "The model on real SGLang"). The replay answers each
launch the model asks for with the trial recorded for that configuration: start-up facts,
per-level summaries, accept length and objective values as the H200 measured them."""

from __future__ import annotations

from replay import check_grid_reads_as_measured, check_model_beats_random, load_grid

SPACE, RECORDS = load_grid("real_ngram_grid.json")


def test_the_space_enumerates_the_measured_grid_and_the_model_reads_every_record_as_measured():
    check_grid_reads_as_measured(SPACE, RECORDS)


def test_the_model_reaches_95_percent_of_the_real_front_in_fewer_launches_than_random_search():
    launches, rate = check_model_beats_random(SPACE, RECORDS, within=8)
    assert launches <= 5, (launches, rate)
