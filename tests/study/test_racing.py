"""Racing: when a level may stop measuring because the configuration cannot change the front."""

from __future__ import annotations

import dataclasses
import math

from autospec.metrics import LevelSummary
from autospec.study.racing import Race, RaceObjective, _Bound

C1 = RaceObjective(0, "output_tok_s", 1, True)
C32 = RaceObjective(1, "agg_output_tok_s", 32, True)


def summary(concurrency: int, **cis: tuple[float, float]) -> LevelSummary:
    required = {
        f.name: math.nan
        for f in dataclasses.fields(LevelSummary)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    required.update(
        concurrency=concurrency,
        n_requests=0,
        n_ok=0,
        n_errors=0,
        errors_by_kind={},
        failed_reason=None,
        accept_length=None,
        completion_tokens=0,
    )
    return LevelSummary(**required, cis=dict(cis))


# The front: trial 3 fast at C=1, trial 7 fast at C=32.
FRONT = ((3, ((240.0, 250.0), (1500.0, 1600.0))), (7, ((200.0, 210.0), (1900.0, 2000.0))))


def race(**kw) -> Race:
    return Race(objectives=(C1, C32), bounds=kw.pop("bounds", ()), members=kw.pop("members", FRONT))


def test_clearly_dominated_at_the_last_level_stops():
    r = race()
    r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    why = r.verdict(32, summary(32, agg_output_tok_s=(1400.0, 1450.0)))
    assert why is not None and why.startswith("dominated: trial 3")


def test_overlapping_intervals_go_on_measuring():
    r = race()
    r.level_done(1, summary(1, output_tok_s=(205.0, 215.0)))
    # trial 7 is not surely faster at C=1 (200-210), trial 3 not surely faster at C=32 (1500-1600)
    assert r.verdict(32, summary(32, agg_output_tok_s=(1450.0, 1510.0))) is None
    # better than trial 3 at C=1 would also keep it in the race
    r.level_done(1, summary(1, output_tok_s=(245.0, 260.0)))
    assert r.verdict(32, summary(32, agg_output_tok_s=(1400.0, 1450.0))) is None


def test_an_earlier_level_stops_only_when_every_front_member_beats_it_there():
    r = race()
    why = r.verdict(1, summary(1, output_tok_s=(150.0, 160.0)))
    assert why is not None and why.startswith("outclassed") and "output_tok_s@c1" in why
    assert r.verdict(1, summary(1, output_tok_s=(205.0, 215.0))) is None  # trial 7's 200-210 overlaps


def test_a_level_without_an_interval_yet_or_an_empty_front_goes_on():
    assert race().verdict(1, summary(1)) is None
    assert race(members=()).verdict(1, summary(1, output_tok_s=(1.0, 2.0))) is None
    r = race()  # C=1 not measured: domination cannot be judged, only that C=32 cannot matter
    assert r.verdict(32, summary(32, agg_output_tok_s=(1.0, 2.0))).startswith("outclassed")
    assert r.verdict(32, summary(32, agg_output_tok_s=(1800.0, 1950.0))) is None


def test_a_surely_broken_slo_stops_the_level_even_without_a_front():
    bounds = (_Bound("ttft_ms_p99", 32, None, 2000.0), _Bound("output_tok_s", 1, 100.0, None))
    r = race(bounds=bounds, members=())
    assert r.verdict(32, summary(32, ttft_ms_p99=(1900.0, 2100.0))) is None  # may still be met
    why = r.verdict(32, summary(32, ttft_ms_p99=(2100.0, 2300.0)))
    assert why is not None and why.startswith("slo: ttft_ms_p99@c32 is above its max 2000")
    assert r.verdict(1, summary(1, output_tok_s=(80.0, 95.0))).startswith("slo: output_tok_s@c1 is below its min 100")
