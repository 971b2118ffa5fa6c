"""What the next trial of a run is: the queue policy.

A run launches only trials that were queued first (Optuna WAITING trials carrying the
parameters, with `Markers` saying why); `QueuePolicy` decides what is queued:

- once per study (a flag on the study, so a resumed run or another worker does not
  repeat them): the user's baseline (``--baseline``, unless SGLang would reject it),
  the memory model's calibration points (``learn``) and the reference points
  (``references``; `autospec.study.proposing.references`);
- before each trial, when nothing is queued (retries, pushes and other workers' queues
  go first): the proposer's next launchable configuration, made during the last
  teardown where possible (`Proposer.provisional`); when the proposer gives up, or
  `MAX_IDLE_ASKS` trials in a row ended without a launch, a random configuration the
  gate would launch; when none is left, nothing (the space is exhausted);
- after a launch: a mem-fraction push (`mem_push`) while the budget lasts, at most one
  launch in `PUSH_SHARE`;
- within the last launches of the budget, as many as the confirmations still allowed
  (``--confirm K``, counted over the study): a relaunch of what the picks depend on
  (`autospec.records.confirming`) while one of them is unsettled; the search goes on
  when every pick is settled or tied. Confirmations count towards ``--trials``; no
  mem-fraction push is queued within that window.

It also keeps the feasibility gate taught (`teach_gate`) with what every finished trial
showed, this worker's and the others'. The callers hold the study's lock where queueing
must not race another worker (`StudyRun`).
"""

from __future__ import annotations

import concurrent.futures
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import LAUNCH_FAILURE_KINDS
from autospec.records import (
    MEASURED_OUTCOMES,
    MODEL_SUMMARY_KEY,
    OK,
    Markers,
    StorageUnavailable,
    StoredTrial,
    TrialRecord,
    TrialStore,
    pareto_front,
)
from autospec.records.confirming import MIN_LAUNCHES, Contest, contests, next_confirmation
from autospec.records.launches import ObjectiveRef
from autospec.space import calibration_points, grid, to_distribution_params
from autospec.study.proposing.compiled import CompiledSpace
from autospec.study.proposing.mem_push import Measured, PushAnswer, may_push, push_candidate
from autospec.study.proposing.proposer import Answered, Proposal, Proposer
from autospec.study.proposing.references import enqueue_references
from autospec.study.proposing.samplers import ModelSampler
from autospec.study.slots import crowded_out

__all__ = [
    "QueuePolicy",
    "QueueSettings",
    "teach_gate",
    "confirmation_launches",
    "MAX_IDLE_ASKS",
    "PUSH_SHARE",
    "CONFIRM_SHARE",
]

MAX_IDLE_ASKS = 60  # trials in a row ended without a launch before a random launchable one is queued
PUSH_SHARE = 3  # at most 1/PUSH_SHARE of the launch budget goes to mem-fraction pushes
CONFIRM_SHARE = 4  # by default at most 1/CONFIRM_SHARE of the launch budget may go to confirmation
BASELINE_ENQUEUED = "autospec:baseline_enqueued"
CALIBRATION_ENQUEUED = "autospec:calibration_enqueued"
_WAITING = optuna.trial.TrialState.WAITING
_COMPLETE = optuna.trial.TrialState.COMPLETE
_RUNNING = optuna.trial.TrialState.RUNNING


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


def confirmation_launches(n_trials: int, confirm: int | None) -> int:
    """How many of `n_trials` launches may confirm the picks: `confirm` when given (0: none),
    else ``n_trials // CONFIRM_SHARE``; never all of them (one launch at least searches)."""
    wanted = n_trials // CONFIRM_SHARE if confirm is None else confirm
    return max(0, min(wanted, n_trials - 1))


def _startup(t: StoredTrial) -> Mapping[str, Any]:
    return (t.record.startup if t.record else None) or {}


@dataclass(frozen=True)
class QueueSettings:
    """What the policy is asked to do (from `OptimizeRequest`)."""

    n_trials: int
    baseline: bool = False
    learn: bool = True
    confirm: int = 0  # confirmation launches within n_trials (resolved: `confirmation_launches`)
    hardware: str | None = None
    seed: int | None = None
    references: bool = False  # queue the reference points (decided by `references_wanted`)


