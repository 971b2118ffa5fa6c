"""A study replayed against a real landscape: every configuration of
`real-tiny-ngram-breadth` measured with real SGLang 0.5.16 on an H200
(tests/fixtures/real_ngram_grid.json, written by benchmarks/real_landscape.py from the
study of docs/real-gpu-validation.md, "The model on real SGLang"). The replay answers each
launch the model asks for with the trial recorded for that configuration: start-up facts,
per-level summaries, accept length and objective values as the H200 measured them."""

from __future__ import annotations

from replay import check_grid_reads_as_measured, key, load_grid, replay

from autospec.model import hypervolume_ratio

SPACE, RECORDS = load_grid("real_ngram_grid.json")
EVERY = [r.values for r in RECORDS.values()]
MAXIMIZE = [o.direction == "maximize" for o in SPACE.objectives]


def test_the_space_enumerates_the_measured_grid_and_the_model_reads_every_record_as_measured():
    check_grid_reads_as_measured(SPACE, RECORDS)


def test_eight_launches_of_the_model_reach_95_percent_of_the_real_front():
    launched = replay(SPACE, RECORDS, 8)
    assert len({key(c) for c in launched}) == 8
    ratio = hypervolume_ratio([RECORDS[key(c)].values for c in launched], EVERY, MAXIMIZE)
    assert ratio >= 0.95, f"hypervolume ratio {ratio:.3f} after 8 launches: {launched}"
