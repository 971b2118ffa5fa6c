"""The search's own launches: `ProposalPolicy`.

When a trial is to be asked and nothing is queued (retries, pushes, confirmations and
other workers' queues go first), the proposer's next launchable configuration, made
during the last teardown where possible (`Proposer.provisional`, on a background
thread); when the proposer gives up, or `MAX_IDLE_ASKS` trials in a row ended without a
launch, a random configuration the gate would launch; when none is left, nothing (the
space is exhausted).

The policy also keeps the feasibility gate taught (`teach_gate`) with what every
finished trial showed, this worker's and the others'.
"""

from __future__ import annotations

import concurrent.futures
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import optuna

from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import LAUNCH_FAILURE_KINDS
from autospec.records import (
    MEASURED_OUTCOMES,
    MODEL_SUMMARY_KEY,
    Markers,
    StorageUnavailable,
    StoredTrial,
    TrialRecord,
    TrialStore,
)
from autospec.space import grid, to_distribution_params
from autospec.study.proposing.compiled import CompiledSpace
from autospec.study.proposing.policy import WAITING, LaunchPolicy, Moment, Plan, StudyView
from autospec.study.proposing.proposer import Answered, Proposal, Proposer
from autospec.study.proposing.samplers import ModelSampler
from autospec.study.slots import crowded_out

__all__ = ["ProposalPolicy", "teach_gate", "MAX_IDLE_ASKS"]

MAX_IDLE_ASKS = 60  # trials in a row ended without a launch before a random launchable one is queued
_COMPLETE = optuna.trial.TrialState.COMPLETE


def teach_gate(trials: Iterable[StoredTrial], gate: FeasibilityGate, hardware: str | None = None) -> None:
    """Feed every COMPLETE launched trial to `gate`: its measurement (for dedup), its
    failure kind (learned rules) or its startup facts (memory model). Failure kinds and
    startup facts only from trials run on `hardware` (or whose hardware is not recorded):
    what fits in memory on one GPU type says little about another."""
    for t in trials:
        r = t.record
        if t.state != _COMPLETE or r is None or not r.launched or t.markers.reference is not None:
            continue  # a reference point is outside the search: not a measurement of it
        resolved = dict(r.resolved or r.candidate)
        measured = r.outcome in MEASURED_OUTCOMES
        gate.remember(t.number, resolved, r.values if measured else None, r.constraints, r.bench)
        recorded = (t.worker or {}).get("hardware")
        if recorded is not None and hardware is not None and recorded != hardware:
            continue
        if ((t.worker or {}).get("slot") or {}).get("shared") and crowded_out(r.outcome, r.teardown) is not None:
            continue  # failed for the memory another slot held, not for its own needs
        if r.outcome in LAUNCH_FAILURE_KINDS:
            gate.learn_failure(resolved, r.outcome)
        elif measured:
            gate.learn_success(resolved, r.startup or {})


