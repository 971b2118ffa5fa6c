"""Confirmation launches within the budget (`ConfirmationPolicy`, the
study loop): they go to what the picks depend on, stop once the picks are separated,
count towards ``--trials``, and a resumed study repeats none of them. Driven with a
scripted chain whose figures carry 95% intervals, on Optuna's in-memory storage."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
import pytest

from autospec.config import parse_search_space, tomllib
from autospec.launcher import Launcher
from autospec.records import TrialRecord, read_trials
from autospec.study import OptimizeRequest, StopReason, StudyInterrupted, build_run
from autospec.study.proposing.confirmations import ConfirmationPolicy
from autospec.study.run import StudyRun
from autospec.study.storage import StorageHandle
from simspace import scripted_space_text

SPACE = parse_search_space(tomllib.loads(scripted_space_text(4)), source="test")

HALF_C1, HALF_C4 = 15.0, 20.0  # each launch's 95% half-width


class FiguresChain:
    """Measures configuration `steps` as `figures[steps]` = (C=1 tok/s, C=4 tok/s), the
    same on every launch, with the intervals above; `hook(number)` runs first."""

    def __init__(self, figures: Mapping[int, tuple[float, float]], hook: Callable[[int], None] = lambda n: None) -> None:
        self.figures = dict(figures)
        self.hook = hook
        self.ran: list[tuple[int, int, bool]] = []  # (trial number, steps, relaunch)

    def bind(self, space: Any, gate: Any, **_: Any) -> FiguresChain:
        self.space, self.gate = space, gate
        return self

    def run(self, number: int, candidate: Mapping[str, Any], hooks: Any = None, relaunch: bool = False, **_: Any):
        hooks.phase("launch")
        self.hook(number)
        steps = candidate["speculative_num_steps"]
        self.ran.append((number, steps, relaunch))
        resolved = self.gate.argument_verdict({**self.space.server.flags, **candidate}).resolved
        c1, c4 = self.figures[steps]
        record = TrialRecord(outcome="ok", candidate=dict(candidate), resolved=dict(resolved), launched=True)
        record.values = [c1, c4]
        record.bench = {
            1: {"concurrency": 1, "n_ok": 8, "output_tok_s": c1, "cis": {"output_tok_s": [c1 - HALF_C1, c1 + HALF_C1]}},
            4: {"concurrency": 4, "n_ok": 8, "agg_output_tok_s": c4, "cis": {"agg_output_tok_s": [c4 - HALF_C4, c4 + HALF_C4]}},
        }
        return record


def study_run(
    storage: optuna.storages.BaseStorage,
    folder: Path,
    chain: FiguresChain,
    n_trials: int,
    confirm: int | None,
    machine: str | None = None,
):
    req = OptimizeRequest(
        space=SPACE,
        study_name="confirming",
        n_trials=n_trials,
        command=("fake-server",),
        studies_dir=folder,
        sampler="random",
        seed=3,
        learn=False,
        launcher=Launcher(),
        race=False,
        confirm=confirm,
        machine=machine,
    )
    handle = StorageHandle(storage, "in-memory storage", heartbeat=False, local_path=None)
    return build_run(req, make_chain=chain.bind, handle=handle)


def steps_of(run: StudyRun) -> dict[int, int]:
    return {t.number: t.candidate["speculative_num_steps"] for t in read_trials(run.store.study) if t.candidate}


def confirmed_steps(run: StudyRun) -> list[int]:
    """The configurations (steps) that completed confirmation launches, in trial order."""
    trials = read_trials(run.store.study)
    steps = steps_of(run)
    done = [t for t in trials if t.markers.confirm_of is not None and t.state == optuna.trial.TrialState.COMPLETE]
    return [steps[t.markers.confirm_of] for t in sorted(done, key=lambda t: t.number)]


# C=1: steps 3 leads, steps 2 within the intervals of it (10 apart, halves 15); steps 4 is far
# behind at C=1 and at C=4. C=4: steps 1 leads alone.
OVERLAPPING = {1: (100.0, 1000.0), 2: (290.0, 500.0), 3: (300.0, 333.0), 4: (150.0, 250.0)}
# The same with steps 2 far behind steps 3 at C=1 (50 apart).
SEPARATED = {**OVERLAPPING, 2: (250.0, 500.0)}


def test_confirmation_goes_to_the_picks_and_their_overlapping_rivals_and_counts_in_the_budget(tmp_path):
    chain = FiguresChain(OVERLAPPING)
    run = study_run(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=7, confirm=3)

    result = run.run()

    assert result.stopped_because is StopReason.TARGET and result.launched == 7
    assert len(chain.ran) == 7  # confirmations are launches of the budget, not extra ones
    confirmed = confirmed_steps(run)
    assert len(confirmed) == 3
    assert {2, 3} <= set(confirmed) <= {1, 2, 3}  # the C=1 leader and its rival; never steps 4
    assert [relaunch for _, _, relaunch in chain.ran[:4]] == [False] * 4  # the search came first
    events = (tmp_path / "confirming-events.log").read_text()
    assert "confirmation relaunch 1 of at most 3" in events
    assert "confirmation contests: best at C=1: trial" in events and "not settled within the budget" in events


def test_confirmation_stops_once_the_picks_are_separated_and_the_search_takes_the_rest(tmp_path):
    chain = FiguresChain(SEPARATED)
    run = study_run(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=7, confirm=3)

    result = run.run()

    # one relaunch measures the (zero) between-launch spread: both picks are then separated
    # by their intervals, so the rest of the window goes back to the search, which finds
    # nothing left to launch in this four-configuration space
    assert len(confirmed_steps(run)) == 1
    assert result.stopped_because is StopReason.EXHAUSTED and result.launched == 5
    (picks,) = [
        line for line in (tmp_path / "confirming-events.log").read_text().splitlines() if "] confirmation contests: " in line
    ]
    assert picks.count("separated") == 2 and "not settled" not in picks


def test_confirm_zero_turns_confirmation_off(tmp_path):
    chain = FiguresChain(OVERLAPPING)
    run = study_run(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=4, confirm=0)

    run.run()

    assert confirmed_steps(run) == [] and not any(relaunch for _, _, relaunch in chain.ran)


def test_by_default_a_quarter_of_the_budget_may_confirm(tmp_path):
    chain = FiguresChain(OVERLAPPING)
    run = study_run(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=8, confirm=None)

    result = run.run()

    confirmation = run.queue.policy(ConfirmationPolicy)
    assert confirmation is not None and confirmation.confirm == 2
    assert result.launched == 6 and len(confirmed_steps(run)) == 2  # 4 configurations searched, then 2 confirmations


def test_a_study_resumed_in_the_middle_of_confirmation_repeats_no_confirmation(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    launches: list[int] = []

    def interrupt_the_second_confirmation(number: int) -> None:
        launches.append(number)
        if len(launches) == 6:  # 4 searched, 1 confirmed, the second confirmation is running
            raise KeyboardInterrupt

    first = FiguresChain(OVERLAPPING, hook=interrupt_the_second_confirmation)
    with pytest.raises(StudyInterrupted):
        study_run(storage, tmp_path, first, n_trials=7, confirm=3).run()
    before = confirmed_steps(study_run(storage, tmp_path, FiguresChain(OVERLAPPING), n_trials=7, confirm=3))
    assert len(before) == 1

    second = FiguresChain(OVERLAPPING)
    run = study_run(storage, tmp_path, second, n_trials=7, confirm=3)
    result = run.run()

    assert result.launched == 7
    assert len(second.ran) == 2 and all(relaunch for _, _, relaunch in second.ran)  # the interrupted one, then one more
    trials = read_trials(run.store.study)
    confirmations = [t for t in trials if t.markers.confirm_of is not None and t.state == optuna.trial.TrialState.COMPLETE]
    assert len(confirmations) == 3  # --confirm 3 counted over the study: none repeated, none extra
    interrupted = next(t for t in trials if t.outcome == "interrupted")
    assert any(t.markers.retry_of == interrupted.number and t.markers.confirm_of is not None for t in confirmations)


def test_after_a_move_no_confirmation_relaunches_what_was_measured_only_on_the_old_machine(tmp_path):
    # a relaunch on the new machine does not pool with launches on the old one (the default
    # study on two H100s, 2026-12-07: its 6/1/7 read 758 tok/s on the first and 700 on the
    # second, a machine and pair build 0.92 apart, and pooling them mixed that into the pick)
    storage = optuna.storages.InMemoryStorage()
    study_run(storage, tmp_path, FiguresChain(OVERLAPPING), n_trials=4, confirm=0, machine="h/GPU-1").run()

    chain = FiguresChain(OVERLAPPING)
    run = study_run(storage, tmp_path, chain, n_trials=7, confirm=3, machine="h/GPU-2")
    result = run.run()

    trials = read_trials(run.store.study)
    (control,) = [t for t in trials if t.markers.control is not None]
    assert control.machine == "h/GPU-2" and control.has_measurement  # the machine factor is measured
    assert [t for t in trials if t.markers.confirm_of is not None and t.markers.control is None] == []
    assert result.stopped_because is StopReason.EXHAUSTED and result.launched == 5 and len(chain.ran) == 1
