"""What the picks rest on and which relaunch settles them (`autospec.records.confirming`)."""

from __future__ import annotations

import math
from dataclasses import replace

import optuna
import pytest

from autospec.metrics.relaunch import LaunchFigure, Pooled
from autospec.records import StoredTrial, TrialClass
from autospec.records.confirming import (
    MAX_LAUNCHES,
    Contest,
    _contest,
    contests,
    launches_disagree,
    launches_needed,
    next_confirmation,
    pick_objectives,
)
from autospec.records.launches import ObjectiveRef, PooledStudy


def contest(leader=1, contenders=(), launches=None, spread_known=False, close=False, objective=0) -> Contest:
    counts = {n: 1 for n in (leader, *contenders)}
    counts.update(launches or {})
    return Contest(objective, leader, tuple(contenders), None, counts, spread_known, close)


def test_a_lone_leader_on_one_launch_is_unsettled_until_relaunched_or_the_spread_is_known():
    assert not contest().settled and contest().wanting() == [1]
    assert contest(launches={1: 2}).settled
    assert contest(spread_known=True).settled  # its interval already includes the spread


def test_overlapping_contenders_keep_a_contest_open_until_each_reaches_the_launch_cap():
    open_ = contest(leader=1, contenders=(2, 3), launches={1: 2, 2: 1, 3: MAX_LAUNCHES}, spread_known=True)
    assert not open_.settled and not open_.tied
    assert open_.wanting() == [2, 1]  # fewest launches first; 3 is at the cap
    capped = contest(leader=1, contenders=(2,), launches={1: MAX_LAUNCHES, 2: MAX_LAUNCHES}, spread_known=True)
    assert capped.tied and capped.wanting() == []


def test_contenders_within_the_tie_margin_are_tied_once_each_rests_on_two_launches():
    near = contest(leader=1, contenders=(2,), launches={1: 2, 2: 2}, close=True)
    assert near.tied and near.wanting() == []
    assert contest(leader=1, contenders=(2,), launches={1: 2, 2: 1}, close=True).wanting() == [2]


def test_the_next_confirmation_is_the_least_launched_configuration_of_any_open_contest_leaders_first():
    latency = contest(leader=4, contenders=(7,), launches={4: 2, 7: 1}, objective=0)
    throughput = contest(leader=9, launches={9: 1}, objective=1)
    chosen = next_confirmation([latency, throughput], {0: "C=1", 1: "C=32"})
    assert chosen is not None and chosen.trial == 9 and "C=32" in chosen.reason
    assert next_confirmation([latency], {0: "C=1"}).trial == 7
    assert next_confirmation([contest(launches={1: 2})]) is None  # settled: nothing to do
    assert launches_needed([latency, throughput]) == 1 + 1 + 1  # 7 and 9 up to two launches; 4 once more


def test_pick_objectives_are_the_lowest_and_highest_concurrency():
    refs = [ObjectiveRef(0, "agg_output_tok_s", 32), ObjectiveRef(1, "output_tok_s", 1), ObjectiveRef(2, "x", 8)]
    assert pick_objectives(refs) == [1, 0]
    assert pick_objectives([ObjectiveRef(0, "output_tok_s", 1)]) == [0]


def test_launches_disagree_only_beyond_their_own_intervals():
    assert launches_disagree([LaunchFigure(100.0, 2.0), LaunchFigure(110.0, 2.0)])
    assert not launches_disagree([LaunchFigure(100.0, 8.0), LaunchFigure(110.0, 8.0)])
    assert not launches_disagree([LaunchFigure(100.0, None), LaunchFigure(200.0, None)])  # no intervals: cannot tell
    assert not launches_disagree([LaunchFigure(100.0, 1.0)])


def test_a_configuration_whose_relaunch_was_not_launched_is_not_chosen_again():
    open_ = contest(leader=4, contenders=(7,), launches={4: 1, 7: 1}, spread_known=True)
    assert next_confirmation([open_]).trial == 4
    assert next_confirmation([open_], exclude={4}).trial == 7
    assert next_confirmation([open_], exclude={4, 7}) is None


