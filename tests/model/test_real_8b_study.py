"""A default study of `real-8b-ngram` on the H200, replayed from its records
(tests/fixtures/real_8b_ngram_study.json; docs/validation/2026-12-02-h200-8b-default-study.md):
seven search launches and one confirmation relaunch with real SGLang 0.5.16.

What src must compute from the relaunch and its first launch without a GPU: a between-launch
spread beyond the launches' own intervals, and a pooled interval that carries it, shrunk
towards the prior rather than the +-t(1) of one degree of freedom. What the run measured
(every objective of every launch with a 95% interval, the search reaching the measured
grid's front) is in that validation note."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from replay import FIXTURES, key
from scipy import stats

from autospec.metrics.paired import PRIOR_SD
from autospec.metrics.relaunch import LaunchFigure, between_launch_spread, pool_launches
from autospec.records import TrialRecord
from autospec.records.launches import level_interval

DATA = json.loads((FIXTURES / "real_8b_ngram_study.json").read_text())
LAUNCHES = [(row, TrialRecord.from_attrs(row["attrs"], row["values"], {})) for row in DATA["launches"]]
OBJECTIVES = [("output_tok_s", 1), ("agg_output_tok_s", 32)]


def _figure(record: TrialRecord, metric: str, concurrency: int) -> LaunchFigure:
    interval = level_interval(record.bench.get(concurrency), metric)
    assert interval is not None, (record.candidate, metric, concurrency)
    value = dict(zip((m for m, _ in OBJECTIVES), record.values or ()))[metric]
    return LaunchFigure(value, (interval[1] - interval[0]) / 2)


def test_the_relaunch_measures_a_spread_the_pooled_interval_carries():
    ((row, relaunch),) = [(row, r) for row, r in LAUNCHES if row["confirm_of"] is not None]
    first = next(r for row_, r in LAUNCHES if row_["number"] == row["confirm_of"])
    assert key(first.candidate) == key(relaunch.candidate)
    for metric, concurrency in OBJECTIVES:
        pair = [_figure(first, metric, concurrency), _figure(relaunch, metric, concurrency)]
        spread = between_launch_spread([pair])
        assert spread is not None and spread.df == 1
        # the spread is what the pair's scatter says beyond their measuring error
        mean = statistics.fmean(f.value for f in pair)
        excess = statistics.variance([f.value for f in pair]) - statistics.fmean(f.se**2 for f in pair)
        assert spread.cv == pytest.approx(math.sqrt(max(excess, 0.0)) / mean)
        assert spread.cv > 0  # the two launches differ beyond their own intervals
        pooled = pool_launches(pair, spread)
        assert pooled.value == pytest.approx(mean)
        assert pooled.half is not None and pooled.between_half and pooled.half > (pooled.within_half or 0.0)
        # the pair's 5.8% (C=1) and 7.3% (C=32), measured before one request stream per study, shrunk towards the 2% prior
        assert PRIOR_SD < spread.shrunk()[0] < spread.cv
        # shrunk towards the prior: narrower than the spread taken at face value with t(1)
        face_value = float(stats.t.ppf(0.975, 1)) * spread.cv * mean / math.sqrt(2)
        assert pooled.half < face_value