class ProposalPolicy(LaunchPolicy):
    """The search's proposals (see the module docstring). `make_sampler(seed_offset)`
    builds the proposer's sampler once the study's trials are known (`started`: offset by
    the trials already in the study, so a resumed study does not replay its opening
    proposals); `answered` reports each proposal answered without a launch; `n_trials`:
    the launch budget; `hardware`: the GPU type whose failures teach the gate; `seed`:
    the random fallback's."""

    moments = frozenset({Moment.ASK})

    def __init__(
        self,
        compiled: CompiledSpace,
        gate: FeasibilityGate,
        store: TrialStore,
        make_sampler: Callable[[int], optuna.samplers.BaseSampler],
        answered: Callable[[Answered], None],
        n_trials: int,
        hardware: str | None = None,
        seed: int | None = None,
    ) -> None:
        self.compiled, self.space, self.gate, self.store = compiled, compiled.space, gate, store
        self._make_sampler, self._answered = make_sampler, answered
        self.n_trials, self.hardware = n_trials, hardware
        self.proposer: Proposer | None = None
        self.idle = 0  # trials in a row that ended without a launch
        self._rng = random.Random(seed)
        self._taught: set[int] = set()
        self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="autospec-propose")
        self._next: concurrent.futures.Future[Proposal] | None = None

    def started(self, trials: Sequence[StoredTrial]) -> None:
        """Learn from `trials` and make the proposer."""
        self.teach(trials)
        sampler = self._make_sampler(len(trials))
        self.proposer = Proposer(self.compiled, sampler, self.gate, self.store.maximize, self.store.constraint_names)

    def teach(self, trials: Sequence[StoredTrial]) -> None:
        """Teach the gate what the finished `trials` it has not seen yet showed."""
        new = [t for t in trials if t.number not in self._taught and t.state.is_finished()]
        teach_gate(new, self.gate, hardware=self.hardware)
        self._taught.update(t.number for t in new)

    def next_launch(self, view: StudyView) -> Plan | None:
        if self.idle >= MAX_IDLE_ASKS:
            return self._random_remaining()
        assert self.proposer is not None, "started() first"
        self.teach(view.trials)  # what other workers measured since
        proposal = self._background_proposal()
        if proposal is not None:
            proposal = self.proposer.confirm(proposal)
        else:
            self.proposer.mirror(view.trials, self.store.frozen)
            proposal = self.proposer.propose()
        for answer in proposal.answered:
            self._answered(answer)
        if proposal.params is None:
            return self._random_remaining()
        self.proposer.expect(proposal)
        return Plan(((proposal.params, Markers(predicted=proposal.predicted) if proposal.predicted else None),))

    def asked(self, number: int, params: Mapping[str, Any]) -> None:
        """Ties trial `number` to the proposal that queued it."""
        if self.proposer is not None:
            self.proposer.bind(number, params)

    def _background_proposal(self) -> Proposal | None:
        """The proposal made during the last teardown, if one was made and succeeded (a
        storage that went away meanwhile is met again, and reported, by the caller)."""
        future, self._next = self._next, None
        if future is None:
            return None
        try:
            return future.result()
        except Exception:
            return None

    def _random_remaining(self) -> Plan | None:
        """A random configuration the gate would launch; None when none is left."""
        flags = self.space.server.flags
        remaining = [c for c in grid(self.space) if self.gate.verdict({**flags, **c}).ok]
        if not remaining:
            return None
        self.idle = 0
        return Plan(((to_distribution_params(self._rng.choice(remaining), self.space), None),))

    def measured(self, trial: optuna.Trial, record: TrialRecord, launched_after: int) -> None:
        """Propose the next configuration while the server is torn down, unless trials are
        queued or `launched_after` already meets the budget."""
        proposer = self.proposer
        if proposer is None or launched_after >= self.n_trials:
            return
        try:
            if self.store.read(states=(WAITING,)):
                return
        except StorageUnavailable:  # the result is stored (or kept) after the teardown; no head start now
            return

        def propose() -> Proposal:
            # This trial first: once it is marked as mirrored, whether the main thread has
            # stored it yet no longer matters.
            proposer.provisional(trial.number, trial.params, trial.distributions, record)
            proposer.mirror(self.store.read(), self.store.frozen)
            return proposer.propose(self.gate.argument_verdict)

        self._next = self._background.submit(propose)

    def finished(self, number: int, record: TrialRecord, off_search: bool) -> None:
        """The gate learns the trial; the count of trials in a row without a launch moves."""
        self._taught.add(number)
        if off_search:
            return
        if record.launched:  # failed launches too: never relaunched as duplicates
            self.gate.remember(number, record.resolved, record.values, record.constraints, record.bench)
            self.idle = 0
        else:
            self.idle += 1

    def summary(self, trials: Sequence[StoredTrial]) -> tuple[dict[str, Any], str]:
        """With the model sampler: why the configurations never launched were not worth a
        launch, from the model fitted on every launch (stored as `MODEL_SUMMARY_KEY`)."""
        summary = self.model_summary(trials)
        return ({MODEL_SUMMARY_KEY: summary} if summary is not None else {}), ""

    def model_summary(self, trials: Sequence[StoredTrial]) -> dict[str, Any] | None:
        sampler = self.proposer.scratch.sampler if self.proposer is not None else None
        if not isinstance(sampler, ModelSampler):
            return None
        return sampler.unlaunched([t for t in trials if t.markers.reference is None])  # the search's own

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=True)
