"""Proposals that can be launched, and only those reach the study.

The sampler is asked in a *scratch* study (Optuna's in-memory storage) that mirrors the
finished trials of the real study. Each proposal goes through the feasibility gate:

- launchable: its parameters are returned; the study enqueues them and asks, so the real
  trial carries exactly these parameters (the scratch trial is failed, and the real one is
  mirrored in at the next proposal);
- rejected by SGLang's rules, predicted to fail (learned memory rules), or a duplicate of
  a server already launched: answered in the scratch study only, the way the real study
  used to record it (COMPLETE with a violated ``feasible`` constraint and worst-case
  values; a duplicate with the measurement it repeats), so the sampler learns from it,
  and no trial is created for it in the real study, the dashboard or any report.

After `max_asks` answers without a launchable proposal the proposer gives up (the caller
then picks a random launchable configuration, or stops: the space is exhausted). The
scratch study is rebuilt from the real one at every run, so what it learned from answers
is relearned after a restart (cheaply: no launch is involved).

Overlap with the GPU: while a trial's server is torn down, the study already knows the
trial's values, so it adds them `provisionally` and proposes the next configuration in
the background, checking proposals against SGLang's argument rules only (what the gate
learns from this trial is not settled yet). `confirm` then applies the whole gate; a
proposal it turns down is answered like any other and a new one is made on the spot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from autospec.feasibility.gate import FeasibilityGate
from autospec.feasibility.verdict import Verdict
from autospec.records import DUPLICATE, Markers, StoredTrial, TrialRecord, TrialStore
from autospec.space import suggest
from autospec.study.proposing.compiled import CompiledSpace
from autospec.study.proposing.samplers import ModelSampler

__all__ = ["Proposer", "Proposal", "Answered"]

_RUNNING = optuna.trial.TrialState.RUNNING
_FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED)


@dataclass(frozen=True)
class Answered:
    """A proposal answered without a launch."""

    candidate: dict[str, Any]
    verdict: Verdict


@dataclass
class Proposal:
    """Optuna parameters of a launchable configuration (None when the proposer gave up),
    its candidate, the scratch trial that proposed it (kept RUNNING until the real trial's
    result is known), and the proposals answered on the way."""

    params: dict[str, Any] | None
    answered: list[Answered] = field(default_factory=list)
    candidate: dict[str, Any] = field(default_factory=dict)
    trial: optuna.Trial | None = None
    predicted: dict[str, Any] | None = None  # what --sampler model expects of it


class Proposer:
    """Asks `sampler` for launchable configurations of `space` (see the module docstring).

    A proposal's scratch trial stays RUNNING; once the study has asked the real trial for
    it, `bind` ties the two, and the real result is told to that very scratch trial (so a
    sampler that keeps state on its own trials, like NSGA-II's generations, sees its
    proposal come back). Real trials the proposer did not propose (baseline, calibration,
    pushes, retries) are copied in."""

    def __init__(
        self,
        compiled: CompiledSpace,
        sampler: optuna.samplers.BaseSampler,
        gate: FeasibilityGate,
        maximize: Sequence[bool],
        constraint_names: Sequence[str],
        max_asks: int = 100,
    ) -> None:
        self.compiled = compiled
        self.space = compiled.space
        self.gate = gate
        self.max_asks = max_asks
        directions = [optuna.study.StudyDirection.MAXIMIZE if up else optuna.study.StudyDirection.MINIMIZE for up in maximize]
        self.scratch = optuna.create_study(storage=optuna.storages.InMemoryStorage(), sampler=sampler, directions=directions)
        self.store = TrialStore(self.scratch, maximize, constraint_names)
        self._mirrored: set[int] = set()
        self._bound: dict[int, optuna.Trial] = {}
        self._queued: Proposal | None = None  # returned, not yet bound to a real trial

    def expect(self, proposal: Proposal) -> None:
        """`proposal` is queued in the real study; the next trial asked should be it."""
        self._queued = proposal

    def bind(self, number: int, params: Mapping[str, Any]) -> None:
        """Real trial `number` was asked with `params`: if they are the expected proposal's,
        its result goes to that proposal's scratch trial."""
        queued, self._queued = self._queued, None
        if queued is not None and queued.trial is not None and queued.params == dict(params):
            self._bound[number] = queued.trial

    def mirror(self, trials: Sequence[StoredTrial], frozen: Callable[[StoredTrial], optuna.trial.FrozenTrial]) -> None:
        """Bring the real study's finished trials into the scratch study, and its running
        ones (other slots' and workers') as RUNNING, so that samplers treat them as in
        flight (TPE's constant liar, the model's believer) and never propose them again."""
        for t in trials:
            if t.number in self._mirrored or t.markers.reference is not None:  # references are outside the space
                continue
            if t.state == _RUNNING and t.params and t.number not in self._bound:
                self._add_running(t, frozen)
                continue
            if t.state not in _FINISHED:
                continue
            bound = self._bound.get(t.number)
            if bound is None:
                self.scratch.add_trial(frozen(t))
            elif t.state == optuna.trial.TrialState.COMPLETE and t.record is not None:
                self.store.tell(bound, t.record)
            else:
                self.scratch.tell(bound, state=optuna.trial.TrialState.FAIL)
            self._mirrored.add(t.number)

    def _add_running(self, t: StoredTrial, frozen: Callable[[StoredTrial], optuna.trial.FrozenTrial]) -> None:
        """Mirror `t`, running in another slot or worker, as RUNNING. Its parameters and their
        distributions come from one read of the trial: the other worker may be setting them
        one by one meanwhile, so those of `t` (read earlier) can be fewer."""
        now = frozen(t)
        self.scratch.add_trial(
            optuna.trial.create_trial(params=dict(now.params), distributions=now.distributions, state=_RUNNING)
        )
        self._bound[t.number] = optuna.Trial(self.scratch, self.scratch.get_trials(deepcopy=False)[-1]._trial_id)

    def provisional(self, number: int, params: Mapping[str, Any], distributions: Mapping[str, Any], record: TrialRecord) -> None:
        """Tell real trial `number`'s result before it is stored (it is not mirrored again)."""
        bound = self._bound.get(number)
        if bound is not None:
            self.store.tell(bound, record)
        else:
            self.store.add_measured(params, distributions, record, Markers())
        self._mirrored.add(number)

    def propose(self, verdict_of: Callable[[Mapping[str, Any]], Verdict] | None = None) -> Proposal:
        """The next launchable proposal (see the module docstring); `verdict_of` defaults to
        the whole gate."""
        verdict_of = verdict_of or self.gate.verdict
        proposal = Proposal(None)
        fixed = dict(self.space.server.flags)
        in_flight = [dict(t.params) for t in self.scratch.get_trials(deepcopy=False, states=(_RUNNING,))]
        for _ in range(self.max_asks):
            trial = self.scratch.ask()
            candidate = self.compiled.candidate(suggest(trial, self.space))
            if dict(trial.params) in in_flight:  # another slot or worker measures it now: ask again
                self.scratch.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            verdict = verdict_of({**fixed, **candidate})
            if verdict.ok:
                proposal.params, proposal.candidate, proposal.trial = dict(trial.params), candidate, trial
                sampler = self.scratch.sampler
                if isinstance(sampler, ModelSampler):
                    proposal.predicted = sampler.prediction_for(trial.number)
                return proposal
            self.store.tell(trial, self._record(candidate, verdict))
            proposal.answered.append(Answered(candidate, verdict))
        return proposal

    def confirm(self, proposal: Proposal) -> Proposal:
        """`proposal` if the whole gate lets it launch now; else it is answered in the
        scratch study and a new proposal is made."""
        if proposal.params is None or proposal.trial is None:
            return proposal
        verdict = self.gate.verdict({**self.space.server.flags, **proposal.candidate})
        if verdict.ok:
            return proposal
        self.store.tell(proposal.trial, self._record(proposal.candidate, verdict))
        fresh = self.propose()
        fresh.answered[:0] = [*proposal.answered, Answered(proposal.candidate, verdict)]
        return fresh

    def _record(self, candidate: Mapping[str, Any], verdict: Verdict) -> TrialRecord:
        record = TrialRecord(
            outcome=verdict.status, candidate=dict(candidate), reason=verdict.reason, resolved=dict(verdict.resolved)
        )
        if verdict.status == DUPLICATE:
            source = self.gate.measurement_of(verdict.resolved)
            if source is not None and source.values is not None:
                record.values = list(source.values)
                record.constraints = dict(source.constraints)
                record.duplicate_of = source.number
        return record
