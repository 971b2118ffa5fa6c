"""The trial record: round trips through Optuna attributes, the one classification, the
one Pareto front, and the one writer."""

from __future__ import annotations

import dataclasses

import optuna
import pytest

from autospec.records import (
    SCHEMA_VERSION,
    Markers,
    TrialClass,
    TrialRecord,
    TrialStore,
    dominates,
    pareto_front,
    read_trials,
)

DIST = {"x": optuna.distributions.IntDistribution(0, 9)}


def full_record(**changes) -> TrialRecord:
    base = dict(
        outcome="ok",
        candidate={"speculative_num_steps": 3},
        reason="",
        launched=True,
        resolved={"speculative_num_steps": 3, "speculative_num_draft_tokens": 4},
        server_args=["python", "-m", "sglang.launch_server"],
        startup={"max_running_requests": 21},
        bench={1: {"output_tok_s": 200.0}, 32: {"agg_output_tok_s": 1800.0}},
        seconds={"launch": 70.25, "total": 80.5},
        teardown={"signal_sent": "TERM"},
        values=[200.0, 1800.0],
        constraints={"ttft_ms_p99@c32": -10.0},
        log_path="/tmp/x/server.log",
        intervals={"agg_output_tok_s@c32": {"value": 1800.0, "ci95": [1700.0, 1900.0], "method": "short-window"}},
    )
    base.update(changes)
    return TrialRecord(**base)


def test_a_record_round_trips_through_user_attributes():
    record = full_record()
    attrs = record.to_attrs()
    assert attrs["schema"] == SCHEMA_VERSION and attrs["bench"] == {
        "1": {"output_tok_s": 200.0},
        "32": {"agg_output_tok_s": 1800.0},
    }
    assert TrialRecord.from_attrs(attrs, [200.0, 1800.0], {"ttft_ms_p99@c32": -10.0}) == record


def test_values_of_a_record_that_measured_nothing_are_not_read_back():
    attrs = full_record(outcome="kv_pool_too_small", values=None, constraints={}).to_attrs()
    read = TrialRecord.from_attrs(attrs, [0.0, 0.0], {"ttft_ms_p99@c32": 0.0})
    assert read is not None and read.values is None and read.constraints == {} and not read.feasible


def test_attributes_without_an_outcome_hold_no_record_and_markers_round_trip():
    assert TrialRecord.from_attrs({"baseline": True}) is None
    markers = Markers(baseline=True, mem_push=0, retry_of=4, imported={"key": "k"})
    assert Markers.from_attrs(markers.to_attrs()) == markers
    assert Markers().to_attrs() == {}


def test_schema_1_attributes_read_the_same():
    """Attributes written before versioning (no `schema` key) are the same keys."""
    attrs = full_record().to_attrs()
    del attrs["schema"]
    assert TrialRecord.from_attrs(attrs, [200.0, 1800.0], {"ttft_ms_p99@c32": -10.0}) == full_record()


@pytest.fixture
def study():
    s = optuna.create_study(directions=["maximize", "minimize"])
    store = TrialStore(s, [True, False], ["ttft_ms_p99@c32"])
    rows = [
        full_record(values=[100.0, 50.0]),  # 0 front
        full_record(values=[200.0, 60.0]),  # 1 front
        full_record(values=[90.0, 70.0]),  # 2 dominated by 0
        full_record(outcome="kv_pool_too_small", values=None, constraints={}),  # 3 infeasible
        full_record(
            outcome="constraint_violated", values=[300.0, 10.0], constraints={"ttft_ms_p99@c32": 5.0}
        ),  # 4 infeasible, measured
        full_record(outcome="duplicate", launched=False, values=[200.0, 60.0], duplicate_of=1),  # 5 duplicate
        full_record(outcome="rejected", launched=False, values=None, constraints={}),  # 6 infeasible
    ]
    for i, r in enumerate(rows):
        trial = s.ask(DIST)
        trial.suggest_int("x", 0, 9)
        store.tell(trial, dataclasses.replace(r, resolved={**r.resolved, "speculative_num_steps": i}))  # 7 servers
    failed = s.ask(DIST)
    store.tell_failed(failed, full_record(outcome="interrupted", values=None, constraints={}))  # 7
    store.enqueue({"x": 1}, Markers(retry_of=7))  # 8 waiting
    return s


