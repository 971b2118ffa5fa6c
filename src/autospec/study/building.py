"""Building a study run from what it is asked: every collaborator of `StudyRun`.

`build_run` opens the storage and the study (a new study, or storage file, is created
only once nothing else holds the GPU; an existing one is guarded after recovery has
stopped its own leftovers, in `StudyRun.run`), narrows the space to what SGLang accepts
(`compile_space`: the one space every collaborator then uses) and wires the feasibility
gate, the trial chain, the launch policies and their queue, and the finisher around them. `optimize` is
`build_run(...).run()`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
import psutil

from autospec.feasibility.gate import PREFETCH_LIMIT, FeasibilityGate
from autospec.feasibility.learned import LearnedRules
from autospec.launcher import Launcher
from autospec.records import StorageRetry, StoredTrial, TrialStore
from autospec.records.launches import ObjectiveRef
from autospec.space import grid
from autospec.study.chain import TrialChain
from autospec.study.claims import StudyLock
from autospec.study.files import Artifacts, EventLog, PendingResults, StudyLayout
from autospec.study.finishing import TrialFinisher
from autospec.study.processes.gpu_guard import GpuGuard
from autospec.study.processes.stopping import StopSignals
from autospec.study.proposing.compiled import CompiledSpace, compile_space
from autospec.study.proposing.confirmations import ConfirmationPolicy, confirmation_launches
from autospec.study.proposing.control import ControlPolicy
from autospec.study.proposing.once import BaselinePolicy, CalibrationPolicy
from autospec.study.proposing.policy import LaunchPolicy
from autospec.study.proposing.proposals import ProposalPolicy
from autospec.study.proposing.proposer import Answered
from autospec.study.proposing.pushes import MemPushPolicy
from autospec.study.proposing.queue import LaunchQueue
from autospec.study.proposing.references import ReferencePolicy, reference_names, references_wanted
from autospec.study.proposing.samplers import ModelSampler, make_sampler, optuna_notes_silenced, unsupported_reason
from autospec.study.request import NullObserver, Observer, OptimizeRequest, OptimizeResult
from autospec.study.run import GpuIdle, StudyRun
from autospec.study.storage import StorageHandle, open_storage, open_study, storage_locator, study_exists

__all__ = ["build_run", "optimize", "ChainFactory"]

ChainFactory = Callable[..., TrialChain]  # TrialChain's keyword arguments -> a chain


def optimize(req: OptimizeRequest, observer: Observer | None = None) -> OptimizeResult:
    """Run (or continue) the study of `req` until it holds `req.n_trials` launched trials."""
    return build_run(req, observer).run()


def build_run(
    req: OptimizeRequest,
    observer: Observer | None = None,
    make_chain: ChainFactory = TrialChain,
    handle: StorageHandle | None = None,
) -> StudyRun:
    """A `StudyRun` for `req` (see the module docstring). `make_chain` builds its trial
    chain from TrialChain's keyword arguments (a stand-in chain for benchmarks and
    tests); `handle` is a storage opened already (else `req.storage` is opened)."""
    with optuna_notes_silenced():
        return _build(req, observer or NullObserver(), make_chain, handle)


def _launch_policies(
    req: OptimizeRequest,
    compiled: CompiledSpace,
    gate: FeasibilityGate,
    store: TrialStore,
    make_sampler: Callable[[int], optuna.samplers.BaseSampler],
    answered: Callable[[Answered], None],
) -> list[LaunchPolicy]:
    """Every kind of launch this run queues, in the order the queue asks them
    (`autospec.study.proposing.queue`); the reference points by `references_wanted`."""
    declared, space = compiled.declared, compiled.space
    n = req.n_trials
    confirm = confirmation_launches(n, req.confirm)
    confirmation = ConfirmationPolicy(space, store.maximize, n, confirm, req.machine, store.history) if confirm > 0 else None
    policies: list[LaunchPolicy] = [ControlPolicy(space, store.maximize, req.machine, req.space.study.control_after_hours)]
    if req.baseline:
        policies.append(BaselinePolicy(declared, space, gate.argument_verdict))
    if req.learn:
        policies.append(CalibrationPolicy(space))
    if references_wanted(req.references, req.space.references, n, len(reference_names(declared))):
        policies.append(ReferencePolicy(declared, space.server.flags, gate.argument_verdict, n))
    if confirmation is not None:
        policies.append(confirmation)
    if req.learn:
        quiet = confirmation.in_window if confirmation is not None else _never
        policies.append(MemPushPolicy(space, gate, store.maximize, n, quiet=quiet))
    policies.append(ProposalPolicy(compiled, gate, store, make_sampler, answered, n, req.hardware, req.seed))
    return policies


def _never(trials: Sequence[StoredTrial]) -> bool:
    return False


def _build(req: OptimizeRequest, obs: Observer, make_chain: ChainFactory, handle: StorageHandle | None) -> StudyRun:
    launcher = req.launcher or Launcher()
    guard, handle, study = _open(req, obs, launcher, handle)
    layout = StudyLayout.beside(handle.local_path, req.studies_dir, req.study_name)
    events = EventLog(layout.events_log)

    def log(line: str) -> None:
        obs.message(line)
        events.write(line)

    store = TrialStore(
        study,
        [o.direction == "maximize" for o in req.space.objectives],
        [c.name for c in req.space.constraints],
        StorageRetry(handle.description, patience_s=req.storage_patience_s, on_wait=log),
    )
    model = req.space.server.flags.get("model_path")
    if req.hardware is not None and isinstance(model, str):  # the launch spread other studies measured here
        store.read_history({(req.hardware, model)}, ObjectiveRef.each(req.space.objectives))
    # `--sampler model` weighs uncertain memory itself (p_start); other samplers rely on the
    # gate's bisection of the band between what failed and what worked.
    model_sampler = req.sampler == "model" and unsupported_reason(req.space) is None
    gate = FeasibilityGate(
        sglang_version=req.sglang_version,
        preflight=req.preflight,
        to_argv=req.to_argv,
        learn=req.learn,
        remeasure=req.remeasure,
        rules=LearnedRules(bisect=not model_sampler),
    )
    compiled = _compile(req, gate, obs, log)
    chain = make_chain(
        space=compiled.space,
        launcher=launcher,
        gate=gate,
        command=req.command,
        layout=layout,
        env=req.env,
        ready_timeout_s=req.ready_timeout_s,
        shared_gpu=req.slot is not None and req.slot.shared,
    )

    def answered(answer: Answered) -> None:
        obs.not_launched(answer.candidate, answer.verdict.status, answer.verdict.reason)
        events.write(
            f"proposal answered without a launch: {answer.verdict.status}: {answer.verdict.reason} candidate={answer.candidate}"
        )

    make_sampler = _sampler_factory(req, compiled, gate, model_sampler, log)
    queue = LaunchQueue(_launch_policies(req, compiled, gate, store, make_sampler, answered), store, log)
    pending, artifacts = PendingResults(layout.pending_dir), Artifacts(layout.artifacts_dir)
    return StudyRun(
        req=req,
        compiled=compiled,
        handle=handle,
        store=store,
        lock=StudyLock(handle.storage, req.study_name, handle.local_path),
        queue=queue,
        finisher=TrialFinisher(store, pending, artifacts, events, log),
        chain=chain,
        launcher=launcher,
        guard=guard,
        layout=layout,
        pending=pending,
        artifacts=artifacts,
        events=events,
        signals=req.signals if req.signals is not None else StopSignals(),
        obs=obs,
        # The tuner's start counts as GPU idle time (its imports and checks) until the first launch.
        idle=GpuIdle(free_since=_process_started()),
    )


def _open(
    req: OptimizeRequest, obs: Observer, launcher: Launcher, handle: StorageHandle | None
) -> tuple[GpuGuard, StorageHandle, optuna.Study]:
    """The GPU guard, the storage and the study. A new study (or storage file) is created
    only once nothing else holds the GPU; an existing one is guarded in `StudyRun.run`,
    after recovery has stopped its own leftovers."""
    if handle is None:
        locator, local_file = storage_locator(req.storage, req.study_name, req.studies_dir)
    else:
        locator, local_file = handle.locator, None
    guard = GpuGuard(
        launcher, req.study_name, locator, req.allow_foreign_gpu_memory, shared_slot=req.slot is not None and req.slot.shared
    )
    new_file = local_file is not None and not local_file.exists()
    if new_file:
        guard.clear(obs.message)
    handle = handle or open_storage(req.storage, req.study_name, req.studies_dir)
    if not new_file and not study_exists(handle, req.study_name):
        guard.clear(obs.message)
    # Proposals come from the proposer (a scratch study with the configured sampler); the
    # real study only asks for queued parameters, so its own sampler fills in at most the
    # parameters a calibration point leaves open.
    study = open_study(handle, req.study_name, req.space, optuna.samplers.RandomSampler(seed=req.seed))
    return guard, handle, study


def _sampler_factory(
    req: OptimizeRequest, compiled: CompiledSpace, gate: FeasibilityGate, model_sampler: bool, log: Callable[[str], None]
) -> Callable[[int], optuna.samplers.BaseSampler]:
    """The proposer's sampler for a given seed offset (`ProposalPolicy.started`)."""

    def sampler_for(seed_offset: int) -> optuna.samplers.BaseSampler:
        seed = None if req.seed is None else req.seed + seed_offset
        if model_sampler:
            return ModelSampler(compiled.space, compiled.candidate, _accepted_by(gate), seed)
        name = req.sampler
        if name == "model":
            log(f"sampler: {unsupported_reason(compiled.space)}; using tpe")
            name = "tpe"
        return make_sampler(name, seed, len(req.space.objectives))

    return sampler_for


