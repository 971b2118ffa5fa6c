"""The paired ratio of two configurations over matched requests."""

from __future__ import annotations

import math
import random

import pytest

from autospec.metrics.paired import (
    PRIOR_SD,
    LogSpread,
    Side,
    SpreadHistory,
    across_machines,
    compare,
    launch_spread,
    paired_ratio,
    unpaired_ratio,
    with_history,
)


def stream(n: int, seed: int = 0) -> list[float]:
    """A per-request effect that repeats in every launch: 15% sd, and a climb over the launch."""
    rng = random.Random(seed)
    return [300.0 * (1 + 0.4 * min(i, 25) / 25) * math.exp(rng.gauss(0, 0.15)) for i in range(n)]


def launch(effect: list[float], factor: float, noise: float, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    offset = math.exp(rng.gauss(0, noise))
    return {f"{i}.0": factor * offset * v * math.exp(rng.gauss(0, 0.01)) for i, v in enumerate(effect)}


def test_a_5_percent_gain_is_separated_although_each_launch_spreads_15_percent_over_its_requests() -> None:
    effect = stream(14)
    a, b = [launch(effect, 1.05, 0.005, 1)], [launch(effect, 1.0, 0.005, 2)]
    spread = LogSpread(0.01, 8, 4)
    c = paired_ratio(a, b, spread)
    assert c is not None and c.paired and c.matched == 14 and c.dropped == 0
    assert c.lo < 1.05 < c.hi and c.separated
    floor = 1.96 * math.sqrt(2) * spread.shrunk()[0]  # what the between-launch spread alone sets
    assert math.log(c.hi / c.ratio) <= 1.3 * floor  # issue 37's bound; unpaired it is +-12% or more
    spread_a = 1.96 * 0.15 / math.sqrt(14)
    unpaired = unpaired_ratio(300 * 1.05, 300 * 1.05 * spread_a, 300, 300 * spread_a)
    assert unpaired is not None and not unpaired.separated and not unpaired.paired


def test_pairing_when_a_launch_lost_a_request_matches_the_rest_and_counts_the_dropped_one() -> None:
    effect = stream(12, seed=5)
    a = launch(effect, 1.0, 0.0, 3)
    b = launch(effect, 1.0, 0.0, 4)
    del b["4.0"]  # the request failed in launch b: no figure
    b["12.0"] = 999.0  # launch b measured one request more (the precision loop ran on): not compared
    c = paired_ratio([a], [b], None)
    assert c is not None and c.matched == 11 and c.dropped == 2
    assert c.lo < 1.0 < c.hi and not c.separated
    assert c.ratio == pytest.approx(1.0, abs=0.02)


def test_the_interval_never_falls_below_the_floor_the_between_launch_spread_sets() -> None:
    effect = stream(40, seed=2)
    a, b = [launch(effect, 1.0, 0.0, 5)], [launch(effect, 1.0, 0.0, 6)]
    c = paired_ratio(a, b, LogSpread(0.01, 1000, 10))
    floor = 1.96 * math.sqrt(2) * 0.01
    assert c is not None and math.log(c.hi / c.ratio) >= floor * 0.99
    more = paired_ratio(a * 2, b * 2, LogSpread(0.01, 1000, 10))  # more launches narrow it
    assert more is not None and more.hi / more.lo < c.hi / c.lo


def test_without_relaunches_the_prior_spread_is_the_floor() -> None:
    effect = stream(30, seed=3)
    c = paired_ratio([launch(effect, 1.0, 0.0, 7)], [launch(effect, 1.0, 0.0, 8)], None)
    assert c is not None and math.log(c.hi / c.ratio) > 1.96 * math.sqrt(2) * PRIOR_SD


def test_relaunches_in_other_studies_take_the_place_of_the_prior_as_their_degrees_of_freedom_grow() -> None:
    effect = stream(30, seed=4)
    a, b = [launch(effect, 1.06, 0.0, 9)], [launch(effect, 1.0, 0.0, 10)]
    alone = paired_ratio(a, b, None)
    calm = paired_ratio(a, b, with_history(None, SpreadHistory(0.003, 40, 5)))
    rough = paired_ratio(a, b, with_history(None, SpreadHistory(0.05, 40, 5)))
    assert alone is not None and calm is not None and rough is not None
    assert calm.hi / calm.lo < alone.hi / alone.lo < rough.hi / rough.lo  # the history decides which way
    tau, df = with_history(None, SpreadHistory(0.003, 40, 5)).shrunk()
    assert df == 44 and 0.003 < tau < PRIOR_SD  # still shrunk towards the prior, by its 4 df
    # the study's own relaunches add to the history's degrees of freedom; a spread without any adds nothing
    own = with_history(LogSpread(0.01, 6, 2), SpreadHistory(0.003, 40, 5))
    assert own is not None and own.shrunk()[1] == 50
    assert SpreadHistory.pooled([LogSpread(0.02, 2, 1), LogSpread(0.0, 0, 0), LogSpread(0.01, 6, 2)]) == SpreadHistory(
        math.sqrt((2 * 0.02**2 + 6 * 0.01**2) / 8), 8, 2
    )
    assert SpreadHistory.pooled([LogSpread(0.0, 0, 0)]) is None and with_history(None, None) is None


def test_an_unsettled_launch_does_not_decide() -> None:
    effect = stream(14)
    c = paired_ratio([launch(effect, 1.3, 0.0, 1)], [launch(effect, 1.0, 0.0, 2)], None, unsettled=1)
    assert c is not None and c.lo > 1.0 and not c.separated
    assert c.as_dict()["unsettled"] == 1 and c.as_dict()["separated"] is False


def test_no_paired_comparison_without_enough_matched_figures() -> None:
    assert paired_ratio([{}], [{"0.0": 1.0}], None) is None
    assert paired_ratio([{"0.0": 1.0}], [{"1.0": 1.0}], None) is None
    two_waves = {"0": 2000.0, "1": 2100.0}
    assert paired_ratio([two_waves], [{k: v * 0.9 for k, v in two_waves.items()}], None) is None
    from autospec.metrics.paired import Side, compare

    fallback = compare(
        Side(2050.0, 100.0, 1, (two_waves,)), Side(1845.0, 90.0, 1, ({k: v * 0.9 for k, v in two_waves.items()},)), None
    )
    assert fallback is not None and not fallback.paired and fallback.hi / fallback.lo < 1.3
    assert fallback.matched == 2 and fallback.unit == "requests"  # what matched, too few to pair


def test_the_spread_is_the_sd_of_a_launchs_mean_log_figure_over_shared_requests_pooled_over_configurations() -> None:
    effect = stream(20, seed=9)
    one = [launch(effect, 1.0, 0.0, 1) for _ in range(1)]
    three = [{k: v * f for k, v in launch(effect, 1.0, 0.0, 2).items()} for f in (0.98, 1.0, 1.02)]
    spread = launch_spread([one, three, []])
    assert spread is not None and spread.df == 2 and spread.configurations == 1
    assert spread.sd == pytest.approx(0.02, rel=0.05)
    assert launch_spread([one]) is None
    sd, df = spread.shrunk()
    assert df == 2 + 4 and 0.02 * 0.99 < sd < 0.021


def test_the_inverse_is_b_over_a() -> None:
    c = unpaired_ratio(110.0, 5.0, 100.0, 5.0)
    assert c is not None
    inv = c.inverse()
    assert inv.ratio == pytest.approx(1 / 1.1) and inv.lo == pytest.approx(1 / c.hi)


def test_relaunches_measure_the_noise_so_one_launch_each_is_bounded_by_the_floor() -> None:
    # a prompt effect of 15% (and a climb) in every launch, B treating each prompt 4% differently
    # from A (also in every launch), 1% per-request noise and a 2% shift per launch (the prior's)
    effect = stream(24, seed=11)
    twist = [math.exp(random.Random(100 + i).gauss(0, 0.04)) for i in range(24)]
    a = [launch(effect, 1.05, 0.02, s) for s in (1, 2, 3)]
    b = [{k: v * twist[i] for i, (k, v) in enumerate(launch(effect, 1.0, 0.02, s).items())} for s in (4, 5, 6)]
    spread = launch_spread([a, b])
    assert spread is not None and spread.noise_sd is not None and spread.noise_df == 2 * 2 * 23
    assert spread.noise_sd == pytest.approx(0.01, rel=0.25)  # launch() adds 1% per request
    assert spread.launch_sd() < spread.sd  # the noise's share of a launch mean is taken out
    first = paired_ratio(a[:1], b[:1], spread)
    assert first is not None
    floor = 1.96 * math.sqrt(2) * spread.sd
    assert math.log(first.hi / first.ratio) <= 1.3 * floor  # the per-prompt twist is not noise here
    without = paired_ratio(a[:1], b[:1], None)  # before relaunches: sd(d) holds the twist too
    assert without is not None and without.hi / without.lo > first.hi / first.lo
    for i in (1, 2):  # the later launches land inside the first interval
        later = paired_ratio([a[i]], [b[i]], spread)
        assert later is not None and first.lo < later.ratio < first.hi


def _side(series: dict[str, float], unit: str = "requests") -> Side:
    return Side(sum(series.values()) / len(series), None, 1, (series,), 0, unit)


def test_a_second_machine_that_moves_both_configurations_alike_narrows_the_ratio_and_keeps_it() -> None:
    """A and B once each on a home machine and once each on a machine 6% slower: each machine's
    pair says x1.08, and together they say it over twice the requests, 4 launches, 2 machines."""
    effect = stream(16, seed=7)
    spread = LogSpread(0.01, 8, 4, noise_sd=0.03, noise_df=40, ids=16)
    home_a, home_b = _side(launch(effect, 1.08, 0.0, 1)), _side(launch(effect, 1.0, 0.0, 2))
    away_a, away_b = _side(launch(effect, 1.08 * 0.94, 0.0, 3)), _side(launch(effect, 0.94, 0.0, 4))
    home = compare(home_a, home_b, spread)
    there = compare(away_a, away_b, spread)
    assert home is not None and there is not None and home.paired and there.paired
    both = across_machines(home, {"m2": away_a}, {"m2": away_b}, spread)
    assert both is not None and both.paired and both.machines == 2
    assert both.matched == home.matched + there.matched and both.launches == (2, 2)
    assert min(home.ratio, there.ratio) <= both.ratio <= max(home.ratio, there.ratio)
    assert both.lo < 1.08 < both.hi
    assert math.log(both.hi / both.lo) < min(math.log(c.hi / c.lo) for c in (home, there))
    # both of the second machine's figures are 6% lower; paired there, the ratio is the home machine's
    assert there.ratio == pytest.approx(home.ratio, rel=0.02)


def test_only_paired_comparisons_on_machines_both_ran_on_combine() -> None:
    effect = stream(16, seed=8)
    spread = LogSpread(0.01, 8, 4, noise_sd=0.03, noise_df=40, ids=16)
    a, b = _side(launch(effect, 1.05, 0.0, 1)), _side(launch(effect, 1.0, 0.0, 2))
    home = compare(a, b, spread)
    assert home is not None
    few = _side({"0.0": 300.0, "1.0": 310.0})  # 2 ids: too few to pair
    assert across_machines(home, {"m2": a}, {"m3": b}, spread) == home  # no machine in common
    assert across_machines(home, {"m2": few}, {"m2": few}, spread) == home  # there they do not pair
    assert across_machines(home, {"m2": _side(a.series[0], "waves")}, {"m2": _side(b.series[0], "waves")}, spread) == home
    unpaired = unpaired_ratio(105.0, 5.0, 100.0, 5.0)
    assert across_machines(unpaired, {"m2": a}, {"m2": b}, spread) == unpaired  # home unpaired: kept as it is
    assert across_machines(None, {"m2": a}, {"m2": b}, spread) is None
