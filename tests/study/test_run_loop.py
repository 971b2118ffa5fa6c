"""The study loop (`StudyRun`) driven with fakes: a scripted trial chain in place of
servers, Optuna's in-memory storage shared by two workers in one process, and the loop's
own wait replaced by a step of the other worker. Nothing is launched and nothing sleeps,
so every interleaving here is exact."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
import pytest

from autospec.config import parse_search_space, tomllib
from autospec.launcher import Launcher
from autospec.records import INTERRUPTED, WITHDRAWN, TrialRecord, read_trials
from autospec.study import OptimizeRequest, StopReason, StudyInterrupted, build_run
from autospec.study.proposing.policy import Moment
from autospec.study.run import Asked, GpuIdle, InFlight, StudyRun
from autospec.study.storage import StorageHandle
from simspace import scripted_space_text

SPACE = parse_search_space(tomllib.loads(scripted_space_text(3)), source="test")


class ScriptedChain:
    """Answers the trials it is given with `outcomes`, in order ("ok" measures values);
    `hook(number)` runs at the start of each trial. `bind` takes TrialChain's keywords."""

    def __init__(self, outcomes: list[str], hook: Callable[[int], None] = lambda number: None) -> None:
        self.outcomes = list(outcomes)
        self.hook = hook
        self.ran: list[tuple[int, dict[str, Any]]] = []

    def bind(self, space: Any, gate: Any, **_: Any) -> ScriptedChain:
        self.space, self.gate = space, gate
        return self

    def run(
        self,
        number: int,
        candidate: Mapping[str, Any],
        hooks: Any = None,
        relaunch: bool = False,
        **_: Any,
    ) -> TrialRecord:
        hooks.phase("launch")
        self.ran.append((number, dict(candidate)))
        self.hook(number)
        outcome = self.outcomes.pop(0)
        resolved = self.gate.argument_verdict({**self.space.server.flags, **candidate}).resolved  # as SGLang runs it
        record = TrialRecord(outcome=outcome, candidate=dict(candidate), resolved=dict(resolved), launched=True)
        if outcome == "ok":
            steps = candidate["speculative_num_steps"]
            record.values = [100.0 * steps, 1000.0 / steps]
        return record


def worker(
    storage: optuna.storages.BaseStorage, folder: Path, chain: ScriptedChain, n_trials: int, seed: int = 1, confirm: int = 0
) -> StudyRun:
    """One worker of study "shared" in `storage`, prepared (as `run()` would) but not looping."""
    req = OptimizeRequest(
        space=SPACE,
        study_name="shared",
        n_trials=n_trials,
        command=("fake-server",),
        studies_dir=folder,
        sampler="random",
        seed=seed,
        learn=False,
        launcher=Launcher(),
        race=False,
        confirm=confirm,
    )
    handle = StorageHandle(storage, "in-memory storage", heartbeat=False, local_path=None)
    return build_run(req, make_chain=chain.bind, handle=handle)


def shared_trials(run: StudyRun) -> list:
    return read_trials(run.store.study)


