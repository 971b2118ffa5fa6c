"""The optimisation loop: ask -> trial chain -> record -> tell, until the target is met.

Contract:

- ``--trials N`` counts *launched* trials (COMPLETE with ``launched`` true). Rejected,
  skipped and duplicate candidates are recorded (so samplers learn from them) but do not
  consume the budget. Re-running the same command continues the same study until it
  holds N launched trials.
- A trial that was RUNNING when an earlier tuner died is failed and its parameters are
  enqueued again (`autospec.study.recovery`), so it is retried, not lost or counted twice.
- KeyboardInterrupt (Ctrl-C, and SIGTERM/SIGHUP mapped to it by the CLI) stops the
  current trial after its server is torn down, records it as FAIL (outcome
  "interrupted"), queues its parameters again and raises `StudyInterrupted`. With the
  CLI's handler (`StopSignals`), a signal during a storage write takes effect after it,
  and a second signal SIGKILLs the server at once.
- Infeasible trials (rejected, skipped, failed at init, too many request errors,
  violated SLO) are COMPLETE with worst-case values and a violated ``feasible``
  constraint: TPE, GPSampler and NSGA-II all read COMPLETE trials with constraints, none
  of them can put such a trial on the Pareto front.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import optuna

from autospec.config import SearchSpace
from autospec.errors import RuntimeFailure, UsageError
from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import Launcher
from autospec.space import calibration_points, grid, suggest, to_distribution_params
from autospec.study import recovery
from autospec.study.mem_push import Measured, PushAnswer, push_candidate
from autospec.study.signals import STOP_SIGNALS, StopSignals
from autospec.study.chain import ChainHooks, TrialChain, worst_values
from autospec.study.records import FEASIBLE_KEY, OK, SERVER_KEY, WORKER_KEY, TrialRecord
from autospec.study.storage import open_storage, open_study

__all__ = [
    "OptimizeRequest", "OptimizeResult", "Observer", "StudyInterrupted", "StopSignals", "STOP_SIGNALS",
    "optimize", "make_sampler", "count_launched",
]

SAMPLERS = ("tpe", "gp", "nsga2", "random")
MAX_IDLE_ASKS = 60  # consecutive non-launching candidates before checking what is left
PREFETCH_LIMIT = 5000  # grid points resolved up front in one preflight batch
PUSH_SHARE = 3  # at most 1/PUSH_SHARE of the launch budget goes to mem-fraction pushes
# Launch failures caused by the host, not the configuration (another program took the
# port between picking and binding it): retried, never recorded as infeasible.
TRANSIENT_OUTCOMES = ("port_in_use",)




class StudyInterrupted(RuntimeFailure):
    """The user stopped the study; everything measured is stored."""

    exit_code = 130


class Observer(Protocol):
    def study_started(self, study_name: str, done: int, target: int, measured: Sequence[Sequence[float]] = ()) -> None:
        """`measured`: objective values of the feasible trials already in the study."""
    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None: ...
    def phase(self, name: str) -> None: ...
    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None: ...
    def message(self, text: str) -> None: ...


class NullObserver:
    def study_started(self, study_name, done, target, measured=()): pass
    def trial_started(self, number, index, target, candidate): pass
    def phase(self, name): pass
    def trial_finished(self, number, record, done, target): pass
    def message(self, text): pass


@dataclass
class OptimizeRequest:
    space: SearchSpace
    study_name: str
    n_trials: int
    command: Sequence[str]
    studies_dir: Path = Path("studies")
    storage: str | None = None
    sampler: str = "tpe"
    seed: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    launcher: Launcher | None = None
    preflight: Any | None = None
    to_argv: Callable[[Mapping[str, Any]], list[str]] | None = None
    sglang_version: str = "0.5.23"
    baseline: bool = False
    timeout_s: float | None = None
    learn: bool = True
    remeasure: bool = False
    ready_timeout_s: float | None = None


@dataclass
class OptimizeResult:
    study_name: str
    storage: str
    launched: int
    target: int
    stopped_because: str  # "target" | "timeout" | "exhausted"


def make_sampler(name: str, seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True, group=True)
    if name == "gp":
        if importlib.util.find_spec("torch") is None:  # Optuna 5.0's GPSampler runs on PyTorch
            raise UsageError("--sampler gp needs PyTorch; pip install torch (the CPU build is enough), or use tpe")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=8)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=8)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise UsageError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")


def count_launched(study: optuna.Study) -> int:
    return sum(
        1 for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.user_attrs.get("launched")
    )


class _Heartbeat:
    """Records a heartbeat for the running trial (RDB storages) from a daemon thread."""

    def __init__(self, handle, trial_id: int, interval: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(handle, trial_id, interval), daemon=True)
        if handle.heartbeat:
            handle.record_heartbeat(trial_id)
            self._thread.start()

    def _run(self, handle, trial_id: int, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                handle.record_heartbeat(trial_id)
            except Exception:  # a transient DB error must not kill the trial
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def _store(trial: optuna.Trial, record: TrialRecord, space: SearchSpace, artifacts) -> tuple[list[float], optuna.trial.TrialState]:
    """Write the record onto the running trial; return what to `tell`."""
    for key, value in record.user_attrs().items():
        trial.set_user_attr(key, value)
    feasible = record.values is not None and record.outcome in (OK, "constraint_violated", "duplicate")
    # Every trial carries the same constraint keys (GPSampler in Optuna 5.0 refuses studies
    # whose trials have different numbers of constraints); an SLO never measured is neutral.
    slo = {c.name: record.constraints.get(c.name, 0.0) for c in space.constraints}
    constraints = {FEASIBLE_KEY: 0.0 if feasible else 1.0, **slo}
    for key, value in constraints.items():
        trial.set_constraint(key, value)
    # optuna-dashboard 0.21.0 reads only the old list-valued attribute.
    trial.storage.set_trial_system_attr(trial._trial_id, "constraints", list(constraints.values()))
    if artifacts is not None and record.log_path:
        artifacts.upload(trial, record.log_path)
    values = list(record.values) if feasible else worst_values(space)
    return values, optuna.trial.TrialState.COMPLETE


def optimize(req: OptimizeRequest, observer: Observer | None = None) -> OptimizeResult:
    with warnings.catch_warnings():
        # Optuna 5.0 flags heartbeats, metric names and grouped TPE as experimental, and
        # warns that heartbeats are meant for Study.optimize; autospec drives them itself.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        return _optimize(req, observer)


def _optimize(req: OptimizeRequest, observer: Observer | None) -> OptimizeResult:
    obs = observer or NullObserver()
    handle = open_storage(req.storage, req.study_name, req.studies_dir)
    sampler = make_sampler(req.sampler, req.seed, len(req.space.objectives))
    study = open_study(handle, req.study_name, req.space, sampler)
    if req.seed is not None and study.trials:
        # A resumed study must not replay the sampler's opening proposals: offset the seed.
        study.sampler = make_sampler(req.sampler, req.seed + len(study.trials), len(req.space.objectives))
    launcher = req.launcher or Launcher()
    STOP_SIGNALS.reset()
    work_dir = (handle.local_path.parent if handle.local_path else req.studies_dir) / f"{req.study_name}-trials"
    events = recovery.EventLog(work_dir.parent / f"{req.study_name}-events.log")
    artifacts = recovery.Artifacts(work_dir.parent / f"{req.study_name}-artifacts")

    recovered = recovery.recover(study, launcher, artifacts)
    for line in recovered:
        obs.message(line)
        events.write(line)

    gate = FeasibilityGate(
        sglang_version=req.sglang_version, preflight=req.preflight, to_argv=req.to_argv,
        learn=req.learn, remeasure=req.remeasure,
    )
    recovery.replay(study, gate)
    points = list(itertools.islice(grid(req.space), PREFETCH_LIMIT + 1))
    if len(points) <= PREFETCH_LIMIT and gate.prefetch([{**req.space.server.flags, **c} for c in points]):
        obs.message(f"preflight: resolved {len(points)} configurations of the space with the server's own argument checks")
    if req.baseline and req.space.baseline and not study.user_attrs.get("autospec:baseline_enqueued"):
        study.enqueue_trial(to_distribution_params(req.space.baseline, req.space), user_attrs={"baseline": True})
        study.set_user_attr("autospec:baseline_enqueued", True)
    if req.learn and not study.user_attrs.get("autospec:calibration_enqueued"):
        for point in calibration_points(req.space):
            study.enqueue_trial(to_distribution_params(point, req.space), user_attrs={"calibration": True})
        study.set_user_attr("autospec:calibration_enqueued", True)

    chain = TrialChain(
        space=req.space, launcher=launcher, gate=gate, command=req.command, work_dir=work_dir,
        env=req.env, ready_timeout_s=req.ready_timeout_s,
    )
    done = count_launched(study)
    target = req.n_trials
    measured = [t.values for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                if t.user_attrs.get("outcome") == OK and t.user_attrs.get("launched")]
    obs.study_started(req.study_name, done, target, measured)
    deadline = time.monotonic() + req.timeout_s if req.timeout_s else None
    idle = 0
    index = done
    stopped = "target"
    rng = random.Random(req.seed)
    current: _Current | None = None  # the trial asked and not yet told
    try:
        while done < target:
            if deadline is not None and time.monotonic() >= deadline:
                stopped = "timeout"
                break
            if idle >= MAX_IDLE_ASKS:
                remaining = [c for c in grid(req.space) if gate.verdict({**req.space.server.flags, **c}).ok]
                if not remaining:
                    stopped = "exhausted"
                    break
                study.enqueue_trial(to_distribution_params(rng.choice(remaining), req.space))
                idle = 0
            with STOP_SIGNALS.deferred():  # storage writes: a first Ctrl-C waits for them
                if handle.heartbeat:
                    for line in recovery.fail_stale_heartbeats(study):
                        obs.message(line)
                        events.write(line)
                trial = study.ask()
                current = _Current(trial, recovery.new_launch_id(), time.monotonic())
                trial.storage.set_trial_system_attr(trial._trial_id, WORKER_KEY, recovery.this_worker(current.launch_id))
                candidate = suggest(trial, req.space)
            obs.trial_started(trial.number, index + 1, target, candidate)
            current.beat = _Heartbeat(handle, trial._trial_id, interval=10)
            log_path = work_dir / f"trial-{trial.number:04d}" / "server.log"  # TrialChain's layout

            def spawned(info: dict[str, Any], _current=current, _log=log_path) -> None:
                _current.log_path = _log
                with STOP_SIGNALS.deferred():
                    _current.trial.storage.set_trial_system_attr(
                        _current.trial._trial_id, SERVER_KEY, recovery.server_record({**info, "log_path": str(_log)}),
                    )

            def phase(name: str, _current=current) -> None:
                if STOP_SIGNALS.count == 0:  # keep the phase a stop signal arrived in
                    _current.phase = name
                obs.phase(name)

            chain.env = {**req.env, recovery.LAUNCH_ID_ENV: current.launch_id}  # inherited by every server process
            recovery.LIVE_SERVERS.add(current.launch_id)
            record = chain.run(trial.number, candidate, ChainHooks(phase=phase, spawned=spawned))
            current.beat.stop()
            straggler = recovery.stop_stragglers(current.launch_id, launcher)
            if record.outcome in TRANSIENT_OUTCOMES:
                # Not the configuration's fault: FAIL (samplers ignore it), measure it again.
                with STOP_SIGNALS.deferred():
                    for key, value in record.user_attrs().items():
                        trial.set_user_attr(key, value)
                    if record.log_path:
                        artifacts.upload(trial, record.log_path)
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    recovery.requeue(study, study.trials[trial.number])
                    recovery.LIVE_SERVERS.discard(current.launch_id)
                    current = None
                    events.write(_event_line(trial.number, record) + " (transient: queued again)")
                obs.trial_finished(trial.number, record, done, target)
                continue
            with STOP_SIGNALS.deferred():
                values, state = _store(trial, record, req.space, artifacts)
                study.tell(trial, values=values, state=state)
                recovery.LIVE_SERVERS.discard(current.launch_id)
                current = None
                events.write(_event_line(trial.number, record))
                if straggler:
                    events.write(straggler)
                if record.launched:
                    done += 1
                    index += 1
                    idle = 0
                else:
                    idle += 1
            if record.launched:  # failed launches too: an identical failing server is not relaunched
                gate.remember(trial.number, record.resolved, record.values, record.constraints, record.bench)
            obs.trial_finished(trial.number, record, done, target)
            if record.launched and req.learn and done < target:
                with STOP_SIGNALS.deferred():
                    push = _enqueue_mem_push(study, req.space, gate, budget=max(1, target // PUSH_SHARE))
                if push:
                    obs.message(push)
                    events.write(push)
    except KeyboardInterrupt:
        note = ""
        if current is not None:
            with STOP_SIGNALS.deferred():
                note = _record_interrupted(study, current, launcher, events, artifacts)
        raise StudyInterrupted(
            f"interrupted{note}: {done} of {target} trials are stored in {handle.description}; "
            "run the same command again to continue"
        ) from None
    finally:
        if current is not None and current.beat is not None:
            current.beat.stop()
        recovery.LIVE_SERVERS.clear()
    if stopped == "exhausted":
        obs.message("every configuration of the search space is tried, rejected or predicted to fail; nothing left to launch")
    return OptimizeResult(req.study_name, handle.description, done, target, stopped)


def _enqueue_mem_push(study: optuna.Study, space: SearchSpace, gate: FeasibilityGate, budget: int) -> str:
    """Queue the next mem-fraction push (`autospec.study.mem_push`), unless other trials
    are already queued or `budget` pushes were proposed. Returns a line saying what was
    queued and why, or "" when nothing was."""
    trials = study.get_trials(deepcopy=False)
    if sum(1 for t in trials if "mem_push" in t.user_attrs) >= budget:
        return ""
    if any(t.state == optuna.trial.TrialState.WAITING for t in trials):
        return ""
    measured = [
        Measured(t.number, t.user_attrs.get("candidate") or {}, t.values,
                 (t.user_attrs.get("startup") or {}).get("max_running_requests"))
        for t in trials
        if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched")
        and t.user_attrs.get("outcome") == OK
    ]

    def answer(candidate: dict[str, Any]) -> PushAnswer:
        verdict = gate.verdict({**space.server.flags, **candidate})
        if verdict.ok:
            return "launch"
        first = gate.measurement_of(verdict.resolved) if verdict.status == "duplicate" else None
        return "measured" if first is not None and first.values is not None else "no"

    push = push_candidate(space, measured, answer)
    if push is None:
        return ""
    study.enqueue_trial(to_distribution_params(push.candidate, space), user_attrs={"mem_push": push.base.number})
    return push.describe()


@dataclass
class _Current:
    """The trial in flight: asked, maybe launched, not yet told."""

    trial: optuna.Trial
    launch_id: str
    started: float
    phase: str = "ask"
    log_path: Path | None = None
    beat: "_Heartbeat | None" = None


def _record_interrupted(study: optuna.Study, current: _Current, launcher: Launcher, events: recovery.EventLog,
                        artifacts: recovery.Artifacts | None) -> str:
    """Record the interrupted trial as FAIL ("interrupted") with its server log, and queue
    its parameters again. Returns a note for the message ("" when all went well)."""
    trial = current.trial
    if current.beat is not None:
        current.beat.stop()
    second = STOP_SIGNALS.count >= 2
    how = "server killed at once by a second signal" if second else "server torn down"
    if current.log_path is None:
        how = "no server was running"
    try:
        straggler = recovery.stop_stragglers(current.launch_id, launcher)
        if straggler:
            events.write(straggler)
        if study._storage.get_trial(trial._trial_id).state.is_finished():
            return ""
        trial.set_user_attr("outcome", "interrupted")
        trial.set_user_attr("reason", f"stopped by a signal during {current.phase}; {how}")
        trial.set_user_attr("launched", current.log_path is not None)
        if current.log_path is not None:
            trial.set_user_attr("log_path", str(current.log_path))
            if artifacts is not None and current.log_path.is_file():
                artifacts.upload(trial, str(current.log_path))
        frozen = study.tell(trial, state=optuna.trial.TrialState.FAIL)
        retried = recovery.requeue(study, frozen)
        events.write(
            f"trial {trial.number}: outcome=interrupted during {current.phase} after "
            f"{time.monotonic() - current.started:.1f}s; {how}"
            + ("; its parameters are queued again" if retried else "")
        )
        return ""
    except Exception as exc:  # the storage may be what failed; the next run recovers the trial
        return f" (trial {trial.number} could not be recorded: {type(exc).__name__}; the next run retries it)"


def _event_line(number: int, record: TrialRecord) -> str:
    secs = " ".join(f"{k}={v:.1f}s" for k, v in record.seconds.items())
    values = "" if record.values is None else " values=" + ",".join(f"{v:.1f}" for v in record.values)
    reason = f" reason={record.reason!r}" if record.reason else ""
    return f"trial {number}: outcome={record.outcome} launched={record.launched}{values} {secs}{reason} candidate={dict(record.candidate)}"

