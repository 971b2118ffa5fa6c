"""A control relaunch across machines and hours (`autospec.study.proposing.control`) and the
machine factor it measures (`autospec.records.machines`)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math

import optuna
import pytest

from autospec.cli.main import main
from autospec.config import parse_search_space
from autospec.metrics.paired import Comparison, compare
from autospec.records import Markers, StoredTrial, TrialClass, TrialRecord, TrialStore, read_trials
from autospec.records.machines import MachineFactor, between_machines, machine_key, machine_of, through_factor
from autospec.report.data import snapshot
from autospec.report.support import versus_text
from autospec.sim import machine_factor
from autospec.sim.profile import load_profile
from autospec.study.processes.recovery import requeue
from autospec.study.proposing.control import ControlPolicy
from autospec.study.proposing.policy import Moment, StudyView
from simspace import sim_space_text

from .conftest import SIM_ARGS

_C = optuna.trial.TrialState.COMPLETE
_T0 = datetime.datetime(2026, 12, 4, 9, 0)
SPACE = parse_search_space(
    {
        "server": {"flags": {"model_path": "m", "speculative_algorithm": "NGRAM"}},
        "params": {"speculative_num_draft_tokens": {"type": "int", "low": 2, "high": 8}},
        "objectives": [{"metric": "output_tok_s", "concurrency": 1}],
        "bench": {"concurrency": [1]},
    }
)


def _measured(number: int, value: float, machine: str, finished: datetime.datetime) -> StoredTrial:
    params = {"speculative_num_draft_tokens": number + 2}
    record = TrialRecord(outcome="ok", candidate=params, launched=True, values=[value])
    return StoredTrial(
        number=number,
        trial_id=number,
        state=_C,
        trial_class=TrialClass.MEASURED,
        params=params,
        values=(value,),
        constraints={},
        record=record,
        markers=Markers(),
        worker={"host": machine.split("/")[0], "machine": machine},
        finished=finished,
    )


def _plan(policy: ControlPolicy, trials: list[StoredTrial]):
    return policy.next_launch(StudyView(Moment.START, trials, 0, dict))


TRIALS = [_measured(0, 100.0, "a/GPU-1", _T0), _measured(1, 120.0, "a/GPU-1", _T0 + datetime.timedelta(hours=1))]


def test_no_control_when_machine_and_hour_are_unchanged():
    policy = ControlPolicy(SPACE, [True], "a/GPU-1", 6.0, now=lambda: _T0 + datetime.timedelta(hours=3))
    assert _plan(policy, TRIALS) is None
    unknown = ControlPolicy(SPACE, [True], None, 6.0, now=lambda: _T0 + datetime.timedelta(hours=3))
    assert _plan(unknown, TRIALS) is None  # a run that cannot name its machine compares none
    assert _plan(policy, []) is None  # nothing measured: nothing to control


def test_a_pause_longer_than_the_threshold_queues_one_control_of_the_latency_pick():
    late = _T0 + datetime.timedelta(hours=1 + 6.5)
    plan = _plan(ControlPolicy(SPACE, [True], "a/GPU-1", 6.0, now=lambda: late), TRIALS)
    assert plan is not None and len(plan.trials) == 1
    params, markers = plan.trials[0]
    assert markers == Markers(confirm_of=1, control="pause") and params == TRIALS[1].params  # trial 1 is the pick
    assert "pause of over 6 h" in plan.line
    longer = ControlPolicy(SPACE, [True], "a/GPU-1", 8.0, now=lambda: late)
    assert _plan(longer, TRIALS) is None  # the threshold is the configured one


def test_another_machine_queues_a_control_and_none_while_one_is_queued():
    policy = ControlPolicy(SPACE, [True], "b/GPU-2", 6.0, now=lambda: _T0 + datetime.timedelta(hours=2))
    plan = _plan(policy, TRIALS)
    assert plan is not None and plan.trials[0][1] == Markers(confirm_of=1, control="machine")
    queued = StoredTrial(
        number=2,
        trial_id=2,
        state=optuna.trial.TrialState.WAITING,
        trial_class=TrialClass.RUNNING,
        params=dict(TRIALS[1].params),
        values=None,
        constraints={},
        record=None,
        markers=Markers(confirm_of=1, control="machine"),
    )
    assert _plan(policy, [*TRIALS, queued]) is None


def test_an_interrupted_control_is_queued_again_as_the_control_and_no_second_one_is_added():
    """A control stopped mid-launch (the device's time ran out) is retried as the control: the
    grid study of 2026-12-07 got a second control beside a retry that had lost its marker."""
    study = optuna.create_study(directions=["maximize"])
    store = TrialStore(study, [True], [])
    store.enqueue(dict(TRIALS[1].params), Markers(confirm_of=1, control="machine"))
    store.tell_failed(study.ask(), TrialRecord(outcome="interrupted", candidate=dict(TRIALS[1].params), reason="stopped"))
    [stopped] = read_trials(study)
    assert requeue(store, stopped, [stopped])
    again = read_trials(study)[1]
    assert again.markers.retry_of == 0 and again.markers.confirm_of == 1 and again.markers.control == "machine"
    policy = ControlPolicy(SPACE, [True], "b/GPU-2", 6.0, now=lambda: _T0 + datetime.timedelta(hours=2))
    assert _plan(policy, [*TRIALS, again]) is None


def _read(tmp_path, name):
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'studies' / name}.db")
    return read_trials(study)


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_the_control_after_a_machine_change(tmp_path, monkeypatch, capsys):
    """A --sim study run on machine gamma and continued on xi relaunches its latency pick
    first; pareto reads the machine factor close to the simulator's own ratio of the two."""
    space = tmp_path / "space.toml"
    space.write_text(sim_space_text().replace("min_requests = 2", "min_requests = 20"))
    studies = str(tmp_path / "studies")
    args = ["optimize", "--space", str(space), "--study", "ctl", "--studies-dir", studies, "--seed", "3", *SIM_ARGS]
    args += ["--no-references", "--confirm", "0"]
    monkeypatch.setenv("AUTOSPEC_HOST", "host-a")
    monkeypatch.setenv("AUTOSPEC_SIM_MACHINE", "gamma")
    assert main([*args, "--trials", "3"]) == 0
    first = _read(tmp_path, "ctl")
    assert {machine_of(t) for t in first if t.launched} == {"host-a/sim:gamma"}
    assert not any(t.markers.control for t in first)
    pick = max((t for t in first if t.has_measurement), key=lambda t: t.record.values[0])
    # An interrupted run left a retry queued (as on the H100 on 2026-12-06): the control still goes first.
    other = next(t for t in first if t.has_measurement and t.number != pick.number)
    storage = f"sqlite:///{tmp_path / 'studies' / 'ctl'}.db"
    queued = optuna.load_study(study_name="ctl", storage=storage)
    queued.enqueue_trial(dict(other.params), user_attrs=Markers(retry_of=other.number).to_attrs())

    monkeypatch.setenv("AUTOSPEC_HOST", "host-b")
    monkeypatch.setenv("AUTOSPEC_SIM_MACHINE", "xi")
    assert main([*args, "--trials", "5"]) == 0
    trials = _read(tmp_path, "ctl")
    new = [t for t in trials if t.number >= len(first)]
    control = new[0]  # the first launch on the new machine is the control
    assert control.markers.control == "machine" and control.has_measurement
    assert machine_of(control) == "host-b/sim:xi"
    assert control.markers.confirm_of == pick.number and control.candidate == pick.candidate
    retry = new[1]  # then the queue as it was
    assert retry.markers == Markers(retry_of=other.number) and retry.params == other.params
    assert sum(1 for t in trials if t.counts_as_launch) == 5  # counted in --trials

    # Nothing changed since: no second control.
    assert main([*args, "--trials", "6"]) == 0
    assert sum(1 for t in _read(tmp_path, "ctl") if t.markers.control) == 1

    capsys.readouterr()
    assert main(["pareto", "--study", "ctl", "--studies-dir", studies, "--json"]) == 0
    factors = json.loads(capsys.readouterr().out)["machines"]
    latency = [f for f in factors if f["objective"] == "output_tok_s@c1"]
    assert len(latency) == 1
    f = latency[0]
    assert (f["new"], f["old"], f["control"]) == ("host-b/sim:xi", "host-a/sim:gamma", control.number)
    sigma = load_profile(None).machine_sigma
    truth = machine_factor("gamma", sigma) / machine_factor("xi", sigma)  # a step-time factor: speed is its inverse
    # The simulator's ratio is 1.29 (the profile's machines spread by 5%; these two lie far
    # apart, so that the check below tells the factor from none). Paired over 20 requests the
    # intervals are +-7% (each request's accepted tokens are drawn anew in every launch), and
    # the simulator keeps real time, so a loaded machine adds its own lag: with three runs at
    # once on 2 cores, 12 runs read 1.22-1.41; CI once read +10% on machines 1.13 apart.
    assert f["paired"] and 1.0 < f["lo"] < f["ratio"] < f["hi"]
    assert abs(math.log(f["ratio"] / truth)) < 0.15, (f, truth)
    assert main(["pareto", "--study", "ctl", "--studies-dir", studies]) == 0
    text = " ".join(capsys.readouterr().out.split())  # pareto wraps its lines
    line = f"machine host-b/sim:xi over machine host-a/sim:gamma, from the control trial {control.number}:"
    assert line in text
    assert f"x{f['ratio']:.3f} ({f['lo']:.3f}-{f['hi']:.3f}) at output_tok_s@c1" in text
    assert " at agg_output_tok_s@c" in text.split(line)[1]  # every objective's factor
    # A configuration measured only on the new machine is compared with the pick through the factor.

    data = snapshot(optuna.load_study(study_name="ctl", storage=f"sqlite:///{tmp_path / 'studies' / 'ctl'}.db"))
    views = {t.number: t for t in data.trials}
    later = next(t for t in new if t.has_measurement and not t.markers.control and t.number in data.pooled.launches)
    raw = compare(data.side(views[later.number], 0), data.side(views[pick.number], 0), data.pooled.log_spread.get(0))
    factor = data.machines[0][0].comparison
    seen = data.compare(views[later.number], views[pick.number], 0)
    assert seen == through_factor(raw, factor) and seen.ratio == pytest.approx(raw.ratio / factor.ratio)
    assert seen.hi / seen.lo > raw.hi / raw.lo  # the factor's uncertainty widens it
    assert "launches, through 1 machine factor)" in versus_text(data, views[later.number], views[pick.number], 0, 1)
    # without the control's factor, nothing joins the two machines: the ratio holds their
    # difference, so it is reported but decides nothing
    apart = dataclasses.replace(data, machines={})
    unjoined = apart.compare(views[later.number], views[pick.number], 0)
    assert unjoined is not None and unjoined.unjoined and not unjoined.separated and unjoined.ratio == raw.ratio
    assert unjoined.as_dict()["unjoined"] is True and unjoined.inverse().unjoined
    said = versus_text(apart, views[later.number], views[pick.number], 0, 1)
    assert said.endswith("not decided, measured on two machines no control relaunch joins, so their difference is in it")


def test_workers_of_one_study_at_once_are_not_a_continuation():
    running = StoredTrial(
        number=2,
        trial_id=2,
        state=optuna.trial.TrialState.RUNNING,
        trial_class=TrialClass.RUNNING,
        params={"speculative_num_draft_tokens": 7},
        values=None,
        constraints={},
        record=None,
        markers=Markers(),
        worker={"host": "a", "machine": "a/GPU-1"},
    )
    policy = ControlPolicy(SPACE, [True], "b/GPU-2", 6.0, now=lambda: _T0 + datetime.timedelta(hours=2))
    assert _plan(policy, [*TRIALS, running]) is None


def test_a_comparison_across_machines_divides_by_the_factor_and_widens_by_its_interval():

    assert machine_key("h", ("GPU-1", "GPU-2")) == "h/GPU-1,GPU-2" and machine_key("h") == "h"
    raw = Comparison(ratio=1.10, lo=1.10 / 1.02, hi=1.10 * 1.02, matched=12, dropped=0, launches=(1, 1), paired=True)
    factor = Comparison(ratio=1.05, lo=1.05 / 1.02, hi=1.05 * 1.02, matched=12, dropped=0, launches=(1, 1), paired=True)
    seen = through_factor(raw, factor)
    assert seen.ratio == pytest.approx(1.10 / 1.05)
    assert math.log(seen.hi / seen.ratio) == pytest.approx(math.hypot(math.log(1.02), math.log(1.02)))
    assert seen.lo < seen.ratio < seen.hi and seen.factors == 1 and seen.as_dict()["factors"] == 1


def _factor(new: str, old: str, ratio: float, control: int, half: float = 1.02) -> MachineFactor:
    c = Comparison(ratio=ratio, lo=ratio / half, hi=ratio * half, matched=12, dropped=0, launches=(1, 1), paired=True)
    return MachineFactor(new, old, control, 0, c)


def test_machines_no_control_joined_directly_compare_through_a_chain_of_factors():
    """A study that moved A -> B -> C -> D over four sessions: D over A is the product of the
    steps between, each step's log half-width in quadrature; read backwards it is the inverse."""
    factors = [_factor("B", "A", 1.05, 3), _factor("C", "B", 0.90, 7), _factor("D", "C", 1.10, 9, half=1.04)]
    d_over_a = between_machines(factors, "D", "A")
    assert d_over_a is not None and d_over_a.ratio == pytest.approx(1.05 * 0.90 * 1.10)
    half = math.sqrt(2 * math.log(1.02) ** 2 + math.log(1.04) ** 2)
    assert math.log(d_over_a.hi / d_over_a.ratio) == pytest.approx(half)
    assert d_over_a.factors == 3 and through_factor(d_over_a, factors[0].comparison).factors == 4
    a_over_d = between_machines(factors, "A", "D")
    assert a_over_d is not None and a_over_d.ratio == pytest.approx(1 / d_over_a.ratio)
    assert a_over_d.hi == pytest.approx(1 / d_over_a.lo)
    # a direct factor is used as it is; the latest control of a pair, read either way, decides
    direct = between_machines(factors, "C", "B")
    assert direct is not None and (direct.ratio, direct.lo, direct.factors) == (0.90, factors[1].comparison.lo, 1)
    later = [*factors, _factor("B", "C", 1.2, 11)]
    c_over_b = between_machines(later, "C", "B")
    assert c_over_b is not None and c_over_b.ratio == pytest.approx(1 / 1.2)
    # no chain, or the same machine: nothing to divide by
    assert between_machines(factors, "E", "A") is None and between_machines(factors, "A", "A") is None
    assert between_machines([], "B", "A") is None