def test_a_worker_whose_claim_is_lost_waits_and_takes_over_when_the_winners_launch_fails(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    winner_chain = ScriptedChain(["port_in_use"])  # the host's fault: FAIL, queued again, not counted
    loser_chain = ScriptedChain(["ok"])
    winner = worker(storage, tmp_path, winner_chain, n_trials=1)
    loser = worker(storage, tmp_path, loser_chain, n_trials=1, seed=2)
    winner._prepare()
    claimed: list[InFlight] = []

    # The loser looks at the study (nothing launched, nothing claimed), queues a proposal,
    # and the winner asks for that very trial and claims it before the loser asks.
    queue_fill = loser.queue.queue

    def fill_then_the_winner_claims(moment: Moment, trials: Any, launched: int) -> bool:
        queued = queue_fill(moment, trials, launched)
        if moment is not Moment.ASK:
            return queued
        asked = winner._ask(winner.store.read())
        assert isinstance(asked, InFlight)
        claimed.append(asked)
        return queued

    loser.queue.queue = fill_then_the_winner_claims  # type: ignore[method-assign]
    waits: list[int] = []

    def wait(_: float) -> None:  # while the loser waits, the winner's launch fails
        waits.append(len(claimed))
        if claimed:
            loser.queue.queue = queue_fill  # type: ignore[method-assign]
            winner._launch(claimed.pop())

    loser.sleep = wait
    result = loser.run()

    assert result.stopped_because is StopReason.TARGET and result.launched == 1
    assert waits and waits[0] == 1  # it waited for the winner instead of ending "exhausted"
    trials = {t.outcome: t for t in shared_trials(loser)}
    assert set(trials) == {WITHDRAWN, "port_in_use", "ok"}
    assert trials[WITHDRAWN].state == optuna.trial.TrialState.FAIL
    # the loser ran the winner's configuration, from the retry the failed launch queued
    ((number, candidate),) = loser_chain.ran
    assert trials["ok"].number == number and trials["ok"].markers.retry_of == trials["port_in_use"].number
    assert candidate == winner_chain.ran[0][1]
    assert sum(t.counts_as_launch for t in shared_trials(loser)) == 1


def test_a_worker_whose_claim_is_lost_ends_at_the_target_when_the_winners_launch_counts(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    winner = worker(storage, tmp_path, ScriptedChain(["ok"]), n_trials=1)
    loser_chain = ScriptedChain([])
    loser = worker(storage, tmp_path, loser_chain, n_trials=1, seed=2)
    winner._prepare()
    loser._prepare()
    claimed = winner._ask(winner.store.read())
    assert isinstance(claimed, InFlight)
    assert loser._step(loser.store.read()) is Asked.WITHDRAWN  # the budget is claimed
    winner._launch(claimed)

    result = loser.run()

    assert result.stopped_because is StopReason.TARGET and result.launched == 1
    assert loser_chain.ran == []


def test_a_space_with_nothing_left_to_launch_ends_exhausted_with_every_configuration_launched_once(tmp_path):
    chain = ScriptedChain(["ok"] * 3)
    run = worker(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=10)

    result = run.run()

    assert result.stopped_because is StopReason.EXHAUSTED and result.launched == 3
    assert sorted(c["speculative_num_steps"] for _, c in chain.ran) == [1, 2, 3]


def test_a_transient_failure_is_failed_queued_again_and_not_counted(tmp_path):
    chain = ScriptedChain(["port_in_use", "ok", "ok"])
    run = worker(optuna.storages.InMemoryStorage(), tmp_path, chain, n_trials=2)

    result = run.run()

    assert result.stopped_because is StopReason.TARGET and result.launched == 2
    first, retry, _ = shared_trials(run)
    assert first.state == optuna.trial.TrialState.FAIL and first.outcome == "port_in_use"
    assert retry.markers.retry_of == first.number and retry.params == first.params and retry.counts_as_launch
    events = (tmp_path / "shared-events.log").read_text()
    assert f"trial {first.number}: outcome=port_in_use" in events and "queued again" in events


def test_a_stop_signal_during_a_trial_records_it_interrupted_and_queues_it_again(tmp_path):
    def interrupt(number: int) -> None:
        raise KeyboardInterrupt

    run = worker(optuna.storages.InMemoryStorage(), tmp_path, ScriptedChain(["ok"], hook=interrupt), n_trials=2)

    with pytest.raises(StudyInterrupted, match="0 of 2 trials are stored"):
        run.run()

    interrupted, retry = shared_trials(run)
    assert interrupted.outcome == INTERRUPTED and interrupted.state == optuna.trial.TrialState.FAIL
    assert "stopped by a signal during launch" in interrupted.record.reason
    assert retry.state == optuna.trial.TrialState.WAITING and retry.markers.retry_of == interrupted.number
    assert run.signals.live_servers.ids() == []


def test_the_gpu_idle_line_splits_the_wait_before_the_first_launch():
    idle = GpuIdle(free_since=100.0, phases=[("start-up", 112.0), ("recovery", 117.5)])
    idle.gaps = [20.0, 0.2, 0.1, 0.3]  # the first launch at 120.0, then three more
    assert idle.line() == (
        "GPU idle before the first launch of this run: 20.0 s since the tuner started "
        "(start-up 12.0 s; recovery 5.5 s; the first proposal 2.5 s); "
        "between launches: median 0.20 s, max 0.30 s over 3 launches"
    )


def test_a_run_logs_what_the_gpu_waited_for_before_its_first_launch(tmp_path):
    run = worker(optuna.storages.InMemoryStorage(), tmp_path, ScriptedChain(["ok"] * 3), n_trials=3)
    run.run()
    (line,) = [line for line in (tmp_path / "shared-events.log").read_text().splitlines() if "GPU idle before" in line]
    labels = ["start-up (imports, storage, search space, preflight)", "recovery and the GPU check", "the launch queues"]
    parts = "; ".join(f"{re.escape(label)} ([\\d.]+) s" for label in [*labels, "the first proposal"])
    found = re.search(rf"this run: ([\d.]+) s since the tuner started \({parts}\)(;|$)", line)
    assert found, line
    total, *spent = (float(x) for x in found.groups()[:5])
    assert sum(spent) == pytest.approx(total, abs=0.25)  # each rounded to 0.1 s