class QueuePolicy:
    """Queues the next trial of a run (see the module docstring).

    `make_sampler(seed_offset)` builds the proposer's sampler once the study's trials are
    known (`prepare`); `log` reports a line to the user and the events log; `answered`
    reports each proposal answered without a launch."""

    def __init__(
        self,
        compiled: CompiledSpace,
        gate: FeasibilityGate,
        store: TrialStore,
        settings: QueueSettings,
        make_sampler: Callable[[int], optuna.samplers.BaseSampler],
        log: Callable[[str], None],
        answered: Callable[[Answered], None],
    ) -> None:
        self.compiled = compiled
        self.space = compiled.space
        self.gate = gate
        self.store = store
        self.settings = settings
        self._make_sampler = make_sampler
        self._log = log
        self._answered = answered
        self.proposer: Proposer | None = None
        self.idle = 0  # trials in a row that ended without a launch
        self._rng = random.Random(settings.seed)
        self._taught: set[int] = set()
        self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="autospec-propose")
        self._next: concurrent.futures.Future[Proposal] | None = None
        objectives = self.space.objectives
        self._refs = [ObjectiveRef(i, o.metric, o.concurrency) for i, o in enumerate(objectives)]
        self._where = {i: f"C={o.concurrency}" for i, o in enumerate(objectives)}

    # ------------------------------------------------------------------ once per run
    def prepare(self, trials: Sequence[StoredTrial]) -> None:
        """Learn from `trials`, make the proposer (its sampler's seed offset by the trials
        already in the study, so a resumed study does not replay its opening proposals)
        and queue the once-per-study launches. Call under the study's lock."""
        self.teach(trials)
        sampler = self._make_sampler(len(trials))
        self.proposer = Proposer(self.compiled, sampler, self.gate, self.store.maximize, self.store.constraint_names)
        self._enqueue_baseline()
        if self.settings.learn:
            self._enqueue_once(CALIBRATION_ENQUEUED, calibration_points(self.space), Markers(calibration=True))
        if self.settings.references:
            waiting = len(self.store.read(states=(_WAITING,)))  # the baseline and calibration go first
            room = self.settings.n_trials - sum(1 for t in trials if t.counts_as_launch) - waiting
            enqueue_references(
                self.store, self.compiled.declared, self.space.server.flags, self.gate.argument_verdict, self._log, room
            )

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=True)

    def model_summary(self) -> dict[str, Any] | None:
        """With the model sampler: why the configurations never launched were not worth a
        launch, from the model fitted on every launch; else None."""
        sampler = self.proposer.scratch.sampler if self.proposer is not None else None
        if not isinstance(sampler, ModelSampler):
            return None
        return sampler.unlaunched([t for t in self.store.read() if t.markers.reference is None])  # the search's own

    def store_model_summary(self) -> None:
        summary = self.model_summary()
        if summary is not None:
            self.store.set_study_attr(MODEL_SUMMARY_KEY, summary)

    def _enqueue_baseline(self) -> None:
        """The user's current deployment, once, unless SGLang would reject it."""
        baseline = self.compiled.declared.baseline
        if not (self.settings.baseline and baseline) or self.store.study.user_attrs.get(BASELINE_ENQUEUED):
            return
        verdict = self.gate.argument_verdict({**self.compiled.declared.server.flags, **baseline})
        if verdict.ok:
            self.store.enqueue(to_distribution_params(baseline, self.space), Markers(baseline=True))
        else:
            self._log(f"baseline not measured: SGLang would reject it ({verdict.reason})")
        self.store.set_study_flag(BASELINE_ENQUEUED)

    def _enqueue_once(self, flag: str, candidates: Sequence[Mapping[str, Any]], markers: Markers) -> None:
        if self.store.study.user_attrs.get(flag):
            return
        for candidate in candidates:
            self.store.enqueue(to_distribution_params(candidate, self.space), markers)
        self.store.set_study_flag(flag)

    # ------------------------------------------------------------------ before each trial
    def teach(self, trials: Sequence[StoredTrial]) -> None:
        """Teach the gate what the finished `trials` it has not seen yet showed."""
        new = [t for t in trials if t.number not in self._taught and t.state.is_finished()]
        teach_gate(new, self.gate, hardware=self.settings.hardware)
        self._taught.update(t.number for t in new)

    def fill(self, trials: Sequence[StoredTrial]) -> bool:
        """Make sure a trial is queued, given the study's `trials` now; False when nothing
        launchable is left."""
        if any(t.state == _WAITING for t in trials):
            return True
        if self.idle >= MAX_IDLE_ASKS:
            return self._enqueue_random_remaining()
        assert self.proposer is not None, "prepare() first"
        self.teach(trials)  # what other workers measured since
        proposal = self._background_proposal()
        if proposal is not None:
            proposal = self.proposer.confirm(proposal)
        else:
            self.proposer.mirror(trials, self.store.frozen)
            proposal = self.proposer.propose()
        for answer in proposal.answered:
            self._answered(answer)
        if proposal.params is not None:
            self.proposer.expect(proposal)
            self.store.enqueue(proposal.params, Markers(predicted=proposal.predicted) if proposal.predicted else None)
            return True
        return self._enqueue_random_remaining()

    def asked(self, number: int, params: Mapping[str, Any]) -> None:
        """Trial `number` was asked with `params` (ties it to the proposal that queued it)."""
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

    def _enqueue_random_remaining(self) -> bool:
        """Queue a random configuration the gate would launch; False when none is left."""
        flags = self.space.server.flags
        remaining = [c for c in grid(self.space) if self.gate.verdict({**flags, **c}).ok]
        if not remaining:
            return False
        self.store.enqueue(to_distribution_params(self._rng.choice(remaining), self.space))
        self.idle = 0
        return True

    # ------------------------------------------------------------------ while and after a trial
    def propose_ahead(self, trial: optuna.Trial, record: TrialRecord, launched_after: int) -> None:
        """`trial` is measured and its server is being torn down: propose the next
        configuration meanwhile, unless trials are queued or `launched_after` (the launches
        once this trial is stored) already meets the budget."""
        proposer = self.proposer
        if proposer is None or launched_after >= self.settings.n_trials:
            return
        try:
            if self.store.read(states=(_WAITING,)):
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

    def finished(self, number: int, record: TrialRecord, confirmation: bool) -> None:
        """Trial `number` ended with `record` and is stored: the gate learns it, and the
        count of trials in a row without a launch moves."""
        self._taught.add(number)
        if confirmation:
            return
        if record.launched:  # failed launches too: never relaunched as duplicates
            self.gate.remember(number, record.resolved, record.values, record.constraints, record.bench)
            self.idle = 0
        else:
            self.idle += 1

    def enqueue_mem_push(self, launched: int) -> str:
        """Queue the next mem-fraction push (`autospec.study.proposing.mem_push`), unless the
        budget is met, other trials are already queued, the push share of the budget was
        proposed, or `mem_push.MAX_FAILURES` pushes failed at init (pushes go where the
        memory model is least sure; that many failed launches is what the search may
        cost). Call under the study's lock. Returns a line saying what was queued and
        why, or ""."""
        if not self.settings.learn or launched >= self.settings.n_trials:
            return ""
        trials = self.store.read()
        if self.in_confirmation_window(trials):
            return ""
        pushes = [t for t in trials if t.markers.mem_push is not None]
        budget = max(1, self.settings.n_trials // PUSH_SHARE)
        if not may_push(len(pushes), sum(1 for t in pushes if t.outcome in LAUNCH_FAILURE_KINDS), budget):
            return ""
        if any(t.state == _WAITING for t in trials):
            return ""
        launched_trials = [t for t in trials if t.launched]
        front = [
            Measured(t.number, t.candidate, t.values, _startup(t).get("max_running_requests"))
            for t in pareto_front(launched_trials, self.store.maximize, [o.concurrency for o in self.space.objectives])
            if t.values is not None and t.outcome == OK and t.markers.reference is None  # a reference's flags are SGLang's
        ]
        push = push_candidate(self.space, front, self._push_answer)
        if push is None or any(t.markers.mem_push == push.base.number for t in pushes):  # another worker queued it
            return ""
        self.store.enqueue(to_distribution_params(push.candidate, self.space), Markers(mem_push=push.base.number))
        return push.describe()

    def _push_answer(self, candidate: dict[str, Any]) -> PushAnswer:
        verdict = self.gate.verdict({**self.space.server.flags, **candidate})
        if verdict.ok:
            return "launch"
        first = self.gate.measurement_of(verdict.resolved) if verdict.status == "duplicate" else None
        return "measured" if first is not None and first.values is not None else "no"

    # ------------------------------------------------------------------ the end of the budget
    def confirmation_left(self, trials: Sequence[StoredTrial]) -> int:
        """Confirmation launches still allowed (``--confirm K`` counted over the study:
        launched ones and those running on a worker; a queued one is not made yet, and
        one the gate answered without a launch takes nothing)."""
        made = [t for t in trials if t.markers.confirm_of is not None and (t.state == _RUNNING or t.counts_as_launch)]
        return max(self.settings.confirm - len(made), 0)

    def in_confirmation_window(self, trials: Sequence[StoredTrial]) -> bool:
        """The launches left in the budget (launched and claimed ones subtracted) are no
        more than the confirmations still allowed: from here on the picks come first."""
        taken = sum(1 for t in trials if t.counts_as_launch or (t.state == _RUNNING and t.worker is not None))
        remaining = self.settings.n_trials - taken
        return 0 < remaining <= self.confirmation_left(trials)

    def standing(self, trials: Sequence[StoredTrial]) -> list[Contest]:
        """What the picks rest on now (`autospec.records.confirming.contests`)."""
        return contests(trials, self._refs, self.store.maximize)

    def enqueue_confirmation(self, trials: Sequence[StoredTrial], exhausted: bool = False) -> str:
        """Within the confirmation window (or, once the search is `exhausted`, while any
        confirmation is allowed), queue a relaunch of the configuration the picks depend
        on most (`next_confirmation`), unless something is queued already (a confirmation
        queued by an earlier run or again after an interruption included) or every pick is
        settled or tied. Call under the study's lock. Returns a line saying what was
        queued and why, or "" (the search goes on)."""
        if self.settings.confirm <= 0 or any(t.state == _WAITING for t in trials):
            return ""
        if not (self.in_confirmation_window(trials) or (exhausted and self.confirmation_left(trials) > 0)):
            return ""
        unlaunchable = {
            t.markers.confirm_of for t in trials if t.markers.confirm_of is not None and t.state == _COMPLETE and not t.launched
        }
        relaunch = next_confirmation(self.standing(trials), self._where, exclude=unlaunchable)
        target = next((t for t in trials if relaunch is not None and t.number == relaunch.trial), None)
        if relaunch is None or target is None:
            return ""
        # a reference point is relaunched as itself (its candidate comes from its marker)
        self.store.enqueue(target.retry_params, Markers(confirm_of=target.number, reference=target.markers.reference))
        made = self.settings.confirm - self.confirmation_left(trials) + 1
        return f"confirmation relaunch {made} of at most {self.settings.confirm}: {relaunch.reason}"

    def confirmation_summary(self, trials: Sequence[StoredTrial]) -> str:
        """One line: what each pick objective's leader rests on (empty before any measurement)."""
        parts = []
        for c in self.standing(trials):
            launches = c.launches[c.leader]
            if c.settled:
                how = "separated" if c.launches[c.leader] >= MIN_LAUNCHES else "separated by its interval"
            elif c.tied:
                how = "tied with trial(s) " + ", ".join(map(str, c.contenders))
            else:
                how = "not settled within the budget" + (
                    f" (within the intervals of trial(s) {', '.join(map(str, c.contenders))})" if c.contenders else ""
                )
            parts.append(f"best at {self._where[c.objective]}: trial {c.leader} on {launches} launch(es), {how}")
        return "; ".join(parts)
