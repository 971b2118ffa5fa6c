"""A default study of `real-8b-ngram` on the H200, replayed from its records
(tests/fixtures/real_8b_ngram_study.json; docs/real-gpu-validation.md, "A default study on
the 8B-shaped target"): seven search launches and one confirmation relaunch with real SGLang
0.5.16.

What the records must still say without a GPU: every objective of every launch carries a
95% interval (the C=32 aggregates from windows under 3 waves included), the search reached
the measured grid's front, and the relaunch shows a between-launch spread larger than the
launches' own intervals admit, which the pooled intervals then carry."""

from __future__ import annotations

import json

from replay import FIXTURES, hypervolume_ratio, key, load_grid

from autospec.metrics.relaunch import LaunchFigure, between_launch_spread, pool_launches
from autospec.records import TrialRecord
from autospec.records.launches import level_interval

DATA = json.loads((FIXTURES / "real_8b_ngram_study.json").read_text())
LAUNCHES = [(row, TrialRecord.from_attrs(row["attrs"], row["values"], {})) for row in DATA["launches"]]
GRID_SPACE, GRID = load_grid("real_8b_ngram_grid.json")
OBJECTIVES = [("output_tok_s", 1), ("agg_output_tok_s", 32)]


def _figure(record: TrialRecord, metric: str, concurrency: int) -> LaunchFigure:
    interval = level_interval(record.bench.get(concurrency), metric)
    assert interval is not None, (record.candidate, metric, concurrency)
    value = dict(zip((m for m, _ in OBJECTIVES), record.values or ()))[metric]
    return LaunchFigure(value, (interval[1] - interval[0]) / 2)


def test_every_objective_of_every_launch_has_an_interval():
    assert len(LAUNCHES) == 8
    for _, record in LAUNCHES:
        for metric, concurrency in OBJECTIVES:
            figure = _figure(record, metric, concurrency)
            assert figure.half is not None and 0 < figure.half < figure.value


def test_the_search_launches_reach_the_measured_grids_front():
    searched = [record.candidate for row, record in LAUNCHES if row["confirm_of"] is None]
    assert len({key(c) for c in searched}) == len(searched) == 7
    every = [r.values for r in GRID.values()]
    maximize = [o.direction == "maximize" for o in GRID_SPACE.objectives]
    ratio = hypervolume_ratio([GRID[key(c)].values for c in searched], every, maximize)
    assert ratio >= 0.95


def test_the_relaunch_measures_a_spread_the_pooled_interval_carries():
    ((row, relaunch),) = [(row, r) for row, r in LAUNCHES if row["confirm_of"] is not None]
    first = next(r for row_, r in LAUNCHES if row_["number"] == row["confirm_of"])
    assert key(first.candidate) == key(relaunch.candidate)
    for metric, concurrency in OBJECTIVES:
        pair = [_figure(first, metric, concurrency), _figure(relaunch, metric, concurrency)]
        spread = between_launch_spread([pair])
        assert spread is not None and spread.cv > 0.03  # launches of one configuration differ by more than 3% (1 sd)
        pooled = pool_launches(pair, spread)
        assert pooled.half is not None and pooled.between_dominates
        assert pooled.half < 0.25 * pooled.value  # honest, not the +-70% of t with one degree of freedom
