"""The same server (`autospec.records.servers`): reference points are configurations, pooled
with the search trials that ran the same server, and named by the reference."""

from __future__ import annotations

import dataclasses

import optuna

from autospec.records import TrialClass, objective_groups, pareto_front
from autospec.records.launches import ObjectiveRef, pool_study
from autospec.records.schema import Markers, TrialRecord
from autospec.records.servers import launch_groups, launches_elsewhere, server_key
from autospec.records.stored import StoredTrial

REFS = [ObjectiveRef(0, "output_tok_s", 1), ObjectiveRef(1, "agg_output_tok_s", 32)]
BASE = {"model_path": "m", "speculative_algorithm": "EAGLE"}


def level(value: float, metric: str, n: int) -> dict:
    return {
        "n_ok": n,
        "prompt_tokens_mean": 64.0,
        "completion_tokens": 256 * n,
        metric: value,
        "cis": {metric: [value - 2, value + 2]},
    }


def launch(
    number: int, c1: float, c32: float, *, steps=3, mem=0.85, reference=None, confirm_of=None, slo=0.0, running=48
) -> StoredTrial:
    """A launch; a reference leaves steps and mem to SGLang, which logs what it chose."""
    shape = {"speculative_num_steps": steps, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": steps + 1}
    resolved = dict(BASE) if reference else {**BASE, **shape, "mem_fraction_static": mem}
    logged = {**shape, "mem_fraction_static": mem, "speculative_algorithm": "EAGLE"}
    record = TrialRecord(
        outcome="ok",
        candidate={} if reference else {**shape, "mem_fraction_static": mem},
        launched=True,
        resolved=resolved,
        startup={"max_running_requests": running, "max_total_num_tokens": 400_000, "logged_flags": logged},
        bench={1: level(c1, "output_tok_s", 8), 32: level(c32, "agg_output_tok_s", 64)},
        values=[c1, c32],
        constraints={"ttft@c32": slo} if slo else {},
    )
    if reference:
        kind = TrialClass.REFERENCE
    else:
        kind = TrialClass.RELAUNCH if confirm_of is not None else TrialClass.MEASURED
    params = {"autospec_reference": reference} if reference else {"speculative_num_steps": steps}
    return StoredTrial(
        number,
        number,
        optuna.trial.TrialState.COMPLETE,
        kind,
        params,
        (c1, c32),
        {"feasible": 0.0, **({"ttft@c32": slo} if slo else {})},
        record,
        Markers(reference=reference, confirm_of=confirm_of),
    )


def test_a_reference_and_the_search_trial_that_ran_the_same_server_are_one_configuration_named_by_the_reference():
    trials = [launch(0, 220.0, 1800.0), launch(1, 224.0, 1820.0, reference="sglang_defaults"), launch(2, 250.0, 1500.0, steps=4)]
    assert server_key(trials[0]) == server_key(trials[1])  # what the server logged fills what SGLang chose
    groups = launch_groups(trials)
    assert {n: [t.number for t in g] for n, g in groups.items()} == {1: [0, 1], 2: [2]}
    front = pareto_front(trials, [True, True], [1, 32])
    assert [t.number for t in front] == [1, 2] and front[0].markers.reference == "sglang_defaults"
    assert pool_study(trials, REFS).configurations[1][1].value == 1810.0  # the mean of both launches


def test_a_reference_that_differs_only_in_the_pool_size_pools_where_the_level_held_every_request():
    # the defaults' smaller pool queues requests at C=32 (17 run at once): another server there
    trials = [launch(0, 220.0, 1900.0, mem=0.92), launch(1, 224.0, 1800.0, reference="sglang_defaults", running=17)]
    assert set(launch_groups(trials)) == {0, 1}  # two configurations
    at_c1 = objective_groups(trials, 1)
    assert [t.number for t in at_c1[0]] == [0, 1] and at_c1[0] is at_c1[1]  # the same server at C=1
    assert [t.number for t in objective_groups(trials, 32)[1]] == [1]
    # C=1 pools into one figure, so the higher memory fraction's C=32 decides: the defaults are dominated
    assert [t.number for t in pareto_front(trials, [True, True], [1, 32])] == [0]


def test_a_relaunch_of_a_reference_joins_it_and_one_that_broke_an_slo_is_no_configuration():
    trials = [
        launch(0, 200.0, 5000.0, reference="no_speculation", steps=0),
        launch(1, 250.0, 2500.0, steps=4),
        launch(2, 204.0, 5100.0, reference="no_speculation", steps=0, confirm_of=0),
        launch(3, 100.0, 9000.0, reference="adaptive", steps=5, slo=3.0),
    ]
    groups = launch_groups(trials)
    assert {n: [t.number for t in g] for n, g in groups.items()} == {0: [0, 2], 1: [1]}
    assert [t.number for t in pareto_front(trials, [True, True], [1, 32])] == [0, 1]


def test_levels_that_are_not_objectives_pool_over_the_same_server_too():
    from autospec.records.launches import pool_levels

    trials = [launch(0, 220.0, 1900.0, mem=0.92), launch(1, 230.0, 1800.0, reference="sglang_defaults", running=17)]
    for t in trials:  # a C=1 aggregate figure, which no objective names
        t.record.bench[1]["agg_output_tok_s"] = t.record.values[0]
    levels = pool_levels(trials, ["agg_output_tok_s"])
    assert levels[0][("agg_output_tok_s", 1)].value == levels[1][("agg_output_tok_s", 1)].value == 225.0
    assert levels[1][("agg_output_tok_s", 32)].value == 1800.0  # queue-bound there: its own figure


def on(machine: str, t: StoredTrial) -> StoredTrial:
    return dataclasses.replace(t, worker={"host": "h", "machine": machine})


def test_a_server_is_one_configuration_across_machines_and_a_confirmation_pools_only_where_it_ran():
    # on the H100s of 2026-12-06: --remeasure relaunches of a configuration on a second machine became
    # a second front entry, and pareto named the same configuration its own runner-up; on 2026-12-07
    # a confirmation on the second machine pooled with a launch on the first, 0.92 apart
    trials = [
        on("h/GPU-1", launch(0, 727.0, 8000.0, steps=6)),
        on("h/GPU-1", launch(1, 658.0, 7100.0, steps=5)),
        on("h/GPU-1", launch(5, 730.0, 8100.0, steps=6, confirm_of=0)),  # a confirmation before the move
        on("h/GPU-2", launch(2, 692.0, 9400.0, steps=6)),  # a relaunch after the move
        on("h/GPU-2", launch(3, 600.0, 9000.0, steps=4)),  # a configuration measured only there
        on("h/GPU-2", launch(4, 650.0, 7200.0, steps=5, confirm_of=1)),  # a confirmation after it
        launch(6, 655.0, 7150.0, steps=5, confirm_of=1),  # a confirmation on an unrecorded machine
    ]
    groups = launch_groups(trials)
    assert {n: [t.number for t in g] for n, g in groups.items()} == {0: [0, 5], 1: [1, 6], 3: [3]}
    assert launches_elsewhere(trials, groups) == {2: 0, 4: 1}
    front = [t.number for t in pareto_front(trials, [True, True], [1, 32])]
    assert 2 not in front
