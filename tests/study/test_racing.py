"""Racing: when a level may stop measuring because the configuration cannot change the front."""

from __future__ import annotations

import dataclasses
import math

import pytest

from autospec.metrics import LevelSummary
from autospec.records.launches import race_check
from autospec.study.racing import Race, RaceObjective, _Bound

C1 = RaceObjective(0, "output_tok_s", 1, True)
C32 = RaceObjective(1, "agg_output_tok_s", 32, True)


def summary(concurrency: int, method: str = "batch-means", slices: int = 10, **cis: tuple[float, float]) -> LevelSummary:
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
    return LevelSummary(**required, cis=dict(cis), agg_ci_method=method, steady_slices=slices)


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


def test_a_front_member_without_an_interval_is_unknown_not_exact():
    """A member whose C=32 figure has no interval must not count as a zero-width one:
    that made a quick start stop a level as dominated whose final figure was the best."""
    r = race(members=((7, ((200.0, 210.0), None)),))
    r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    assert r.verdict(32, summary(32, agg_output_tok_s=(1400.0, 1450.0))) is None


@pytest.mark.parametrize(("method", "slices"), [("short-window", 1), ("whole-run", 0), ("batch-means", 3), ("batch-means", 9)])
def test_an_aggregate_interval_on_too_few_waves_does_not_race(method: str, slices: int):
    r = race()
    r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    assert r.verdict(32, summary(32, method, slices, agg_output_tok_s=(1400.0, 1450.0))) is None
    assert r.verdict(32, summary(32, "batch-means", 10, agg_output_tok_s=(1400.0, 1450.0))).startswith("dominated")
    assert r.verdict(32, summary(32, "repeats", 0, agg_output_tok_s=(1400.0, 1450.0))).startswith("dominated")


def stopped(level: LevelSummary, why: str) -> LevelSummary:
    return dataclasses.replace(level, stop_reason="external", precision={"stop": "external", "detail": why})


def test_a_race_stop_is_checked_again_on_the_drained_level():
    r = race()
    r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    why = r.verdict(32, summary(32, agg_output_tok_s=(1400.0, 1450.0)))
    # Drained, the level still lies below trial 3 on both objectives: the stop holds.
    held = r.level_done(32, stopped(summary(32, agg_output_tok_s=(1420.0, 1470.0)), why))
    assert held.precision["race"] == {"stop": "dominated", "final": why, "check": "confirmed"}
    assert race_check(held.as_dict()) == "confirmed"


def test_a_race_stop_the_drained_level_contradicts_is_recorded_as_such_and_not_as_dominated():
    r = race()
    r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    why = r.verdict(32, summary(32, agg_output_tok_s=(1400.0, 1450.0)))
    assert why.startswith("dominated")
    # Drained, the C=32 figure is the best of the study: no front member beats it.
    final = r.level_done(32, stopped(summary(32, agg_output_tok_s=(1950.0, 2050.0)), why))
    assert final.precision["race"]["check"] == "contradicted" and final.precision["race"]["final"] is None
    assert race_check(final.as_dict()) == "contradicted"
    assert final.precision["detail"] == why  # what was decided stays on record, next to its check
    # Drained to a window too short to compare: nothing confirms the stop either.
    thin = r.level_done(32, stopped(summary(32, "short-window", 1, agg_output_tok_s=(1300.0, 1350.0)), why))
    assert thin.precision["race"]["check"] == "unchecked" and race_check(thin.as_dict()) != "confirmed"


def test_levels_the_race_did_not_stop_carry_no_check():
    r = race()
    done = r.level_done(1, summary(1, output_tok_s=(180.0, 190.0)))
    assert race_check(done.as_dict()) is None and (done.precision or {}).get("race") is None


def test_a_percentile_with_only_a_lower_bound_can_still_show_a_max_slo_broken():
    """The p99 of 64 requests has no upper order statistic: its lower bound alone says a
    max is surely broken, and never that a min is."""
    bounds = (_Bound("ttft_ms_p99", 32, None, 2000.0), _Bound("tpot_ms_p99", 32, 5.0, None))
    r = race(bounds=bounds, members=())
    why = r.verdict(32, summary(32, ttft_ms_p99=(2100.0, math.nan)))
    assert why is not None and why.startswith("slo: ttft_ms_p99@c32 is above its max 2000")
    assert r.verdict(32, summary(32, ttft_ms_p99=(1900.0, math.nan))) is None
    assert r.verdict(32, summary(32, tpot_ms_p99=(3.0, math.nan))) is None  # below the min? unknown upper side