def _accepted_by(gate: FeasibilityGate) -> Callable[[Mapping[str, Any]], Mapping[str, Any] | None]:
    """The resolved flags of an argument set SGLang accepts, else None (for the model sampler)."""

    def accepted(flags: Mapping[str, Any]) -> Mapping[str, Any] | None:
        verdict = gate.argument_verdict(flags)
        return verdict.resolved if verdict.ok else None

    return accepted


def _compile(req: OptimizeRequest, gate: FeasibilityGate, obs: Observer, log: Callable[[str], None]) -> CompiledSpace:
    """Narrow the space to what SGLang accepts (`compile_space`), with the resolver's
    answers fetched in one batch where that is cheaper."""
    space = req.space
    points = list(itertools.islice(grid(space), PREFETCH_LIMIT + 1))
    if len(points) <= PREFETCH_LIMIT:
        asked = gate.prefetch([{**space.server.flags, **c} for c in points])
        if asked:
            obs.message(
                f"preflight: SGLang's own argument checks resolved {asked} distinct argument sets ({len(points)} configurations)"
            )
    compiled = compile_space(space, lambda flags: gate.argument_verdict(flags).ok, PREFETCH_LIMIT)
    if compiled.notes:
        log(
            f"search space: {compiled.accepted} of {compiled.total} configurations pass SGLang's "
            f"argument checks; the sampler sees only those: " + "; ".join(compiled.notes)
        )
    return compiled


def _process_started() -> float:
    """This process's start on the `time.monotonic` clock."""
    return time.monotonic() - (time.time() - psutil.Process().create_time())
