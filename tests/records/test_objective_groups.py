"""Configurations that ran the same server at a level pool their figures there
(`autospec.records.front.objective_groups`, `autospec.records.launches.pool_study`), and
the front, the contests and the report follow."""

from __future__ import annotations

import statistics

import optuna
import pytest

from autospec.cli.common import load_space
from autospec.records import TrialClass, objective_groups, pareto_front
from autospec.records.confirming import contests
from autospec.records.front import holds_level
from autospec.records.launches import ObjectiveRef, pool_study
from autospec.records.schema import Markers, TrialRecord
from autospec.records.stored import StoredTrial
from autospec.study.proposing.confirmations import ConfirmationPolicy

REFS = [ObjectiveRef(0, "output_tok_s", 1), ObjectiveRef(1, "agg_output_tok_s", 32)]
PROMPT, OUTPUT = 64, 256  # a level's requests: 64 prompt and 256 output tokens each


def level(c: int, value: float, metric: str, n: int = 8) -> dict:
    return {
        "n_ok": n,
        "prompt_tokens_mean": float(PROMPT),
        "completion_tokens": OUTPUT * n,
        metric: value,
        "cis": {metric: [value * 0.99, value * 1.01]},
    }


def launch(
    number: int, steps: int, mem: float, c1: float, c32: float, running: int = 48, pool: int = 400_000, confirm_of=None
) -> StoredTrial:
    """A measured launch (a relaunch of `confirm_of`) of steps / mem with its startup facts."""
    params = {"speculative_num_steps": steps, "mem_fraction_static": mem}
    record = TrialRecord(
        outcome="ok",
        candidate=params,
        launched=True,
        resolved={**params, "speculative_algorithm": "EAGLE", "port": 30000 + number},
        startup={"max_running_requests": running, "max_total_num_tokens": pool},
        bench={1: level(1, c1, "output_tok_s"), 32: level(32, c32, "agg_output_tok_s", n=64)},
        values=[c1, c32],
    )
    kind = TrialClass.RELAUNCH if confirm_of is not None else TrialClass.MEASURED
    return StoredTrial(
        number, number, optuna.trial.TrialState.COMPLETE, kind, params, (c1, c32), {}, record, Markers(confirm_of=confirm_of)
    )


def test_a_launch_holds_a_level_when_every_request_runs_at_once_with_room_for_its_tokens():
    assert holds_level(launch(0, 3, 0.8, 200.0, 2000.0), 32)
    assert not holds_level(launch(0, 3, 0.8, 200.0, 2000.0, running=21), 32)  # 11 requests queue
    assert not holds_level(launch(0, 3, 0.8, 200.0, 2000.0, pool=32 * (PROMPT + OUTPUT) - 1), 32)  # no room
    assert holds_level(launch(0, 3, 0.8, 200.0, 2000.0, running=21), 1)
    bare = launch(0, 3, 0.8, 200.0, 2000.0)
    assert not holds_level(StoredTrial(**{**bare.__dict__, "record": TrialRecord(outcome="ok", candidate={})}), 1)


def test_memory_only_variants_pool_where_the_pool_did_not_limit_the_level_and_stay_apart_where_it_did():
    trials = [
        launch(0, 3, 0.80, 200.0, 1500.0, running=17),  # queue-bound at C=32
        launch(1, 3, 0.90, 210.0, 1900.0),
        launch(2, 3, 0.85, 205.0, 1850.0),
        launch(3, 4, 0.80, 230.0, 1400.0),  # other steps: another server at every level
        launch(4, 3, 0.90, 208.0, 1910.0, confirm_of=1),
    ]
    at_c1, at_c32 = objective_groups(trials, 1), objective_groups(trials, 32)
    assert [t.number for t in at_c1[0]] == [0, 1, 2, 4] and at_c1[0] is at_c1[1] is at_c1[2]
    assert [t.number for t in at_c1[3]] == [3]
    assert [t.number for t in at_c32[0]] == [0]  # its launch queued at C=32: its own figure
    assert [t.number for t in at_c32[1]] == [1, 2, 4] and at_c32[1] is at_c32[2]
    assert [t.number for t in objective_groups(trials, None)[1]] == [1, 4]  # no level: its own launches

    pooled = pool_study(trials, REFS)
    c1 = pooled.configurations[0][0]
    assert c1 is not None and c1.launches == 4 and c1.value == pytest.approx(statistics.fmean([200, 210, 205, 208]))
    assert pooled.configurations[2][0] == c1  # one server at C=1: one figure
    assert pooled.sharing(0, 0) == (1, 2) and pooled.sharing(0, 1) == ()
    assert pooled.sharing(1, 1) == (2,)
    # the spread is measured once per pooled server, not once per configuration in it
    assert pooled.spread[0].df == 3 and pooled.spread[0].configurations == 1
    assert pooled.spread[1].df == 2 and pooled.spread[1].configurations == 1


