"""Mem-fraction pushes after a launch: `MemPushPolicy` (the rule: `mem_push`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autospec.config import SearchSpace
from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import LAUNCH_FAILURE_KINDS
from autospec.model import observation_from, shape_of
from autospec.model.memory import MemoryModel
from autospec.model.shape import context_keys, context_of
from autospec.records import OK, Markers, StoredTrial, pareto_front
from autospec.space import to_distribution_params
from autospec.study.proposing.mem_push import Measured, PushAnswer, may_push, push_candidate
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = ["MemPushPolicy", "PUSH_SHARE"]

PUSH_SHARE = 3  # at most 1/PUSH_SHARE of the launch budget goes to mem-fraction pushes


def _startup(t: StoredTrial) -> Mapping[str, Any]:
    return (t.record.startup if t.record else None) or {}


class MemPushPolicy(LaunchPolicy):
    """After each launch, queue the next mem-fraction push (`push_candidate`) to a value
    the gate launches and the memory model, fitted on the study's launches, is sure starts
    (`MemoryModel.sure_to_start`), unless the budget of `n_trials` is met, the push share
    of the budget was proposed, `mem_push.MAX_FAILURES` pushes failed at init anyway, or
    `quiet` says the study is in the confirmation window."""

    moments = frozenset({Moment.LAUNCHED})

    def __init__(
        self,
        space: SearchSpace,
        gate: FeasibilityGate,
        maximize: Sequence[bool],
        n_trials: int,
        quiet: Callable[[Sequence[StoredTrial]], bool],
    ) -> None:
        self.space, self.gate, self.maximize, self.n_trials, self.quiet = space, gate, list(maximize), n_trials, quiet

    def next_launch(self, view: StudyView) -> Plan | None:
        trials = view.trials
        if view.launched >= self.n_trials or self.quiet(trials):
            return None
        pushes = [t for t in trials if t.markers.mem_push is not None]
        budget = max(1, self.n_trials // PUSH_SHARE)
        if not may_push(len(pushes), sum(1 for t in pushes if t.outcome in LAUNCH_FAILURE_KINDS), budget):
            return None
        launched_trials = [t for t in trials if t.launched]
        front = [
            Measured(t.number, t.candidate, t.values, _startup(t).get("max_running_requests"))
            for t in pareto_front(launched_trials, self.maximize, [o.concurrency for o in self.space.objectives])
            if t.values is not None and t.outcome == OK and t.markers.reference is None  # a reference's flags are SGLang's
        ]
        starts = _sure_to_start(trials, self.space.server.flags)
        push = push_candidate(self.space, front, lambda candidate: self._answer(candidate, starts))
        if push is None or any(t.markers.mem_push == push.base.number for t in pushes):  # another worker queued it
            return None
        params = to_distribution_params(push.candidate, self.space)
        return Plan(((params, Markers(mem_push=push.base.number)),), line=push.describe())

    def _answer(self, candidate: dict[str, Any], starts: Callable[[Mapping[str, Any]], bool]) -> PushAnswer:
        verdict = self.gate.verdict({**self.space.server.flags, **candidate})
        if verdict.ok:
            return "launch" if starts(verdict.resolved) else "no"
        first = self.gate.measurement_of(verdict.resolved) if verdict.status == "duplicate" else None
        return "measured" if first is not None and first.values is not None else "no"


def _sure_to_start(trials: Sequence[StoredTrial], base_flags: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """Whether the memory model fitted on `trials`' launches is sure that a server with
    these full flags starts (`MemoryModel.sure_to_start`)."""
    observations = [o for t in trials if (o := observation_from(t, base_flags=base_flags)) is not None]
    keys = context_keys([o.flags for o in observations])
    memory = MemoryModel(observations, [context_of(o.flags, keys) for o in observations])

    def starts(flags: Mapping[str, Any]) -> bool:
        return bool(memory.sure_to_start([shape_of(flags)], [context_of(flags, keys)])[0])

    return starts
