"""How infeasible trials are stored: every sampler sees them, none is on the front."""

from __future__ import annotations

import optuna
import pytest

from autospec.config import parse_search_space
from autospec.records import TrialRecord, TrialStore
from autospec.report import front_json, snapshot
from autospec.study import make_sampler

SPACE = parse_search_space(
    {
        "server": {"flags": {"model_path": "m"}},
        "params": {"speculative_num_steps": {"type": "int", "low": 1, "high": 8}},
        "constraints": [{"metric": "ttft_ms_p99", "concurrency": 32, "max": 2000}],
    }
)


def record(outcome, steps, values=None, launched=True, constraints=None):
    return TrialRecord(
        outcome,
        {"speculative_num_steps": steps},
        reason="" if outcome == "ok" else "why",
        launched=launched,
        values=values,
        constraints=constraints or {},
    )


def store_of(study):
    return TrialStore(study, [True, True], [c.name for c in SPACE.constraints])


@pytest.fixture
def study():
    s = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    s.set_metric_names(["output_tok_s@c1", "agg_output_tok_s@c32"])
    rows = [
        record("ok", 1, [100.0, 1500.0]),
        record("ok", 3, [230.0, 1900.0]),
        record("kv_pool_too_small", 8),  # failed at init
        record("rejected", 2, launched=False),  # SGLang would reject
        record("constraint_violated", 5, [300.0, 2500.0], constraints={"ttft_ms_p99@c32": 400.0}),  # measured, SLO broken
        record("duplicate", 3, [230.0, 1900.0], launched=False),
    ]
    for r in rows:
        trial = s.ask({"speculative_num_steps": optuna.distributions.IntDistribution(1, 8)})
        store_of(s).tell(trial, r)
    return s


def test_infeasible_trials_are_complete_with_violated_constraints_in_both_formats(study):
    t = study.trials
    assert all(x.state == optuna.trial.TrialState.COMPLETE for x in t)
    assert [x.constraints["feasible"] for x in t] == [0, 0, 1, 1, 0, 0]
    assert t[2].values == [0.0, 0.0]  # worst values: the measurement never happened
    # the old list-valued attribute optuna-dashboard 0.21.0 reads
    assert t[2].system_attrs["constraints"] == [1.0, 0.0]  # SLO never measured: neutral
    assert len({len(x.constraints) for x in t}) == 1  # same keys everywhere (GPSampler needs it)
    assert t[4].system_attrs["constraints"] == [0.0, 400.0]


def test_front_excludes_infeasible_and_duplicates_and_counts_them(study):
    out = front_json(snapshot(study))
    assert [row["number"] for row in out["front"]] == [1]  # trial 4 beats it but broke its SLO
    assert out["counts"]["measured"] == 2
    assert out["counts"]["infeasible"] == 3
    assert out["counts"]["duplicate"] == 1


@pytest.mark.parametrize("name", ["tpe", "gp", "nsga2", "random"])
def test_every_sampler_accepts_the_recorded_study(study, name):
    sampler = make_sampler(name, seed=1, n_objectives=2)
    s = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    for t in study.trials:
        s.add_trial(t)
    for _ in range(3):  # asking works with infeasible, constrained COMPLETE trials present
        trial = s.ask()
        steps = trial.suggest_int("speculative_num_steps", 1, 8)
        store_of(s).tell(trial, record("ok", steps, [1.0, 1.0]))
