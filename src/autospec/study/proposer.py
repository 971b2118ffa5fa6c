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
from autospec.study.compiled import CompiledSpace

__all__ = ["Proposer", "Proposal", "Answered"]

_FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED)


@dataclass(frozen=True)
class Answered:
    """A proposal answered without a launch."""

    candidate: dict[str, Any]
    verdict: Verdict


@dataclass
class Proposal:
    """Optuna parameters of a launchable configuration (None when the proposer gave up),
    its candidate and distributions, and the proposals answered on the way."""

    params: dict[str, Any] | None
    answered: list[Answered] = field(default_factory=list)
    candidate: dict[str, Any] = field(default_factory=dict)
    distributions: dict[str, Any] = field(default_factory=dict)


class Proposer:
    """Asks `sampler` for launchable configurations of `space` (see the module docstring)."""

    def __init__(self, compiled: CompiledSpace, sampler: optuna.samplers.BaseSampler, gate: FeasibilityGate,
                 maximize: Sequence[bool], constraint_names: Sequence[str], max_asks: int = 100) -> None:
        self.compiled = compiled
        self.space = compiled.space
        self.gate = gate
        self.max_asks = max_asks
        directions = [optuna.study.StudyDirection.MAXIMIZE if up else optuna.study.StudyDirection.MINIMIZE
                      for up in maximize]
        self.scratch = optuna.create_study(storage=optuna.storages.InMemoryStorage(), sampler=sampler,
                                           directions=directions)
        self.store = TrialStore(self.scratch, maximize, constraint_names)
        self._mirrored: set[int] = set()

    def mirror(self, trials: Sequence[StoredTrial], frozen: Callable[[StoredTrial], optuna.trial.FrozenTrial]) -> None:
        """Copy the real study's finished trials the scratch study does not have yet."""
        for t in trials:
            if t.number in self._mirrored or t.state not in _FINISHED:
                continue
            self.scratch.add_trial(frozen(t))
            self._mirrored.add(t.number)

    def provisional(self, number: int, params: Mapping[str, Any], distributions: Mapping[str, Any],
                    record: TrialRecord) -> None:
        """Add real trial `number`'s result before it is stored (it is not mirrored again)."""
        self.store.add_measured(params, distributions, record, Markers())
        self._mirrored.add(number)

    def propose(self, verdict_of: Callable[[Mapping[str, Any]], Verdict] | None = None) -> Proposal:
        """The next launchable proposal (see the module docstring); `verdict_of` defaults to
        the whole gate."""
        verdict_of = verdict_of or self.gate.verdict
        proposal = Proposal(None)
        fixed = dict(self.space.server.flags)
        for _ in range(self.max_asks):
            trial = self.scratch.ask()
            candidate = self.compiled.candidate(suggest(trial, self.space))
            verdict = verdict_of({**fixed, **candidate})
            if verdict.ok:
                proposal.params, proposal.candidate = dict(trial.params), candidate
                proposal.distributions = dict(trial.distributions)
                self.scratch.tell(trial, state=optuna.trial.TrialState.FAIL)
                return proposal
            self.store.tell(trial, self._record(candidate, verdict))
            proposal.answered.append(Answered(candidate, verdict))
        return proposal

    def confirm(self, proposal: Proposal) -> Proposal:
        """`proposal` if the whole gate lets it launch now; else it is answered in the
        scratch study and a new proposal is made."""
        if proposal.params is None:
            return proposal
        verdict = self.gate.verdict({**self.space.server.flags, **proposal.candidate})
        if verdict.ok:
            return proposal
        record = self._record(proposal.candidate, verdict)
        self.store.add_measured(proposal.params, proposal.distributions, record, Markers())
        fresh = self.propose()
        fresh.answered[:0] = [*proposal.answered, Answered(proposal.candidate, verdict)]
        return fresh

    def _record(self, candidate: Mapping[str, Any], verdict: Verdict) -> TrialRecord:
        record = TrialRecord(outcome=verdict.status, candidate=dict(candidate), reason=verdict.reason,
                             resolved=dict(verdict.resolved))
        if verdict.status == DUPLICATE:
            source = self.gate.measurement_of(verdict.resolved)
            if source is not None and source.values is not None:
                record.values = list(source.values)
                record.constraints = dict(source.constraints)
                record.duplicate_of = source.number
        return record