def test_every_trial_gets_exactly_one_class(study):
    classes = [t.trial_class for t in read_trials(study)]
    assert classes == [
        TrialClass.MEASURED,
        TrialClass.MEASURED,
        TrialClass.MEASURED,
        TrialClass.INFEASIBLE,
        TrialClass.INFEASIBLE,
        TrialClass.DUPLICATE,
        TrialClass.INFEASIBLE,
        TrialClass.INTERRUPTED,
        TrialClass.RUNNING,
    ]
    trials = read_trials(study)
    assert [t.has_measurement for t in trials][:7] == [True, True, True, False, True, False, False]
    assert [t.counts_as_launch for t in trials] == [True] * 5 + [False] * 4
    assert trials[8].markers.retry_of == 7 and trials[8].record is None


def test_the_writer_stores_both_constraint_forms_and_worst_values_for_infeasible_trials(study):
    t = study.trials
    assert [x.constraints["feasible"] for x in t[:7]] == [0, 0, 0, 1, 0, 0, 1]
    assert t[3].values == [0.0, 1e6]  # worst: 0 for the maximised, large for the minimised objective
    assert t[3].system_attrs["constraints"] == [1.0, 0.0]  # the list optuna-dashboard 0.21.0 reads
    assert t[4].system_attrs["constraints"] == [0.0, 5.0]
    assert len({len(x.constraints) for x in t[:7]}) == 1


def test_the_front_is_the_measured_trials_nobody_dominates(study):
    front = pareto_front(read_trials(study), [True, False])
    assert [t.number for t in front] == [0, 1]  # 4 beats both but broke its SLO; 5 ties 1 but is a copy


@pytest.mark.parametrize(
    "a, b, maximize, expected",
    [
        ([2, 1], [1, 1], [True, True], True),
        ([1, 1], [1, 1], [True, True], False),  # equal: no one dominates
        ([2, 2], [1, 1], [True, False], False),  # better on one, worse on the other
        ([2, 0], [1, 1], [True, False], True),
    ],
)
def test_dominance_respects_directions(a, b, maximize, expected):
    assert dominates(a, b, maximize) is expected


def test_a_tell_racing_another_process_that_ends_the_trial_keeps_that_processs_record(tmp_path, monkeypatch):
    """Recovery on another worker may end a trial (judging its tuner gone) while its tuner
    writes the result: the tell must not crash, and says what the trial holds now."""
    url = f"sqlite:///{tmp_path}/s.db"
    mine = optuna.create_study(storage=url, study_name="s", directions=["maximize", "minimize"])
    store = TrialStore(mine, [True, False], ["ttft_ms_p99@c32"])
    other = TrialStore(optuna.load_study(study_name="s", storage=url), [True, False], ["ttft_ms_p99@c32"])
    stale = full_record(outcome="stale", values=None, constraints={})
    trial = mine.ask(DIST)
    writes = []
    write = mine._storage.set_trial_user_attr

    def interleaved(trial_id, key, value):
        writes.append(key)
        if len(writes) == 2:  # the other process ends the trial between two of our writes
            (running,) = other.read(states=(optuna.trial.TrialState.RUNNING,))
            assert other.end(running, stale)
        write(trial_id, key, value)

    monkeypatch.setattr(mine._storage, "set_trial_user_attr", interleaved)
    stored = store.tell(trial, full_record())
    assert len(writes) == 2 and stored.outcome == "stale" and stored.state == optuna.trial.TrialState.FAIL

    ended_first = mine.ask(DIST)  # ended before the tell began: left as it is
    (running,) = other.read(states=(optuna.trial.TrialState.RUNNING,))
    assert other.end(running, stale)
    assert store.tell_failed(ended_first, full_record(outcome="interrupted")).outcome == "stale"
