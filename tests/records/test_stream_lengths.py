"""A study's request stream: each level's floor is the upper median of what earlier launches
measured there with per-position figures (`autospec.records.stream`)."""

from __future__ import annotations

import optuna

from autospec.records.schema import Markers, TrialRecord
from autospec.records.stored import StoredTrial, TrialClass
from autospec.records.stream import stream_lengths


def launch(number: int, counts: dict[int, int], *, series: bool = True, launched: bool = True) -> StoredTrial:
    bench = {
        c: {"n_requests": n, ("request_speeds" if c == 1 else "wave_speeds"): {"0": 1.0} if series else {}}
        for c, n in counts.items()
    }
    record = TrialRecord(outcome="ok", candidate={}, launched=launched, bench=bench, values=[1.0, 1.0])
    return StoredTrial(
        number, number, optuna.trial.TrialState.COMPLETE, TrialClass.MEASURED, {}, (1.0, 1.0), {}, record, Markers()
    )


def test_each_level_gets_the_upper_median_of_the_earlier_counts() -> None:
    trials = [launch(0, {1: 23, 32: 128}), launch(1, {1: 7, 32: 96}), launch(2, {1: 60})]
    assert stream_lengths(trials) == {1: 23, 32: 128}  # one long launch does not set it


def test_launches_without_per_position_figures_or_a_launch_do_not_count() -> None:
    trials = [launch(0, {1: 50}, series=False), launch(1, {1: 70}, launched=False), launch(2, {1: 9})]
    assert stream_lengths(trials) == {1: 9}
    assert stream_lengths([]) == {}