def test_the_race_compares_by_the_paired_ratio_over_the_positions_both_measured():
    """The trial's first 10 requests at C=1 read 10-20% under each front member's first 10,
    request by request, while their unpaired intervals overlap: the level stops (outclassed).
    Over fewer matched positions than RACE_MIN_MATCHED it goes on, and a trial as fast as a
    member request by request goes on too."""
    from autospec.metrics.paired import LogSpread, Side
    from autospec.study.racing import RACE_MIN_MATCHED

    climb = {f"{i}.0": 150.0 + 10.0 * i for i in range(30)}  # NGRAM's climb over a launch

    def side(factor: float) -> Side:
        return Side(250.0 * factor, 40.0, 1, ({k: v * factor for k, v in climb.items()},))

    wide = ((3, ((200.0, 300.0), (1500.0, 1600.0))), (7, ((190.0, 290.0), (1900.0, 2000.0))))
    r = Race(
        objectives=(C1, C32),
        bounds=(),
        members=wide,
        sides={3: (side(1.2), None), 7: (side(1.1), None)},
        log_spread={0: LogSpread(0.01, 20, 10)},
    )

    def running(n: int, factor: float) -> LevelSummary:
        speeds = {f"{i}.0": climb[f"{i}.0"] * factor for i in range(n)}
        return dataclasses.replace(summary(1, output_tok_s=(150.0, 260.0)), request_speeds=speeds)

    slower = running(10, 1.0)
    why = r.verdict(1, slower)
    assert why is not None and why.startswith("outclassed")
    assert r.verdict(1, running(RACE_MIN_MATCHED - 1, 1.0)) is None  # too few positions yet: the intervals overlap
    assert r.verdict(1, running(10, 1.1)) is None  # as fast as trial 7 request by request


def test_a_front_member_on_another_machine_stops_a_level_only_through_a_control_factor():
    """Trial 3 was measured on machine a, 20% faster request by request than this run's
    trial on machine b. Without a control joining a and b, that could be the machines: the
    level goes on, whatever the intervals say. With a factor of x1.18 (a is 18% faster) the
    paired ratio through it holds 1 (goes on); with a factor of x1.0 it stops, as on one machine."""
    from autospec.metrics.paired import Comparison, LogSpread, Side
    from autospec.records.machines import MachineFactor

    climb = {f"{i}.0": 150.0 + 10.0 * i for i in range(30)}
    member = Side(300.0, 10.0, 1, ({k: v * 1.2 for k, v in climb.items()},))
    level = dataclasses.replace(summary(1, output_tok_s=(200.0, 210.0)), request_speeds=dict(climb))
    front = ((3, ((290.0, 310.0), (1500.0, 1600.0))),)

    def on(machine: str, factor: float | None = None) -> Race:
        factors = (
            []
            if factor is None
            else [MachineFactor("a", "b", 9, 0, Comparison(factor, factor / 1.01, factor * 1.01, 20, 0, (1, 1), True))]
        )
        return Race(
            objectives=(C1, C32),
            bounds=(),
            members=front,
            sides={3: (member, None)},
            log_spread={0: LogSpread(0.01, 20, 10)},
            machine=machine,
            homes={3: (frozenset({"a"}), frozenset({"a"}))},
            factors={0: factors},
        )

    assert on("a").verdict(1, level).startswith("outclassed")  # one machine
    assert on("b").verdict(1, level) is None  # nothing joins a and b
    assert on("b", 1.18).verdict(1, level) is None  # a's 18% explains most of it
    assert on("b", 1.0).verdict(1, level).startswith("outclassed")
    unpaired = dataclasses.replace(on("b", 1.0), sides={})
    assert unpaired.verdict(1, level) is None  # across machines only a paired ratio may stop it
    assert dataclasses.replace(on("a"), sides={}).verdict(1, level).startswith("outclassed")  # beyond both intervals
