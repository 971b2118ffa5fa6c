"""Launches of two configurations alternating on one request stream, real SGLang 0.5.16 on one
H100 (tests/fixtures/real_8b_paired_steps56.db.gz; docs/validation/2026-12-06-h100-paired-launches.md):
the trained 8B-shaped pair (`real-8b-standalone` pinned to top-k 1, steps 6 or 5), launched
A B A B B (tools/gpu/paired_study.sh) at temperature 0.

What the code must compute from these records without a GPU: every launch measured the same
positions of the stream (the study's stream floor), so the pick's comparison pairs over all of
them with none dropped; relaunches measure the per-request noise that does not repeat, and with
it the paired interval of one launch each is narrower than the two launches' own intervals
combined and close to the floor the between-launch spread sets; the later pair lands inside.

real_8b_paired_two_machines.db.gz is the same study continued on a second H100 (trials 7-9,
docs/validation/2026-12-06-h100-control-and-grid.md): launches pool and pair only within a
machine, and both configurations read the same machine factor."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from tests.model.replay import pareto_json, unpacked_storage

from autospec.metrics.paired import paired_ratio
from autospec.records.launches import level_series

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import paired_launches

FIXTURE = "real_8b_paired_steps56.db.gz"


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    return unpacked_storage(tmp_path_factory.mktemp("paired"), FIXTURE)


def test_the_latency_pick_is_compared_over_every_position_of_the_stream(storage: str) -> None:
    latency = pareto_json("steps-5-6", storage)["recommendations"]["latency"]
    versus = latency["versus_runner_up"]
    assert latency["params"]["speculative_num_steps"] == 6 and latency["runner_up"]["number"] == 1
    assert versus["paired"] and versus["dropped"] == 0 and versus["matched"] == 17
    assert versus["launches"] == [2, 3] and versus["separated"] and 1.05 < versus["ratio"] < 1.16


def test_one_launch_each_pairs_close_to_the_floor_at_c1(storage: str) -> None:
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(storage, "steps-5-6"))
    check = paired_launches.check_level(a, b, 1, "output_tok_s")
    assert check is not None and check.spread.noise_df >= 8  # relaunches measured the per-request noise
    first, unpaired = check.first, check.unpaired
    assert unpaired is not None and first.hi / first.lo < unpaired.hi / unpaired.lo
    assert check.known_over_floor(check.pairs[0]) < 1.6  # s from 3 degrees of freedom sits below e's own share of a launch mean
    assert check.later and all(inside for _, inside in check.later)


def test_c32_waves_carry_noise_that_does_not_repeat(storage: str) -> None:
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(storage, "steps-5-6"))
    check = paired_launches.check_level(a, b, 32, "agg_output_tok_s")
    assert check is not None and check.first.unit == "waves" and check.first.matched == 33  # 34 less the ramp wave
    # the closed loop scrambles which requests share a wave: a wave's noise that does not repeat
    # (8.7%) is about twice the spread of a launch's mean (4.4%)
    assert check.spread.noise_sd is not None and check.spread.noise_sd == pytest.approx(2 * check.spread.sd, rel=0.1)


@pytest.fixture(scope="module")
def two_machines_storage(tmp_path_factory) -> str:
    return unpacked_storage(tmp_path_factory.mktemp("paired2"), "real_8b_paired_two_machines.db.gz")


@pytest.fixture(scope="module")
def two_machines(two_machines_storage) -> tuple[list, list]:
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(two_machines_storage, "steps-5-6"))
    return a, b


def test_a_configuration_relaunched_on_the_second_machine_is_not_its_own_runner_up(two_machines_storage) -> None:
    report = pareto_json("steps-5-6", two_machines_storage)
    latency = report["recommendations"]["latency"]
    assert latency["number"] == 0 and latency["runner_up"]["number"] == 1  # B, not A's launches on machine 2
    assert report["counts"]["measured"] == 2


def test_launches_pool_and_pair_only_within_one_machine(two_machines) -> None:
    a, b = two_machines
    machines = paired_launches.machines_of([*a, *b])
    assert len(machines) == 2
    check = paired_launches.check_level(a, b, 1, "output_tok_s")
    assert check is not None
    assert check.spread.df == 4  # A: 2 + 2 launches, B: 3 + 1, one degree lost per machine's group
    assert [(p.machine, p.a, p.b) for p in check.pairs] == [(machines[0], 0, 1), (machines[0], 2, 3), (machines[1], 7, 8)]
    assert all(inside for _, inside in check.later)  # C=1: every later pair, on either machine, inside the first


def test_both_configurations_read_the_same_machine_factor(two_machines) -> None:
    a, b = two_machines
    for concurrency, metric in paired_launches.LEVELS:
        check = paired_launches.check_level(a, b, concurrency, metric)
        assert check is not None
        (_, _, fa), (_, _, fb) = check.factors
        assert fb.lo < fa.ratio < fb.hi and fa.lo < fb.ratio < fa.hi, (concurrency, fa, fb)
    # the second H100 reads 16-18% faster at C=32 for both, beyond either interval
    assert all(f.lo > 1.05 for _, _, f in check.factors)


def _default_study_relaunches(folder) -> tuple[list, list]:
    """3/1/4 and 1/1/2, each launched twice on one H100: by the default study's first command,
    whose state was not carried on (real_8b_standalone_default_first_h100.db.gz), and again as
    the first two launches of the study that went on (real_8b_standalone_default_h100.db.gz,
    its trials renumbered from 100). Levels at C=32 kept each request's speed."""
    names = ["real_8b_standalone_default_first_h100.db.gz", "real_8b_standalone_default_h100.db.gz"]
    trials = paired_launches.fixtures_trials(names, "real-8b-standalone-default", folder)
    a, b = paired_launches.relaunched_pair(trials, (0, 1))
    assert dict(a[0].params)["speculative_num_steps"] == 3 and dict(b[0].params)["speculative_num_steps"] == 1
    return a, b


