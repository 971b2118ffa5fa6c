"""`LaunchQueue`: how the run's launch policies are asked (`autospec.study.proposing.queue`).

Driven with toy policies on an in-memory study, so that the queue's own rules are what is
tested: the moments a policy acts at, START asking every policy once, the first plan
winning elsewhere, nothing asked while a trial waits, study flags, and lines logged once.
"""

from __future__ import annotations

from collections.abc import Sequence

import optuna

from autospec.records import Markers, StoredTrial, TrialStore, read_trials
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView
from autospec.study.proposing.queue import LaunchQueue


class Toy(LaunchPolicy):
    """Plans `plans` in turn at `moments` (None once they run out), recording every view."""

    def __init__(self, moments: set[Moment], plans: Sequence[Plan | None]) -> None:
        self.moments = frozenset(moments)
        self.plans = list(plans)
        self.views: list[StudyView] = []
        self.events: list[str] = []

    def next_launch(self, view: StudyView) -> Plan | None:
        self.views.append(view)
        return self.plans.pop(0) if self.plans else None

    def started(self, trials: Sequence[StoredTrial]) -> None:
        self.events.append(f"started {len(trials)}")

    def close(self) -> None:
        self.events.append("closed")


def make_queue(*policies: LaunchPolicy) -> tuple[LaunchQueue, TrialStore, list[str]]:
    study = optuna.create_study(directions=["maximize"])
    store = TrialStore(study, [True], [])
    lines: list[str] = []
    return LaunchQueue(policies, store, lines.append), store, lines


def one(x: int, markers: Markers | None = None) -> Plan:
    return Plan((({"x": x}, markers),), line=f"queued {x}")


def waiting_params(store: TrialStore) -> list[dict]:
    """The parameters of the queued trials, in queue order (Optuna keeps them as fixed params)."""
    waiting = store.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
    return [dict(t.system_attrs["fixed_params"]) for t in waiting]


def test_at_start_every_policy_is_asked_once_and_sees_what_the_one_before_queued():
    first = Toy({Moment.START}, [Plan((({"x": 1}, None), ({"x": 2}, None)), study_flag="first_done")])
    second = Toy({Moment.START}, [one(3)])
    later = Toy({Moment.ASK}, [one(9)])
    queue, store, lines = make_queue(first, second, later)

    assert queue.queue(Moment.START, [], 0)

    assert waiting_params(store) == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert len(first.views) == 1 and len(second.views) == 1 and later.views == []
    assert second.views[0].waiting == 2  # the trials the first one queued, read again
    assert second.views[0].attrs.get("first_done") is True
    assert lines == ["queued 3"]


def test_elsewhere_the_first_plan_wins_and_nothing_is_asked_while_a_trial_waits():
    declines = Toy({Moment.ASK}, [None, None])
    plans = Toy({Moment.ASK}, [one(1, Markers(retry_of=0)), one(2)])
    never = Toy({Moment.ASK}, [one(3)])
    queue, store, lines = make_queue(declines, plans, never)

    assert queue.queue(Moment.ASK, read_trials(store.study), 0)
    assert waiting_params(store) == [{"x": 1}] and never.views == []
    assert read_trials(store.study)[0].markers.retry_of == 0

    assert queue.queue(Moment.ASK, read_trials(store.study), 0)  # {"x": 1} still waits: nobody is asked
    assert len(declines.views) == 1 and len(plans.views) == 1
    assert waiting_params(store) == [{"x": 1}] and lines == ["queued 1"]


def test_a_moment_no_policy_plans_at_queues_nothing():
    queue, store, lines = make_queue(Toy({Moment.TURN}, [None]), Toy({Moment.LAUNCHED}, [one(1)]))

    assert queue.acts_at(Moment.TURN) and not queue.acts_at(Moment.NOTHING_LEFT)
    assert not queue.queue(Moment.TURN, [], 0)
    assert not queue.queue(Moment.NOTHING_LEFT, [], 0)
    assert waiting_params(store) == [] and lines == []


def test_a_plan_may_only_say_why_and_the_same_line_again_is_not_logged():
    note = Plan(line="not queued: no room")
    policy = Toy({Moment.TURN}, [note, note, Plan(line="first\nsecond")])
    queue, store, lines = make_queue(policy)

    for _ in range(3):
        assert not queue.queue(Moment.TURN, [], 0)

    assert waiting_params(store) == []
    assert lines == ["not queued: no room", "first", "second"]


def test_the_views_carry_the_moment_and_the_runs_count_and_events_reach_every_policy():
    a, b = Toy({Moment.LAUNCHED}, [None]), Toy({Moment.LAUNCHED}, [None])
    queue, _, _ = make_queue(a, b)

    queue.started([])
    queue.queue(Moment.LAUNCHED, [], 7)
    queue.close()

    assert [(v.moment, v.launched) for v in a.views + b.views] == [(Moment.LAUNCHED, 7)] * 2
    assert a.events == b.events == ["started 0", "closed"]
    assert queue.policy(Toy) is a


def test_a_plan_marked_first_goes_ahead_of_the_queue_with_its_markers_and_the_rest_keep_theirs():
    retry = Toy({Moment.START}, [Plan((({"x": 1}, Markers(retry_of=0)), ({"x": 2}, None)))])
    control = Toy({Moment.START}, [Plan((({"x": 5}, Markers(confirm_of=0, control="machine")),), first=True)])
    queue, store, _ = make_queue(retry, control)

    assert queue.queue(Moment.START, [], 0)

    assert waiting_params(store) == [{"x": 5}, {"x": 1}, {"x": 2}]
    markers = [t.markers for t in read_trials(store.study)]
    assert markers == [Markers(confirm_of=0, control="machine"), Markers(retry_of=0), Markers()]
    asked = store.study.ask()  # Optuna asks the lowest-numbered waiting trial first
    assert asked.suggest_int("x", 0, 9) == 5 and Markers.from_attrs(asked.user_attrs).control == "machine"
