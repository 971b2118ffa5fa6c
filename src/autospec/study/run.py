"""One run of a study: ask -> trial chain -> record -> tell, until the target is met.

Contract:

- ``--trials N`` counts *launched* trials (COMPLETE with ``launched`` true). Rejected,
  skipped and duplicate candidates are recorded (so samplers learn from them) but do not
  consume the budget. Running again continues the same study until it holds N launched
  trials.
- A trial that was RUNNING when an earlier tuner died is failed and its parameters are
  queued again (`autospec.study.processes.recovery`), so it is retried, not lost or
  counted twice.
- KeyboardInterrupt (Ctrl-C, and SIGTERM/SIGHUP mapped to it by the CLI through the run's
  `StopSignals`) stops the current trial after its server is torn down, records it as
  FAIL (outcome "interrupted"), queues its parameters again and raises
  `StudyInterrupted`. A signal during a storage write takes effect after it, and a second
  signal SIGKILLs the server at once.
- Infeasible trials (rejected, skipped, failed at init, too many request errors,
  violated SLO) are COMPLETE with worst-case values and a violated ``feasible``
  constraint (`autospec.records.TrialStore`).
- Several workers share one study: each trial is claimed before its launch
  (`autospec.study.claims`); a worker whose claim is refused goes on, and waits while
  the rest of the budget is claimed by others, because their launches can still end
  without counting (a transient failure, a dead worker) and then it takes over.
- ``--confirm K`` (default: a quarter of N): within the last K launches of the budget,
  relaunches of the configurations the picks depend on, while a pick is unsettled
  (`autospec.study.proposing.confirmations`, `autospec.records.confirming`); they count in N,
  and K is counted over the study, so a resumed run does not repeat them.
- Racing (on unless ``race`` is false): a level stops measuring once the configuration
  clearly cannot change the front (`autospec.study.racing`).

What is queued next is the launch policies' decision (`LaunchQueue` asks them at the
moments of the `Moment` enum), how a trial's record is stored the
`TrialFinisher`'s; `autospec.study.building.build_run` makes every collaborator from an
`OptimizeRequest`, so a `StudyRun` holds nothing process-wide.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.launcher import Launcher
from autospec.records import (
    WITHDRAWN,
    WORKER_OPTIONS_KEY,
    Markers,
    StorageUnavailable,
    StoredTrial,
    TrialClass,
    TrialRecord,
    TrialStore,
)
from autospec.records.stream import stream_lengths
from autospec.space import suggest
from autospec.study.chain import ChainHooks, TrialChain
from autospec.study.claims import StudyLock, claim_trial, claimed_by_others
from autospec.study.files import Artifacts, EventLog, PendingResults, StudyLayout
from autospec.study.finishing import TrialFinisher
from autospec.study.in_flight import InFlight, record_interrupted
from autospec.study.nothing_starts import raise_if_nothing_can_start
from autospec.study.processes import recovery
from autospec.study.processes.gpu_guard import GpuGuard
from autospec.study.processes.identity import invocation_id, new_launch_id, server_record, this_worker
from autospec.study.processes.owners import owner_env
from autospec.study.processes.recovery import Heartbeat
from autospec.study.processes.stopping import StopSignals, stop_stragglers
from autospec.study.proposing.compiled import CompiledSpace
from autospec.study.proposing.policy import Moment
from autospec.study.proposing.queue import LaunchQueue
from autospec.study.proposing.references import ask_reference, reference_of
from autospec.study.proposing.samplers import optuna_notes_silenced
from autospec.study.racing import Race
from autospec.study.request import Observer, OptimizeRequest, OptimizeResult, StopReason, StudyInterrupted
from autospec.study.storage import StorageHandle

__all__ = ["StudyRun", "Asked", "InFlight", "GpuIdle", "count_launched"]

WAIT_POLL_S = 2.0  # how often a worker whose budget other workers hold looks again
HEARTBEAT_S = 10.0
SERVER_RECORD_PATIENCE_S = 10.0  # the server record only speeds up recovery; a launch does not wait longer


def count_launched(trials: Sequence[StoredTrial]) -> int:
    """Launched trials among `trials`: what ``--trials`` counts."""
    return sum(1 for t in trials if t.counts_as_launch)


class Asked(enum.Enum):
    """What asking for the next trial came to."""

    LAUNCHED = "launched"  # a trial was claimed and went through the trial chain (whatever its outcome)
    WITHDRAWN = "withdrawn"  # a trial was asked, but another worker's claim came first; nothing ran
    NOTHING = "nothing"  # nothing launchable is left to ask for


@dataclass
class GpuIdle:
    """How long the GPU waited for the tuner before each launch of this run: from
    `free_since` (the tuner's start, then the end of each teardown) to the launch. Before
    the first launch, `mark` splits that wait into what the tuner was doing."""

    free_since: float
    gaps: list[float] = field(default_factory=list)
    phases: list[tuple[str, float]] = field(default_factory=list)  # (what ended, when), before the first launch
    started: float = field(init=False)  # the tuner's start

    def __post_init__(self) -> None:
        self.started = self.free_since

    def since_free(self) -> float:
        return time.monotonic() - self.free_since

    def mark(self, what: str) -> None:
        """`what` ended now; kept only while no launch has started."""
        if not self.gaps:
            self.phases.append((what, time.monotonic()))

    def freed(self, gap_before: float | None) -> None:
        """A launched trial's server is torn down; `gap_before` is the wait before its launch."""
        self.free_since = time.monotonic()
        if gap_before is not None:
            self.gaps.append(gap_before)

    def line(self) -> str:
        ends = [*self.phases, ("the first proposal", self.started + self.gaps[0])]
        parts, before = [], self.started
        for what, t in ends:
            parts.append(f"{what} {max(t - before, 0.0):.1f} s")
            before = t
        text = f"GPU idle before the first launch of this run: {self.gaps[0]:.1f} s since the tuner started ({'; '.join(parts)})"
        between = sorted(self.gaps[1:])
        if between:
            text += (
                f"; between launches: median {between[len(between) // 2]:.2f} s, "
                f"max {between[-1]:.2f} s over {len(between)} launches"
            )
        return text


@dataclass
class StudyRun:
    """One run of a study (see the module docstring). Build it with
    `autospec.study.building.build_run`, then call `run()` once."""

    req: OptimizeRequest
    compiled: CompiledSpace
    handle: StorageHandle
    store: TrialStore
    lock: StudyLock
    queue: LaunchQueue
    finisher: TrialFinisher
    chain: TrialChain
    launcher: Launcher
    guard: GpuGuard
    layout: StudyLayout
    pending: PendingResults
    artifacts: Artifacts
    events: EventLog
    signals: StopSignals
    obs: Observer
    idle: GpuIdle
    sleep: Callable[[float], None] = time.sleep
    launched: int = field(default=0, init=False)  # launched trials in the study, as last read
    current: InFlight | None = field(default=None, init=False)

    # ------------------------------------------------------------------ the run
    def run(self) -> OptimizeResult:
        try:
            with optuna_notes_silenced(), self.signals.running():
                self.idle.mark("start-up (imports, storage, search space, preflight)")
                self._prepare()
                try:
                    stopped = self._loop()
                except KeyboardInterrupt:
                    raise self._interrupted() from None
                finally:
                    if self.current is not None and self.current.beat is not None:
                        self.current.beat.stop()
            self._summarize()
            if stopped is StopReason.EXHAUSTED:
                self.obs.message(
                    "every configuration of the search space is tried, rejected or predicted to fail; nothing left to launch"
                )
            if self.idle.gaps:
                self._log(self.idle.line())
            return OptimizeResult(self.req.study_name, self.handle.description, self.launched, self.req.n_trials, stopped)
        finally:
            self.queue.close()
            self.obs.finished()

    def _log(self, line: str) -> None:
        self.obs.message(line)
        self.events.write(line)

    def _prepare(self) -> None:
        """Store results kept while the storage was away, recover from an earlier tuner's
        death, clear the GPU, and let the queue policy learn and queue its once-per-study
        launches."""
        with self.lock.held():
            lines = self.pending.replay(self.store) + recovery.recover(self.store, self.launcher, self.artifacts)
        for line in lines:
            self._log(line)
        self.guard.clear(self._log)
        self.idle.mark("recovery and the GPU check")
        trials = self.store.read()
        with self.lock.held():  # other workers of the study may be starting too: queue these once
            if self.req.study_options and not self.store.study.user_attrs.get(WORKER_OPTIONS_KEY):
                self.store.set_study_attr(WORKER_OPTIONS_KEY, dict(self.req.study_options))
            self.queue.started(trials)
            self.queue.queue(Moment.START, trials, count_launched(trials))
        self.launched = count_launched(trials)
        self.idle.mark("the launch queues")
        measured = {t.number: t.values for t in trials if t.trial_class == TrialClass.MEASURED and t.launched and t.values}
        self.obs.study_started(self.req.study_name, self.launched, self.req.n_trials, measured)

    def _summarize(self) -> None:
        """Store what the launch policies keep at the end (the model's summary of the
        configurations not launched) and write their lines (what each pick rests on) to the
        events log."""
        try:
            lines = self.queue.summary(self.store.read())
        except StorageUnavailable as e:
            self._log(f"the model's summary of the configurations not launched is not stored: {e}")
            return
        for line in lines:  # for the record; what to deploy is the CLI's answer (autospec.report)
            self.events.write(line)

    def _loop(self) -> StopReason:
        deadline = time.monotonic() + self.req.timeout_s if self.req.timeout_s else None
        stuck_at: int | None = None
        while True:
            trials = self.store.read()
            self.launched = count_launched(trials)
            if self.launched >= self.req.n_trials:
                break
            raise_if_nothing_can_start(trials, self.compiled, invocation_id(), self.req.model_size)
            if deadline is not None and time.monotonic() >= deadline:
                return StopReason.TIMEOUT
            elsewhere = len(claimed_by_others(trials))
            finished = sum(1 for t in trials if t.state.is_finished())
            if self.launched + elsewhere >= self.req.n_trials or stuck_at == finished:
                # Their launches may end without counting, or their worker die; and what
                # this worker found exhausted may change once something else finishes.
                self._wait_for_others()
                continue
            if self._queue_locked(Moment.TURN):
                trials = self.store.read()
            if self._step(trials) is Asked.NOTHING:
                if not elsewhere and self._queue_locked(Moment.NOTHING_LEFT):
                    continue  # nothing is left to search: the rest of the budget may confirm
                if not elsewhere:
                    return StopReason.EXHAUSTED
                stuck_at = finished
                self._wait_for_others()
        return StopReason.TARGET

    def _queue_locked(self, moment: Moment) -> bool:
        """Let the launch policies acting at `moment` queue, under the study's lock (other
        workers queue too). True when a trial is queued afterwards."""
        if not self.queue.acts_at(moment):
            return False
        with self.signals.deferred(), self.lock.held():
            return self.queue.queue(moment, self.store.read(), self.launched)

    def _wait_for_others(self) -> None:
        self.obs.phase("waiting for other workers")
        self.sleep(WAIT_POLL_S)
        with self.signals.deferred():
            self._recover_others(self.store.read())

    def _recover_others(self, trials: Sequence[StoredTrial]) -> bool:
        """`recovery.recover_others` (under the study's lock); True when it looked."""
        lines = recovery.recover_others(trials, self.store, self.lock, self.launcher, self.artifacts, self.handle.heartbeat)
        for line in lines or ():
            self._log(line)
        return lines is not None

    # ------------------------------------------------------------------ one trial
    def _step(self, trials: Sequence[StoredTrial]) -> Asked:
        """Ask for the next trial given the study's `trials` now, claim it, run it, record it."""
        asked = self._ask(trials)
        if isinstance(asked, Asked):
            return asked
        self._launch(asked, trials)
        return Asked.LAUNCHED

    def _ask(self, trials: Sequence[StoredTrial]) -> InFlight | Asked:
        """The next trial, claimed by this worker, or why there is none (storage writes a
        first stop signal waits for)."""
        with self.signals.deferred():
            if self._recover_others(trials):
                trials = self.store.read()
            if not self.queue.queue(Moment.ASK, trials, self.launched):
                return Asked.NOTHING
            trial = self.store.ask()
            current = InFlight(
                trial, {}, new_launch_id(), time.monotonic(), confirm_of=Markers.from_attrs(trial.user_attrs).confirm_of
            )
            current.reference = reference_of(trial)
            reference = ask_reference(trial, self.compiled.declared, self.compiled.space.server.flags)
            current.candidate = (
                reference if reference is not None else self.compiled.candidate(suggest(trial, self.compiled.space))
            )
            self.queue.asked(trial.number, trial.params)
            worker = {**this_worker(current.launch_id), **self.req.placement()}

            def withdraw(reason: str) -> None:
                self.finisher.finish(trial, TrialRecord(outcome=WITHDRAWN, candidate=current.candidate, reason=reason))

            if not claim_trial(self.store, self.lock, trial, self.req.n_trials, True, worker, withdraw):
                return Asked.WITHDRAWN
            self.current = current
        return current

    def _launch(self, current: InFlight, trials: Sequence[StoredTrial] = ()) -> None:
        """Run the claimed trial through the chain and record what it gave; its levels go
        on to the study's stream (`records.stream`) as `trials`, read before the ask, show it."""
        trial = current.trial
        self.obs.trial_started(trial.number, self.launched + 1, self.req.n_trials, current.candidate)
        current.beat = Heartbeat(
            (lambda: self.store.heartbeat(trial)) if self.handle.heartbeat else None,
            interval=HEARTBEAT_S,
        )
        me = this_worker()
        # Inherited by every server process: who launched it, for recovery, the guard and doctor.
        env = owner_env(self.req.study_name, trial.number, self.handle.locator, current.launch_id, me["pid"], me["start_s"])
        self.signals.live_servers.add(current.launch_id)
        record = self.chain.run(
            trial.number,
            current.candidate,
            self._hooks(current),
            relaunch=current.confirm_of is not None or current.reference is not None,
            env=env,
            stream=stream_lengths(trials),
        )
        if record.launched:
            if current.idle_before_launch is not None:
                record.seconds["gpu_idle_before_launch"] = current.idle_before_launch
            self.idle.freed(current.idle_before_launch)
        current.beat.stop()
        straggler = stop_stragglers(current.launch_id, self.launcher)
        self._finish(current, record)
        if straggler:
            self.events.write(straggler)

    def _hooks(self, current: InFlight) -> ChainHooks:
        hooks = ChainHooks(
            phase=lambda name: self._phase(current, name),
            spawned=lambda info: self._spawned(current, info),
        )
        if current.reference is None:  # a reference point is not shown to the proposer (`proposing.references`)
            hooks.measured = lambda record: self.queue.measured(current.trial, record, self.launched + 1)
        off_search = current.confirm_of is not None or current.reference is not None
        race = None if off_search else Race.for_trial(self.compiled.space, self.store, self.req.race, self.req.machine)
        if race is not None:
            hooks.stop_level, hooks.level_done = race.verdict, race.level_done
        return hooks

    def _phase(self, current: InFlight, name: str) -> None:
        if self.signals.count == 0:  # keep the phase a stop signal arrived in
            current.phase = name
        if name == "launch":
            current.idle_before_launch = self.idle.since_free()
        self.obs.phase(name)

    def _spawned(self, current: InFlight, info: dict[str, Any]) -> None:
        current.log_path = self.layout.server_log(current.trial.number)
        server = server_record(int(info["pid"]), int(info.get("pgid", info["pid"])), info.get("port"), str(current.log_path))
        with self.signals.deferred():
            try:
                self.store.record_server(current.trial, server, patience_s=SERVER_RECORD_PATIENCE_S)
            except StorageUnavailable as exc:  # recovery still finds the server by its launch ID
                self.events.write(f"trial {current.trial.number}: server record not stored ({exc})")

    def _finish(self, current: InFlight, record: TrialRecord) -> None:
        """Store the trial's record (`TrialFinisher`); the launch policies learn it, and
        may queue a launch after a launch (a mem-fraction push)."""
        number, confirmation = current.trial.number, current.confirm_of is not None
        with self.signals.deferred():
            try:
                ending = self.finisher.finish(current.trial, record)
            finally:
                self._told(current)
            if not ending.failed:
                self.queue.finished(number, record, confirmation or current.reference is not None)
                if record.launched:
                    self.launched += 1
        self.obs.trial_finished(number, record, self.launched, self.req.n_trials)
        if record.launched and not ending.failed:
            self._queue_locked(Moment.LAUNCHED)

    def _told(self, current: InFlight) -> None:
        self.signals.live_servers.discard(current.launch_id)
        self.current = None

    # ------------------------------------------------------------------ stop signals
    def _interrupted(self) -> StudyInterrupted:
        note = ""
        if self.current is not None:
            with self.signals.deferred():
                try:
                    second = self.signals.count >= 2
                    note = record_interrupted(self.current, self.store, self.finisher, self.launcher, self.events, second)
                finally:
                    self._told(self.current)
        return StudyInterrupted(
            f"interrupted{note}: {self.launched} of {self.req.n_trials} trials are stored in {self.handle.description}; "
            "run the same command again to continue"
        )