@pytest.mark.parametrize(("concurrency", "metric"), paired_launches.LEVELS)
def test_one_launch_each_pairs_by_request_within_the_floor_at_both_levels(tmp_path, concurrency, metric) -> None:
    a, b = _default_study_relaunches(tmp_path)
    check = paired_launches.check_level(a, b, concurrency, metric, "requests")
    assert check is not None and check.first.unit == "requests"
    assert check.spread.noise_df >= 8  # the relaunches measured the noise that does not repeat
    # C=32 by request (the waves of real_8b_paired_steps56 did not repeat; the study still pairs by wave)
    assert check.first.matched >= (100 if concurrency > 1 else 4)
    assert all(check.known_over_floor(p) <= 1.3 for p in check.pairs)
    assert check.later and all(inside for _, inside in check.later)


TOPK_FIXTURE = "real_8b_standalone_topk_1_2_h200.db.gz"  # 6/1/7 and 6/2/7, A B A B A B on one H200


@pytest.fixture(scope="module")
def topk(tmp_path_factory) -> tuple[list, list]:
    storage = unpacked_storage(tmp_path_factory.mktemp("topk"), TOPK_FIXTURE)
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(storage, "topk-1-2"))
    return a, b


def test_configurations_six_percent_apart_pair_at_the_floor_at_c1(topk) -> None:
    a, b = topk
    check = paired_launches.check_level(a, b, 1, "output_tok_s")
    assert check is not None and len(check.pairs) == 3 and check.spread.noise_df >= 8
    assert all(1.03 < p.comparison.ratio < 1.10 and p.comparison.lo > 1.0 for p in check.pairs)  # separated on one launch each
    assert all(check.known_over_floor(p) <= 1.3 for p in check.pairs)
    assert check.later and all(inside for _, inside in check.later)