def test_a_lower_memory_fraction_with_the_same_server_at_c1_and_less_throughput_leaves_the_front():
    """Alone, trial 0 reads 3% faster at C=1 than trial 1 (launch noise) and stays on the
    front; pooled with it at C=1 (the same server there) it is dominated by trial 1's
    throughput, and only trial 1 is left to recommend."""
    trials = [launch(0, 4, 0.84, 276.0, 1571.0, running=11), launch(1, 4, 0.92, 266.0, 1911.0, running=17)]
    assert {t.number for t in pareto_front(trials, [True, True])} == {0, 1}
    assert {t.number for t in pareto_front(trials, [True, True], [1, 32])} == {1}


def test_configurations_pooled_into_one_figure_are_one_member_of_a_contest():
    trials = [launch(0, 3, 0.80, 200.0, 1500.0, running=17), launch(1, 3, 0.90, 201.0, 1900.0), launch(2, 4, 0.8, 199.0, 1400.0)]
    latency = contests(trials, REFS, [True, True])[0]
    assert latency.objective == 0 and latency.leader == 0
    assert latency.contenders == (2,)  # trial 1 is the leader's own server at C=1, not its rival
    assert latency.launches[0] == 2  # the leader's figure rests on both launches
    assert latency.pooled_with == (1,)  # named beside the leader, as the report may name either
    _, line = ConfirmationPolicy(load_space("default"), [True, True], n_trials=20, confirm=5).summary(trials)
    assert "best at C=1: trial 0 (the same server as trial(s) 1) on 2 launch(es)" in line


def test_a_contest_counts_the_relaunches_of_every_configuration_in_its_members_figures():
    trials = [
        launch(0, 3, 0.80, 200.0, 1500.0, running=17),
        launch(1, 3, 0.90, 201.0, 1900.0),
        launch(2, 4, 0.8, 199.0, 1400.0),
        launch(3, 3, 0.90, 202.0, 1890.0, confirm_of=1),
    ]
    latency, throughput = contests(trials, REFS, [True, True])
    assert latency.leader == 0 and latency.relaunched == 1  # trial 1's relaunch measured the leader's server at C=1
    assert throughput.leader == 1 and throughput.relaunched == 1


def test_another_memory_fraction_of_a_server_that_held_every_level_is_not_proposed():
    """The model sampler leaves out what a launch surely repeats: a server that held every
    level runs the same batches with a larger pool and the same or fewer with a smaller one
    (simulated deepseek, seed 1: 6 of 20 launches went to such fractions of one server)."""
    from autospec.study.proposing.samplers import repeats_server

    held, queued = launch(0, 3, 0.8, 200.0, 2000.0), launch(1, 5, 0.8, 210.0, 1500.0, running=21)
    repeats = repeats_server([held, queued], [1, 32])
    assert repeats({"speculative_num_steps": 3, "mem_fraction_static": 0.7})
    assert repeats({"speculative_num_steps": 3, "mem_fraction_static": 0.9})
    assert not repeats({"speculative_num_steps": 4, "mem_fraction_static": 0.8})  # another server
    assert not repeats({"speculative_num_steps": 5, "mem_fraction_static": 0.9})  # it queued at C=32: a larger pool may not
    assert not repeats({"speculative_num_steps": 3})  # no memory fraction to vary
    assert not repeats_server([held], [])({"speculative_num_steps": 3, "mem_fraction_static": 0.9})
    # a server held to 16 running requests by the flag it was given, with room for their tokens:
    # its pool bound nothing at C=32 either; one whose pool set a lower cap than the flag did bind
    capped = _given(launch(2, 4, 0.8, 220.0, 1200.0, running=16, pool=16 * (PROMPT + OUTPUT)), 16)
    pool_bound = _given(launch(3, 6, 0.8, 220.0, 1200.0, running=15), 16)
    repeats = repeats_server([capped, pool_bound], [1, 32])
    assert repeats({"speculative_num_steps": 4, "mem_fraction_static": 0.9, "max_running_requests": 16})
    assert not repeats({"speculative_num_steps": 6, "mem_fraction_static": 0.9, "max_running_requests": 16})
    too_small = _given(launch(4, 4, 0.8, 220.0, 1200.0, running=16, pool=16 * (PROMPT + OUTPUT) - 1), 16)
    assert not repeats_server([too_small], [1, 32])(
        {"speculative_num_steps": 4, "mem_fraction_static": 0.9, "max_running_requests": 16}
    )


def _given(t: StoredTrial, running: int) -> StoredTrial:
    """`t` launched with `max_running_requests` = `running` among its tuned flags."""
    params = {**t.params, "max_running_requests": running}
    record = TrialRecord(**{**t.record.__dict__, "candidate": params})
    return StoredTrial(**{**t.__dict__, "params": params, "record": record})