def test_among_equally_launched_contenders_the_one_closest_to_the_leader_is_relaunched_first():
    """Trial 3 is 1% below the leader, trial 2 is 9% below: relaunching 3 is likelier to
    overturn the pick, so it goes first although its number is higher."""
    figures = {
        1: [Pooled(100.0, 10.0, 2, 1.0, 9.9)],
        2: [Pooled(91.0, 10.0, 1, 1.0, 9.9)],
        3: [Pooled(99.0, 10.0, 1, 1.0, 9.9)],
    }
    standing = _contest(PooledStudy({}, figures), 0, maximize=True)
    assert standing is not None and standing.leader == 1 and set(standing.contenders) == {2, 3}
    assert standing.wanting() == [3, 2, 1]  # the leader has two launches already
    assert next_confirmation([standing]).trial == 3
    # fewer launches still come first, whatever the distance
    fewer = _contest(PooledStudy({}, {**figures, 3: [Pooled(99.0, 10.0, 2, 1.0, 9.9)]}), 0, maximize=True)
    assert fewer is not None and next_confirmation([fewer]).trial == 2
    # minimising: the distance is the same either way round
    low = _contest(PooledStudy({}, {1: [Pooled(50.0, 5.0, 1, 1.0, 4.9)], 2: [Pooled(54.0, 5.0, 1, 1.0, 4.9)]}), 0, False)
    assert low is not None and low.leader == 1 and low.distance[2] == pytest.approx(4.0 / math.hypot(5.0, 5.0))


def test_among_equally_launched_contenders_the_runner_up_is_relaunched_before_a_closer_one():
    """Trial 3 (99, narrow) is the runner-up the pick's sentence compares with; trial 2 (98,
    a wide interval) is closer in units of their combined half-widths. The runner-up goes
    first, so the comparison the report states is the one the next launch settles."""
    figures = {
        1: [Pooled(100.0, 10.0, 2, 1.0, 9.9)],
        2: [Pooled(98.0, 40.0, 1, 1.0, 9.9)],
        3: [Pooled(99.0, 2.0, 1, 1.0, 9.9)],
    }
    standing = _contest(PooledStudy({}, figures), 0, maximize=True)
    assert standing is not None and standing.runner_up == 3
    assert standing.distance[2] < standing.distance[3]
    assert standing.wanting() == [3, 2, 1]
    assert next_confirmation([standing]).trial == 3
    # once the runner-up has more launches, the fewest launches come first again
    ahead = _contest(PooledStudy({}, {**figures, 3: [Pooled(99.0, 2.0, 2, 1.0, 9.9)]}), 0, maximize=True)
    assert ahead is not None and next_confirmation([ahead]).trial == 2


def test_the_contests_take_turns_so_one_picks_near_ties_do_not_take_every_confirmation():
    """The latency contest has three contenders on one launch each, the throughput contest
    one on two launches: the least launched would always be a latency contender; once the
    latency contest got a relaunch more than the throughput contest, the throughput
    contest's turn comes."""
    latency = contest(leader=1, contenders=(2, 3, 4), launches={1: 2}, objective=0, spread_known=True)
    throughput = contest(leader=5, contenders=(6,), launches={5: 2, 6: 2}, objective=1, spread_known=True)
    assert next_confirmation([latency, throughput]).trial == 2
    turned = replace(latency, relaunched=1)
    chosen = next_confirmation([turned, throughput], {0: "C=1", 1: "C=32"})
    assert chosen is not None and chosen.trial == 5 and "C=32" in chosen.reason
    assert next_confirmation([turned, replace(throughput, relaunched=1)]).trial == 2


def _stream(n: int, factor: float, shift: float = 0.0) -> dict[str, float]:
    """One launch's per-request speeds: the same 15% per-request effect in every launch."""
    import random

    rng = random.Random(11)
    return {f"{i}.0": factor * math.exp(shift) * 300 * math.exp(rng.gauss(0, 0.15)) for i in range(n)}


def _paired_study(launches: int, log_spread):
    from autospec.metrics.paired import Side

    a = tuple(_stream(14, 1.06, shift) for shift in (0.0, 0.004)[:launches])
    b = tuple(_stream(14, 1.0, shift) for shift in (0.0, -0.004)[:launches])
    figures = {1: [Pooled(318.0, 30.0, launches, 30.0, None)], 2: [Pooled(300.0, 30.0, launches, 30.0, None)]}
    sides = {1: [Side(318.0, 30.0, launches, a)], 2: [Side(300.0, 30.0, launches, b)]}
    return PooledStudy({}, figures, log_spread=log_spread, sides=sides)