def test_c32_compares_the_waves_both_launches_measured_not_their_different_counts(tmp_path) -> None:
    """6/1/7 and 6/2/7 once each on an H100 (real_8b_standalone_topk_1_2b_h100.db.gz): at C=32
    the first launch ran on to 428 requests (13 waves) and its rate fell over its last waves;
    the second stopped at 318 (9). Their own aggregates differ by 1.5%; over the 8 waves both
    measured after the ramp wave, the first is faster by about what it leads by at C=1 (6.5%)."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_topk_1_2b_h100.db.gz")
    report = pareto_json("topk-1-2b", storage)
    latency, throughput = (report["recommendations"][k]["versus_runner_up"] for k in ("latency", "throughput"))
    assert throughput["paired"] and throughput["unit"] == "waves" and throughput["launches"] == [1, 1]
    assert throughput["matched"] == 8 and throughput["dropped"] == 4
    [a], [b] = paired_launches.launches_by_config(paired_launches.study_trials(storage, "topk-1-2b"))
    assert a.record is not None and b.record is not None and a.record.values and b.record.values
    own = a.record.values[1] / b.record.values[1]
    assert own < 1.03 < throughput["ratio"]
    assert abs(math.log(throughput["ratio"] / latency["ratio"])) < 0.02


@pytest.mark.parametrize(("concurrency", "metric"), paired_launches.LEVELS)
def test_one_launch_each_on_one_h100_pairs_at_the_floor_and_the_relaunches_land_inside(tmp_path, concurrency, metric) -> None:
    """6/1/7 and 6/2/7 on two H100s (real_8b_standalone_topk_1_2c_h100.db.gz): A B A B A on the
    first (docs/validation/2026-12-07-h100-topk-floor.md), then the study continued on a second,
    whose control relaunched A (trial 5) before B (6) (docs/validation/2026-12-07-h100-topk-second-machine.md).
    Compared in the unit the study pairs in (requests at C=1, waves at C=32): each pair of one
    launch each is separated; on the first machine within 1.3x the floor the between-launch
    spread sets once that spread is known; every later pair, the second machine's too, lands
    inside the first pair's interval; and both configurations move by the same machine factor."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_topk_1_2c_h100.db.gz")
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(storage, "topk-1-2c"))
    assert [t.number for t in a] == [0, 2, 4, 5] and [t.number for t in b] == [1, 3, 6]
    check = paired_launches.check_level(a, b, concurrency, metric)
    assert check is not None and check.spread.df == 3 and check.spread.noise_df >= 8  # spread: within machines only
    first_machine = check.pairs[0].machine
    assert [(p.a, p.b, p.machine == first_machine) for p in check.pairs] == [(0, 1, True), (2, 3, True), (5, 6, False)]
    assert all(p.comparison.lo > 1.0 for p in check.pairs)
    assert all(check.known_over_floor(p) <= 1.3 for p in check.pairs if p.machine == first_machine)
    assert len(check.later) == 2 and all(inside for _, inside in check.later)
    # the second machine moves A and B alike: their factors' intervals overlap, and each holds the other's ratio
    (_, _, fa), (_, _, fb) = check.factors
    assert fa.lo <= fb.ratio <= fa.hi and fb.lo <= fa.ratio <= fb.hi
    # the study reports the pick against its runner-up paired, separated, over this unit
    report = pareto_json("topk-1-2c", storage)
    pick = report["recommendations"]["latency" if concurrency == 1 else "throughput"]
    versus = pick["versus_runner_up"]
    assert pick["number"] == 0 and versus["paired"] and versus["separated"] and versus["unit"] == check.first.unit
    # it pools the first machine's launches (3 and 2) and adds the second machine's pair (5 / 6)
    assert versus["launches"] == [4, 3] and versus["machines"] == 2

    def series(side: list) -> list[dict[str, float]]:
        return [level_series(t.record.bench.get(concurrency), metric)[0] for t in side]

    home = paired_ratio(series(a[:3]), series(b[:2]), check.spread, unit=check.first.unit)
    there = check.pairs[-1].comparison
    assert home is not None and min(home.ratio, there.ratio) <= versus["ratio"] <= max(home.ratio, there.ratio)
    assert math.log(versus["hi"] / versus["lo"]) < min(math.log(c.hi / c.lo) for c in (home, there))
    # and its notes name the spread its comparisons use, apart from the absolute figures' own
    [note] = [n for n in report["notes"] if n.startswith("comparisons (the x ratios) pair launches")]
    tau, _ = check.spread.shrunk()
    assert f"+-{tau:.1%} (1 sd) on {metric}@c{concurrency} (measured {check.spread.launch_sd():.1%} over 3 df)" in note


def test_history_at_the_measured_spread_brings_one_launch_each_towards_the_floor(tmp_path) -> None:
    """The same A B A B A records at C=1, one launch each judged with a history of other studies'
    relaunches at the tau these launches measured (docs/validation/2026-12-07-h100-history-depth.md):
    the interval narrows with every degree of freedom the history adds, alone and in the study; in
    the study, whose relaunches measured the per-request noise e, 40 df bring it within 1.3x the
    floor. Alone, the per-request differences stand in for e and keep it wider."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_topk_1_2c_h100.db.gz")
    a, b = paired_launches.launches_by_config(paired_launches.study_trials(storage, "topk-1-2c"))
    check = paired_launches.check_level(a, b, 1, "output_tok_s")
    assert check is not None
    tau = check.spread.launch_sd()
    by_depth = []
    for depth in (5, 10, 20, 40):
        deep = paired_launches.check_level(a, b, 1, "output_tok_s", history=paired_launches.SpreadHistory(tau, depth, 0))
        assert deep is not None
        by_depth.append([deep.one_each_over_floor(p)[1:] for p in deep.pairs])
    for pair in range(len(check.pairs)):
        for kind in (0, 1):  # alone, in the study
            series = [depth[pair][kind] for depth in by_depth]
            assert all(x is not None for x in series) and series == sorted(series, reverse=True), series
        alone, in_study = by_depth[-1][pair]
        assert in_study is not None and alone is not None and in_study <= 1.3 < alone


def test_the_default_study_continued_on_a_second_h100_pools_no_launch_across_machines(tmp_path) -> None:
    """real_8b_standalone_default_h100.db.gz's last 4 launches ran on a second H100 with the
    pair rebuilt there (docs/validation/2026-12-07-h100-grid-and-default-study-finished.md):
    the control (trial 9) and a confirmation (10) of the latency pick 6/1/7, which read 758 tok/s
    at C=1 on the first machine and 693-700 on the second."""
    report = pareto_json("real-8b-standalone-default", unpacked_storage(tmp_path, "real_8b_standalone_default_h100.db.gz"))
    latency = report["recommendations"]["latency"]
    assert latency["number"] == 4 and latency["launches"] == 1  # the confirmation on the second H100 is not pooled
    assert latency["value"]["value"] == pytest.approx(758.3, abs=0.1)
    (factor,) = [f for f in report["machines"] if f["objective"] == "output_tok_s@c1"]
    assert factor["control"] == 9 and factor["launches"] == [2, 1]  # that confirmation measures the factor with the control
    assert factor["hi"] < 1.0  # the second machine and its build read slower, beyond the interval
