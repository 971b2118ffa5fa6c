"""What the picks rest on and which relaunch settles them (`autospec.records.confirming`)."""

from __future__ import annotations

from autospec.metrics.relaunch import LaunchFigure
from autospec.records.confirming import (
    MAX_LAUNCHES,
    Contest,
    launches_disagree,
    launches_needed,
    next_confirmation,
    pick_objectives,
)
from autospec.records.launches import ObjectiveRef


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
