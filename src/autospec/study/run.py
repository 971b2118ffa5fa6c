"""One run of a study: ask -> trial chain -> record -> tell, until the target is met.

Contract:

- ``--trials N`` counts *launched* trials (COMPLETE with ``launched`` true). Rejected,
  skipped and duplicate candidates are recorded (so samplers learn from them) but do not
  consume the budget. Running again continues the same study until it holds N launched
  trials.
- A trial that was RUNNING when an earlier tuner died is failed and its parameters are
  queued again (`autospec.study.recovery`), so it is retried, not lost or counted twice.
- KeyboardInterrupt (Ctrl-C, and SIGTERM/SIGHUP mapped to it by the CLI through the run's
  `StopSignals`) stops the current trial after its server is torn down, records it as
  FAIL (outcome "interrupted"), queues its parameters again and raises
  `StudyInterrupted`. A signal during a storage write takes effect after it, and a second
  signal SIGKILLs the server at once.
- Infeasible trials (rejected, skipped, failed at init, too many request errors,
  violated SLO) are COMPLETE with worst-case values and a violated ``feasible``
  constraint (`autospec.records.TrialStore`).
- ``--confirm K``: once N trials are launched, up to K relaunches of front configurations
  (fewest launches first; marked ``confirm_of``; not counted in N; counted over the
  study, so a resumed run does not repeat them). They measure the between-launch spread
  that every interval then includes (`autospec.records.launches`).
- Racing (on unless ``race`` is false): a level stops measuring once the configuration
  clearly cannot change the front (`autospec.study.racing`).

A `StudyRun` holds every collaborator explicitly (storage, study, launcher, gate, chain,
layout, stop policy); nothing is process-wide, so several runs can exist in one process.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import psutil

from autospec.feasibility.gate import PREFETCH_LIMIT, FeasibilityGate
from autospec.feasibility.learned import LearnedRules
from autospec.launcher import LAUNCH_FAILURE_KINDS, Launcher
from autospec.records import (
    INTERRUPTED,
    MODEL_SUMMARY_KEY,
    OK,
    STORAGE_AWAY_ERRORS,
    WITHDRAWN,
    WORKER_OPTIONS_KEY,
    Markers,
    StorageRetry,
    StorageUnavailable,
    StoredTrial,
    TrialClass,
    TrialRecord,
    TrialStore,
    launch_groups,
    pareto_front,
    read_trials,
)
from autospec.space import calibration_points, grid, suggest, to_distribution_params
from autospec.study import recovery
from autospec.study.chain import ChainHooks, TrialChain
from autospec.study.claims import StudyLock, claimed_by_others, decide_claim
from autospec.study.compiled import CompiledSpace, compile_space
from autospec.study.gpu_guard import GpuGuard
from autospec.study.heartbeat import Heartbeat
from autospec.study.identity import new_launch_id, server_record, this_worker
from autospec.study.layout import StudyLayout
from autospec.study.leftovers import stop_stragglers
from autospec.study.mem_push import Measured, PushAnswer, push_candidate
from autospec.study.model_sampler import ModelSampler, unsupported_reason
from autospec.study.observer import NullObserver, Observer
from autospec.study.owners import owner_env
from autospec.study.pending import PendingResults
from autospec.study.proposer import Proposal, Proposer
from autospec.study.racing import Race
from autospec.study.request import (
    OptimizeRequest,
    OptimizeResult,
    StudyInterrupted,
    StudyStopped,
)
from autospec.study.samplers import make_sampler, optuna_notes_silenced
from autospec.study.sidefiles import Artifacts, EventLog
from autospec.study.signals import StopSignals
from autospec.study.storage import StorageHandle, open_storage, open_study, storage_locator, study_exists
from autospec.study.teach import teach_gate

__all__ = ["StudyRun", "optimize", "count_launched"]

MAX_IDLE_ASKS = 60  # consecutive non-launching candidates before checking what is left
WAIT_POLL_S = 2.0  # how often a worker whose budget other workers hold looks again
PUSH_SHARE = 3  # at most 1/PUSH_SHARE of the launch budget goes to mem-fraction pushes
HEARTBEAT_S = 10.0
SERVER_RECORD_PATIENCE_S = 10.0  # the server record only speeds up recovery; a launch does not wait longer
# Launch failures caused by the host, not the configuration (another program took the
# port between picking and binding it): retried, never recorded as infeasible.
TRANSIENT_OUTCOMES = ("port_in_use",)
_BASELINE_ENQUEUED = "autospec:baseline_enqueued"
_CALIBRATION_ENQUEUED = "autospec:calibration_enqueued"


def count_launched(study: optuna.Study) -> int:
    """Launched trials in `study`: what ``--trials`` counts."""
    return sum(1 for t in read_trials(study) if t.counts_as_launch)


@dataclass
class _Current:
    """The trial in flight: asked, maybe launched, not yet told."""

    trial: optuna.Trial
    candidate: dict[str, Any]
    launch_id: str
    started: float
    phase: str = "ask"
    log_path: Path | None = None
    beat: Heartbeat | None = None
    idle_before_launch: float | None = None  # seconds the GPU was free before this launch
    confirm_of: int | None = None  # a confirmation relaunch of this trial's configuration
    withdrawn: bool = False  # another worker claimed its launch first (autospec.study.claims)


class StudyRun:
    """One run of a study (see the module docstring). Build it, then call `run()` once."""

    def __init__(self, req: OptimizeRequest, observer: Observer | None = None) -> None:
        self.req = req
        self.space = req.space
        self.obs: Observer = observer or NullObserver()
        self.signals = req.signals if req.signals is not None else StopSignals()
        self.launcher = req.launcher or Launcher()
        locator, local_file = storage_locator(req.storage, req.study_name, req.studies_dir)
        self.guard = GpuGuard(self.launcher, req.study_name, locator, req.allow_foreign_gpu_memory,
                              shared_slot=req.slot is not None and req.slot.shared)
        # A new study (or storage file) is created only once nothing else holds the GPU;
        # an existing one is guarded after recovery has stopped its own leftovers (_prepare).
        new_file = local_file is not None and not local_file.exists()
        if new_file:
            self.guard.clear(self.obs.message)
        self.handle: StorageHandle = open_storage(req.storage, req.study_name, req.studies_dir)
        if not new_file and not study_exists(self.handle, req.study_name):
            self.guard.clear(self.obs.message)
        # Proposals come from the proposer (a scratch study with the configured sampler);
        # the real study only asks for queued parameters, so its own sampler fills in at
        # most the parameters a calibration point leaves open.
        self.study = open_study(self.handle, req.study_name, req.space, optuna.samplers.RandomSampler(seed=req.seed))
        self.lock = StudyLock(self.handle.storage, req.study_name, self.handle.local_path)
        self.layout = StudyLayout.beside(self.handle.local_path, req.studies_dir, req.study_name)
        self.events = EventLog(self.layout.events_log)
        retry = StorageRetry(self.handle.description, patience_s=req.storage_patience_s, on_wait=self._log)
        self.store = TrialStore(
            self.study, [o.direction == "maximize" for o in req.space.objectives], [c.name for c in req.space.constraints],
            retry,
        )
        self.pending = PendingResults(self.layout.pending_dir)
        self.artifacts = Artifacts(self.layout.artifacts_dir)
        # `--sampler model` weighs uncertain memory itself (p_start); other samplers rely on
        # the gate's bisection of the band between what failed and what worked.
        self._model_sampler = req.sampler == "model" and unsupported_reason(req.space) is None
        self.gate = FeasibilityGate(
            sglang_version=req.sglang_version, preflight=req.preflight, to_argv=req.to_argv,
            learn=req.learn, remeasure=req.remeasure, rules=LearnedRules(bisect=not self._model_sampler),
        )
        self.chain = TrialChain(
            space=req.space, launcher=self.launcher, gate=self.gate, command=req.command, layout=self.layout,
            env=req.env, ready_timeout_s=req.ready_timeout_s, shared_gpu=req.slot is not None and req.slot.shared,
        )
        self.proposer: Proposer | None = None  # made in _prepare, once the space is compiled
        self.compiled = CompiledSpace(req.space)
        self.done = 0  # launched trials in the study
        self.index = 0  # launched trials, as numbered in the progress display
        self.idle = 0  # consecutive candidates answered without a launch
        self.current: _Current | None = None
        self._rng = random.Random(req.seed)
        self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="autospec-propose")
        self._next: concurrent.futures.Future[Proposal] | None = None
        # When the GPU last became free: the tuner's start (its imports and checks count as
        # GPU idle time), then the end of each teardown.
        self._gpu_free_since = _process_started()
        self._idle: list[float] = []  # GPU idle seconds before each launch of this run
        self._me = this_worker()
        # Where this worker's trials run: stored on each trial (reports, recovery) and used to
        # keep memory lessons to the hardware they were learned on.
        self._placement: dict[str, Any] = {"hardware": req.hardware}
        if req.slot is not None:
            self._placement["slot"] = req.slot.as_dict()
        self._taught: set[int] = set()  # trials the gate has learned from

    def _sampler(self, seed_offset: int) -> optuna.samplers.BaseSampler:
        seed = None if self.req.seed is None else self.req.seed + seed_offset
        if self._model_sampler:
            return ModelSampler(self.space, self.compiled.candidate, self._accepted, seed)
        name = self.req.sampler
        if name == "model":
            self._log(f"sampler: {unsupported_reason(self.space)}; using tpe")
            name = "tpe"
        return make_sampler(name, seed, len(self.req.space.objectives))

    def _accepted(self, flags: Mapping[str, Any]) -> Mapping[str, Any] | None:
        verdict = self.gate.argument_verdict(flags)
        return verdict.resolved if verdict.ok else None

    # ------------------------------------------------------------------ the run
    def run(self) -> OptimizeResult:
        try:
            with optuna_notes_silenced(), self.signals.running():
                self._prepare()
                try:
                    stopped = self._loop()
                except KeyboardInterrupt:
                    raise self._interrupted() from None
                finally:
                    if self.current is not None and self.current.beat is not None:
                        self.current.beat.stop()
            self._store_model_summary()
            if stopped == "exhausted":
                self.obs.message(
                    "every configuration of the search space is tried, rejected or predicted to fail; nothing left to launch")
            if self._idle:
                self._log(_idle_line(self._idle))
            return OptimizeResult(self.req.study_name, self.handle.description, self.done, self.req.n_trials, stopped)
        finally:
            self._background.shutdown(wait=True, cancel_futures=True)
            self.obs.finished()

    def _store_model_summary(self) -> None:
        """With --sampler model: why the configurations never launched were not worth a
        launch, from the model fitted on every launch (`autospec pareto` shows it)."""
        sampler = self.proposer.scratch.sampler if self.proposer is not None else None
        if not isinstance(sampler, ModelSampler):
            return
        try:
            summary = sampler.unlaunched(self.store.read())
            self.store.set_study_attr(MODEL_SUMMARY_KEY, summary)
        except StorageUnavailable as e:
            self._log(f"the model's summary of the configurations not launched is not stored: {e}")

    def _log(self, line: str) -> None:
        self.obs.message(line)
        self.events.write(line)

    def _prepare(self) -> None:
        """Store results kept while the storage was away, recover from an earlier tuner's
        death, teach the gate, prefetch preflight answers, queue the baseline and
        calibration launches."""
        with self.lock.held():
            lines = self.pending.replay(self.store) + recovery.recover(self.store, self.launcher, self.artifacts)
        for line in lines:
            self._log(line)
        self.guard.clear(self._log)
        trials = self.store.read()
        self._teach(trials)
        self._compile()
        # A resumed study must not replay the sampler's opening proposals: offset the seed.
        sampler = self._sampler(seed_offset=len(trials) if trials else 0)
        self.proposer = Proposer(self.compiled, sampler, self.gate, self.store.maximize, self.store.constraint_names)
        with self.lock.held():  # other workers of the study may be starting too: queue these once
            if self.req.study_options and not self.study.user_attrs.get(WORKER_OPTIONS_KEY):
                self.store.set_study_attr(WORKER_OPTIONS_KEY, dict(self.req.study_options))
            self._enqueue_baseline()
            self._enqueue_once(_CALIBRATION_ENQUEUED, self.req.learn, calibration_points(self.space),
                               Markers(calibration=True))
        self.done = self.index = sum(1 for t in trials if t.counts_as_launch)
        measured = [t.values for t in trials if t.trial_class == TrialClass.MEASURED and t.launched and t.values]
        self.obs.study_started(self.req.study_name, self.done, self.req.n_trials, measured)

    def _compile(self) -> None:
        """Narrow the space to what SGLang accepts (`compiled.compile_space`), with the
        resolver's answers fetched in one batch where that is cheaper."""
        space = self.req.space
        points = list(itertools.islice(grid(space), PREFETCH_LIMIT + 1))
        if len(points) <= PREFETCH_LIMIT:
            asked = self.gate.prefetch([{**space.server.flags, **c} for c in points])
            if asked:
                self.obs.message(f"preflight: SGLang's own argument checks resolved {asked} distinct argument sets "
                                 f"({len(points)} configurations)")
        compiled = compile_space(space, lambda flags: self.gate.argument_verdict(flags).ok, PREFETCH_LIMIT)
        if compiled.notes:
            self._log(f"search space: {compiled.accepted} of {compiled.total} configurations pass SGLang's "
                      f"argument checks; the sampler sees only those: " + "; ".join(compiled.notes))
        self.compiled = compiled
        self.space = compiled.space
        self.chain.space = compiled.space

    def _enqueue_baseline(self) -> None:
        """Queue the user's current deployment once (``--baseline``), unless SGLang would
        reject it: then say so instead."""
        baseline = self.req.space.baseline
        if not (self.req.baseline and baseline) or self.study.user_attrs.get(_BASELINE_ENQUEUED):
            return
        verdict = self.gate.argument_verdict({**self.req.space.server.flags, **baseline})
        if verdict.ok:
            self.store.enqueue(to_distribution_params(baseline, self.space), Markers(baseline=True))
        else:
            self._log(f"baseline not measured: SGLang would reject it ({verdict.reason})")
        self.store.set_study_flag(_BASELINE_ENQUEUED)

    def _enqueue_once(self, flag: str, wanted: bool, candidates: Sequence[Mapping[str, Any]], markers: Markers) -> None:
        if not wanted or self.study.user_attrs.get(flag):
            return
        for candidate in candidates:
            self.store.enqueue(to_distribution_params(candidate, self.space), markers)
        self.store.set_study_flag(flag)

    def _loop(self) -> str:
        deadline = time.monotonic() + self.req.timeout_s if self.req.timeout_s else None
        stuck_at: int | None = None
        while True:
            trials = self.store.read()
            self.done = self.index = sum(1 for t in trials if t.counts_as_launch)
            if self.done >= self.req.n_trials:
                break
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            elsewhere = len(claimed_by_others(trials))
            if self.done + elsewhere >= self.req.n_trials:
                self._wait_for_others()  # their launches may fail to start, or their worker die
                continue
            finished = sum(1 for t in trials if t.state.is_finished())
            if stuck_at == finished:  # nothing new since this worker found nothing to launch
                self._wait_for_others()
                continue
            if (self.idle >= MAX_IDLE_ASKS and not self._enqueue_random_remaining()) or not self._run_one():
                if not elsewhere:
                    return "exhausted"
                stuck_at = finished  # others may still change what is left (a failure, a retry)
                self._wait_for_others()
        while True:
            with self.lock.held():  # other workers may be queueing confirmations too
                queued = self._enqueue_confirmation()
            if not queued:
                return "target"
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            self._run_one()

    def _wait_for_others(self) -> None:
        """The rest of the budget is claimed by other workers: look again in a moment (their
        trial may end without a launch, or their worker die and its trial be retried)."""
        self.obs.phase("waiting for other workers")
        time.sleep(WAIT_POLL_S)
        with self.signals.deferred():
            self._recover_others()

    def _recover_others(self) -> None:
        """Fail and retry the trials of workers that died (on this host: by process
        identity; on any host, with an RDB storage: by heartbeat), under the study's lock
        so that two workers never retry the same trial twice."""
        if not recovery.needs_recovery(self.store.read(), heartbeat=self.handle.heartbeat):
            return
        with self.lock.held():
            lines = recovery.recover(self.store, self.launcher, self.artifacts)
            if self.handle.heartbeat:
                lines += recovery.fail_stale_heartbeats(self.store)
        for line in lines:
            self._log(line)

    def _teach(self, trials: Sequence[StoredTrial]) -> None:
        """Teach the gate what trials it has not seen yet showed (other workers' too); memory
        lessons only from the same hardware (`teach_gate`)."""
        new = [t for t in trials if t.number not in self._taught and t.state.is_finished()]
        teach_gate(new, self.gate, hardware=self.req.hardware)
        self._taught.update(t.number for t in new)

    def _enqueue_confirmation(self) -> bool:
        """Queue the next confirmation relaunch (``--confirm``); False when K were made or
        nothing is on the front."""
        trials = self.store.read()
        confirmations = [t for t in trials if t.markers.confirm_of is not None]
        if any(t.state == optuna.trial.TrialState.WAITING for t in confirmations):
            return True  # queued by an earlier run, or queued again after an interruption
        made = [t for t in confirmations  # running on another worker counts as made
                if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.RUNNING)]
        if len(made) >= self.req.confirm:
            return False
        front = pareto_front(trials, self.store.maximize)
        if not front:
            return False
        launches = {number: len(group) for number, group in launch_groups(trials).items()}
        attempts = {t.number: sum(1 for m in made if m.markers.confirm_of == t.number) for t in front}
        target = min(front, key=lambda t: (launches.get(t.number, 1) + attempts[t.number], t.number))
        self.store.enqueue(target.retry_params, Markers(confirm_of=target.number))
        self._log(f"confirmation relaunch {len(made) + 1} of {self.req.confirm}: trial {target.number}'s configuration "
                  f"({launches.get(target.number, 1)} launch(es) so far)")
        return True

    def _enqueue_random_remaining(self) -> bool:
        """Queue a random configuration the gate would launch; False when none is left."""
        flags = self.space.server.flags
        remaining = [c for c in grid(self.space) if self.gate.verdict({**flags, **c}).ok]
        if not remaining:
            return False
        self.store.enqueue(to_distribution_params(self._rng.choice(remaining), self.space))
        self.idle = 0
        return True

    # ------------------------------------------------------------------ one trial
    def _run_one(self) -> bool:
        """Ask, run the trial chain, record; False when nothing was left to ask for."""
        current = self._ask()
        if current is None:
            return False
        if current.withdrawn:
            return True
        trial = current.trial
        self.obs.trial_started(trial.number, self.index + 1, self.req.n_trials, current.candidate)
        current.beat = Heartbeat(
            (lambda: self.store.heartbeat(trial)) if self.handle.heartbeat else None, interval=HEARTBEAT_S,
        )
        # Inherited by every server process: who launched it, for recovery, the guard and doctor.
        self.chain.env = {**self.req.env, **owner_env(
            self.req.study_name, trial.number, self.handle.locator, current.launch_id, self._me["pid"],
            self._me["start_s"])}
        self.signals.live_servers.add(current.launch_id)
        hooks = ChainHooks(phase=self._phase, spawned=self._spawned, measured=self._measured)
        race = self._race() if current.confirm_of is None else None  # a relaunch is measured in full
        if race is not None:
            hooks.stop_level, hooks.level_done = race.verdict, race.level_done
        record = self.chain.run(trial.number, current.candidate, hooks, relaunch=current.confirm_of is not None)
        if record.launched:
            self._gpu_free_since = time.monotonic()
            if current.idle_before_launch is not None:
                record.seconds["gpu_idle_before_launch"] = current.idle_before_launch
                self._idle.append(current.idle_before_launch)
        current.beat.stop()
        straggler = stop_stragglers(current.launch_id, self.launcher)
        if record.outcome in TRANSIENT_OUTCOMES:
            self._record_transient(current, record)
        else:
            self._record(current, record, straggler)
        return True

    def _record(self, current: _Current, record: TrialRecord, straggler: str | None) -> None:
        """Store the trial's result, teach the gate, and queue a mem-fraction push if due."""
        trial = current.trial
        with self.signals.deferred():
            self._upload(trial, record)
            self._tell(current, record)
            self._told(current)
            self.events.write(_event_line(trial.number, record))
            if straggler:
                self.events.write(straggler)
            if record.launched and current.confirm_of is None:
                self.done += 1
                self.index += 1
                self.idle = 0
            elif current.confirm_of is None:
                self.idle += 1
        self._taught.add(trial.number)
        if record.launched and current.confirm_of is None:  # failed launches too: not relaunched
            self.gate.remember(trial.number, record.resolved, record.values, record.constraints, record.bench)
        self.obs.trial_finished(trial.number, record, self.done, self.req.n_trials)
        if record.launched and self.req.learn and self.done < self.req.n_trials:
            with self.signals.deferred(), self.lock.held():
                push = self._enqueue_mem_push(budget=max(1, self.req.n_trials // PUSH_SHARE))
            if push:
                self._log(push)

    def _ask(self) -> _Current | None:
        """Ask for the next trial and record this tuner on it (a storage write that a first
        stop signal waits for); None when nothing launchable is left."""
        with self.signals.deferred():
            self._recover_others()
            if not self.store.read(states=(optuna.trial.TrialState.WAITING,)) and not self._propose():
                return None
            trial = self.store.ask()
            launch_id = new_launch_id()
            self.current = _Current(trial, {}, launch_id, time.monotonic(),
                                    confirm_of=Markers.from_attrs(trial.user_attrs).confirm_of)
            self.current.candidate = self.compiled.candidate(suggest(trial, self.space))
            if self.proposer is not None:
                self.proposer.bind(trial.number, trial.params)
            self._claim(self.current)
        return self.current

    def _claim(self, current: _Current) -> None:
        """Record this worker on the trial if it may launch (`autospec.study.claims`); else
        withdraw it (FAIL, never retried). A trial not taken from the queue (another worker
        took the queued proposal between our look and our ask) is withdrawn as well."""
        trial = current.trial
        queued = self.store.was_queued(trial)
        with self.lock.held():
            if queued:
                claim = decide_claim(self.store.read(), trial.number, trial.params, self.req.n_trials,
                                     counts_toward_target=current.confirm_of is None)
                reason = claim.reason
            else:
                reason = "another worker took the queued proposal first"
            if not reason:
                self.store.record_worker(trial, {**this_worker(current.launch_id), **self._placement})
                return
            self.store.tell_failed(trial, TrialRecord(outcome=WITHDRAWN, candidate=current.candidate, reason=reason))
        current.withdrawn = True
        self.current = None
        self.events.write(f"trial {trial.number}: withdrawn before launch: {reason}")

    def _propose(self) -> bool:
        """Queue the proposer's next launchable configuration (`autospec.study.proposer`);
        when it gives up, a random configuration the gate would launch; when none is
        left, nothing (the loop then stops: the space is exhausted)."""
        assert self.proposer is not None
        trials = self.store.read()
        self._teach(trials)  # what other workers measured since
        proposal = self._background_proposal()
        if proposal is not None:
            proposal = self.proposer.confirm(proposal)
        else:
            self.proposer.mirror(trials, self.store.frozen)
            proposal = self.proposer.propose()
        for answer in proposal.answered:
            self.obs.not_launched(answer.candidate, answer.verdict.status, answer.verdict.reason)
            self.events.write(f"proposal answered without a launch: {answer.verdict.status}: {answer.verdict.reason} "
                              f"candidate={answer.candidate}")
        if proposal.params is not None:
            self.proposer.expect(proposal)
            self.store.enqueue(proposal.params, Markers(predicted=proposal.predicted) if proposal.predicted else None)
            return True
        return self._enqueue_random_remaining()

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

    def _race(self) -> Race | None:
        """The front this trial races against (None: racing is off, or the storage is away)."""
        if not self.req.race or not self.space.bench.precision:
            return None
        try:
            return Race.against(self.space, self.store.read())
        except StorageUnavailable:
            return None

    def _phase(self, name: str) -> None:
        if self.current is not None and self.signals.count == 0:  # keep the phase a stop signal arrived in
            self.current.phase = name
        if name == "launch" and self.current is not None:
            self.current.idle_before_launch = time.monotonic() - self._gpu_free_since
        self.obs.phase(name)

    def _measured(self, record: TrialRecord) -> None:
        """The benchmark is over and the server is being torn down: propose the next
        configuration meanwhile (`Proposer.provisional`), unless trials are queued."""
        current = self.current
        if current is None or self.proposer is None or self.done + 1 >= self.req.n_trials:
            return
        try:
            if self.store.read(states=(optuna.trial.TrialState.WAITING,)):
                return
        except StorageUnavailable:  # the result is stored (or kept) after the teardown; no head start now
            return
        proposer, trial = self.proposer, current.trial

        def propose() -> Proposal:
            # This trial first: once it is marked as mirrored, whether the main thread has
            # stored it yet no longer matters.
            proposer.provisional(trial.number, trial.params, trial.distributions, record)
            proposer.mirror(self.store.read(), self.store.frozen)
            return proposer.propose(self.gate.argument_verdict)

        self._next = self._background.submit(propose)

    def _spawned(self, info: dict[str, Any]) -> None:
        current = self.current
        assert current is not None
        current.log_path = self.layout.server_log(current.trial.number)
        server = server_record(int(info["pid"]), int(info.get("pgid", info["pid"])), info.get("port"), str(current.log_path))
        with self.signals.deferred():
            try:
                self.store.record_server(current.trial, server, patience_s=SERVER_RECORD_PATIENCE_S)
            except StorageUnavailable as exc:  # recovery still finds the server by its launch ID
                self.events.write(f"trial {current.trial.number}: server record not stored ({exc})")

    def _upload(self, trial: optuna.Trial, record: TrialRecord) -> None:
        """Attach the server log and bench JSON (a courtesy: a storage that is away does
        not stop the run here; the result itself is what must not be lost)."""
        if record.log_path:
            with contextlib.suppress(*STORAGE_AWAY_ERRORS):
                self.artifacts.upload(trial, record.log_path)

    def _tell(self, current: _Current, record: TrialRecord, failed: bool = False) -> StoredTrial | None:
        """Store the result; if the storage stays away, keep it in a pending file and stop
        the run (the server is already torn down)."""
        number = current.trial.number
        try:
            stored = (self.store.tell_failed if failed else self.store.tell)(current.trial, record)
        except StorageUnavailable as exc:
            path = self.pending.save(number, record, failed=failed)
            self._told(current)
            self.events.write(_event_line(number, record) + f" (storage away: kept in {path})")
            raise StudyStopped(
                f"{exc}; trial {number}'s server is torn down and its result is kept in {path}, "
                "recorded when the same command runs again"
            ) from None
        if stored.outcome != record.outcome:  # another worker's recovery ended it first
            self._log(f"trial {number} was ended by another worker ({stored.outcome}) before this tuner stored its "
                      f"result ({record.outcome}); that worker queued it again, this result is in the events file only")
        return stored if failed else None

    def _told(self, current: _Current) -> None:
        self.signals.live_servers.discard(current.launch_id)
        self.current = None

    def _record_transient(self, current: _Current, record: TrialRecord) -> None:
        """Not the configuration's fault: FAIL (samplers ignore it), measure it again."""
        trial = current.trial
        with self.signals.deferred():
            self._upload(trial, record)
            failed = self._tell(current, record, failed=True)
            if failed is not None:
                recovery.requeue(self.store, failed, self.store.read())
            self._told(current)
            self.events.write(_event_line(trial.number, record) + " (transient: queued again)")
        self.obs.trial_finished(trial.number, record, self.done, self.req.n_trials)

    def _enqueue_mem_push(self, budget: int) -> str:
        """Queue the next mem-fraction push (`autospec.study.mem_push`), unless other trials
        are already queued, `budget` pushes were proposed, or a push already failed at init
        (pushes go where the memory model is least sure; one failed launch is what that
        search may cost). Returns a line saying what was queued and why, or "" when nothing was."""
        trials = self.store.read()
        pushes = [t for t in trials if t.markers.mem_push is not None]
        if len(pushes) >= budget or any(t.outcome in LAUNCH_FAILURE_KINDS for t in pushes):
            return ""
        if any(t.state == optuna.trial.TrialState.WAITING for t in trials):
            return ""
        launched = [t for t in trials if t.launched]
        front = [
            Measured(t.number, t.candidate, t.values, ((t.record.startup if t.record else None) or {}).get("max_running_requests"))
            for t in pareto_front(launched, self.store.maximize) if t.values is not None and t.outcome == OK
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

    # ------------------------------------------------------------------ stop signals
    def _interrupted(self) -> StudyInterrupted:
        note = ""
        if self.current is not None:
            with self.signals.deferred():
                note = self._record_interrupted(self.current)
        return StudyInterrupted(
            f"interrupted{note}: {self.done} of {self.req.n_trials} trials are stored in {self.handle.description}; "
            "run the same command again to continue"
        )

    def _record_interrupted(self, current: _Current) -> str:
        """Record the interrupted trial as FAIL ("interrupted") with its server log, and
        queue its parameters again. Returns a note for the message ("" when all went well)."""
        trial = current.trial
        if current.beat is not None:
            current.beat.stop()
        second = self.signals.count >= 2
        how = "server killed at once by a second signal" if second else "server torn down"
        if current.log_path is None:
            how = "no server was running"
        try:
            straggler = stop_stragglers(current.launch_id, self.launcher)
            if straggler:
                self.events.write(straggler)
            if self.store.is_finished(trial):
                return ""
            log_path = str(current.log_path) if current.log_path is not None else None
            record = TrialRecord(
                outcome=INTERRUPTED, candidate=current.candidate, reason=f"stopped by a signal during {current.phase}; {how}",
                launched=current.log_path is not None, log_path=log_path,
            )
            if log_path is not None and Path(log_path).is_file():
                self.artifacts.upload(trial, log_path)
            failed = self.store.tell_failed(trial, record)
            retried = recovery.requeue(self.store, failed, self.store.read())
            self.events.write(
                f"trial {trial.number}: outcome=interrupted during {current.phase} after "
                f"{time.monotonic() - current.started:.1f}s; {how}"
                + ("; its parameters are queued again" if retried else "")
            )
            return ""
        except Exception as exc:  # the storage may be what failed; the next run recovers the trial
            return f" (trial {trial.number} could not be recorded: {type(exc).__name__}; the next run retries it)"


def optimize(req: OptimizeRequest, observer: Observer | None = None) -> OptimizeResult:
    """Run (or continue) the study of `req` until it holds `req.n_trials` launched trials."""
    with optuna_notes_silenced():
        run = StudyRun(req, observer)
    return run.run()


def _process_started() -> float:
    """This process's start on the `time.monotonic` clock."""
    return time.monotonic() - (time.time() - psutil.Process().create_time())


def _idle_line(idle: Sequence[float]) -> str:
    """How long the GPU waited for the tuner before each launch of this run."""
    between = sorted(idle[1:])
    text = (f"GPU idle before the first launch of this run: {idle[0]:.1f} s since the tuner started "
            "(imports, checks, recovery, preflight, first proposal)")
    if between:
        text += (f"; between launches: median {between[len(between) // 2]:.2f} s, "
                 f"max {between[-1]:.2f} s over {len(between)} launches")
    return text


def _event_line(number: int, record: TrialRecord) -> str:
    secs = " ".join(f"{k}={v:.1f}s" for k, v in record.seconds.items())
    values = "" if record.values is None else " values=" + ",".join(f"{v:.1f}" for v in record.values)
    reason = f" reason={record.reason!r}" if record.reason else ""
    return (f"trial {number}: outcome={record.outcome} launched={record.launched}{values} {secs}{reason} "
            f"candidate={dict(record.candidate)}")
