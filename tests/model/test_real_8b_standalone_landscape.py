"""A study replayed against the trained pair's landscape: `real-8b-standalone` (STANDALONE
speculation, a trained draft, greedy decoding) measured with real SGLang 0.5.16 on four H100s
(tests/fixtures/real_8b_standalone_grid.json, written by `benchmarks/real_landscape.py --grid
standalone` from the grid study of docs/validation/2026-12-07-h100-grid-complete.md): all 30 of
the space's configurations.

real_8b_standalone_default_h100.db.gz is the default study on the same space, run on two H100s
with `--references` (docs/validation/2026-12-06-h100-default-study.md and the 2026-12-07 run):
its 12 launches, chosen by the model sampler on the GPU, the control and confirmations included."""

from __future__ import annotations

import sys
from pathlib import Path

from replay import FIXTURES, check_grid_reads_as_measured, check_model_beats_random, load_grid

from autospec.model import hypervolume_ratio

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import real_landscape

SPACE, RECORDS = load_grid("real_8b_standalone_grid.json")


def test_the_space_holds_the_measured_configurations_and_the_model_reads_every_record_as_measured():
    check_grid_reads_as_measured(SPACE, RECORDS, complete=True)


def test_the_model_reaches_the_front_in_fewer_launches_than_random_search():
    launches, rate = check_model_beats_random(SPACE, RECORDS, within=6)
    assert launches <= 4, (launches, rate)


def test_the_default_study_on_the_gpu_reaches_the_grid_front():
    """Its launched configurations, each valued by the grid's own launch of it (so machines and
    launches do not enter), hold at least 95% of the grid front's hypervolume."""
    fixture, study = FIXTURES / "real_8b_standalone_default_h100.db.gz", "real-8b-standalone-default"
    values = real_landscape.grid_values_of(fixture, study, RECORDS)
    with real_landscape.opened_study(fixture, study) as trials:
        launched = [t for t in trials if t.counts_as_launch]  # what --trials 12 counted
    assert len(launched) == 12 and len(values) >= 3
    assert hypervolume_ratio(values, [list(r.values) for r in RECORDS.values()], [True, True]) >= 0.95
    # and the references: no speculation is off the grid, SGLang's defaults are a point of it
    assert {t.markers.reference for t in launched if t.markers.reference} == {"no_speculation", "sglang_defaults"}