def test_confirmation_stops_once_the_paired_interval_excludes_1():
    """A 6% lead over one launch each: the unpaired intervals (+-10%) overlap, and the paired
    ratio's interval still holds 1 while only the prior says how launches spread; once
    relaunches measured a small spread, the paired interval excludes 1 and the contest is
    settled: no further confirmation."""
    from autospec.metrics.paired import LogSpread

    first = _contest(_paired_study(1, {}), 0, maximize=True)
    assert first is not None and first.paired and first.contenders == (2,)
    assert first.versus[2].lo < 1.0 < first.versus[2].hi
    assert not first.settled and next_confirmation([first]) is not None
    later = _contest(_paired_study(2, {0: LogSpread(0.005, 10, 5)}), 0, maximize=True)
    assert later is not None and later.versus[2].lo > 1.0 and later.versus[2].paired
    assert later.contenders == () and later.settled
    assert next_confirmation([later]) is None


def test_a_paired_separation_settles_a_pick_on_one_launch_where_unpaired_it_would_not():
    from autospec.metrics.paired import Side

    far = {f"{i}.0": 200.0 * (1 + i % 3 * 0.2) for i in range(20)}
    near = {k: v / 1.3 for k, v in far.items()}
    figures = {1: [Pooled(260.0, 50.0, 1, 50.0, None)], 2: [Pooled(200.0, 50.0, 1, 50.0, None)]}
    paired = PooledStudy({}, figures, sides={1: [Side(260.0, 50.0, 1, (far,))], 2: [Side(200.0, 50.0, 1, (near,))]})
    standing = _contest(paired, 0, maximize=True)
    assert standing is not None and standing.settled and standing.versus[2].separated
    unpaired = _contest(PooledStudy({}, figures), 0, maximize=True)
    assert unpaired is not None and not unpaired.paired and unpaired.contenders == (2,)  # +-50 each: they overlap


def _launch(number: int, steps: int, machine: str, speed: float, **markers) -> StoredTrial:
    """A launch of `steps` on `machine` at C=1: 12 requests whose speeds spread 30% (the same
    in every launch) times `speed`, a 95% interval of +-1% around the mean."""
    from autospec.records import Markers, TrialRecord

    speeds = {f"r{i}": speed * (0.85 + 0.025 * i) for i in range(12)}
    value = sum(speeds.values()) / len(speeds)
    level = {"concurrency": 1, "output_tok_s": value, "cis": {"output_tok_s": [0.99 * value, 1.01 * value]}}
    level["request_speeds"] = speeds
    params = {"speculative_num_steps": steps}
    record = TrialRecord(outcome="ok", candidate=params, launched=True, values=[value], bench={1: level})
    return StoredTrial(
        number=number,
        trial_id=number,
        state=optuna.trial.TrialState.COMPLETE,
        trial_class=TrialClass.RELAUNCH if markers.get("confirm_of") is not None else TrialClass.MEASURED,
        params=params,
        values=(value,),
        constraints={},
        record=record,
        markers=Markers(**markers),
        worker={"host": machine.split("/")[0], "machine": machine},
    )


def test_a_contest_across_two_machines_compares_through_the_control_and_never_separates_without_one():
    """Steps 3 measured 100 on machine a; the study moved to machine b, 10% faster, whose
    control relaunch of steps 3 read 110, and measured steps 4 there at 110.5. Read raw, steps 4
    leads by 10.5% and steps 3 is out of the contest; through the machine factor the two are
    0.5% apart and steps 3 stays a contender. Without the control nothing joins the machines:
    the comparison is unjoined and decides nothing."""
    refs = [ObjectiveRef(0, "output_tok_s", 1)]
    a, b = "host-a/GPU-1", "host-b/GPU-2"
    first, later = _launch(0, 3, a, 100.0), _launch(2, 4, b, 110.5)
    control = _launch(1, 3, b, 110.0, control="machine", confirm_of=0)
    joined = contests([first, control, later], refs, [True])[0]
    assert joined.leader == 2 and 0 in joined.contenders
    through = joined.versus[0]
    assert through.factors == 1 and not through.separated and through.ratio == pytest.approx(110.5 / 110.0)
    raw = contests([first, replace(later, number=1, trial_id=1)], refs, [True])[0].versus[0]
    assert raw.unjoined and not raw.separated and raw.ratio == pytest.approx(1.105)
    same_machine = contests([first, replace(later, number=1, trial_id=1, worker={"host": "host-a", "machine": a})], refs, [True])
    assert same_machine[0].versus[0].separated and same_machine[0].contenders == ()  # on one machine 10.5% is clear
