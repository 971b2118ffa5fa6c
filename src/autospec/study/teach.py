"""Teach a feasibility gate what the launches already in a study showed, so a resumed
study skips what the first run learned would fail and never relaunches a measured server."""

from __future__ import annotations

from collections.abc import Iterable

import optuna

from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import LAUNCH_FAILURE_KINDS
from autospec.records import MEASURED_OUTCOMES, StoredTrial

__all__ = ["teach_gate"]


def teach_gate(trials: Iterable[StoredTrial], gate: FeasibilityGate) -> None:
    """Feed every COMPLETE launched trial to `gate`: its measurement (for dedup), its
    failure kind (learned rules) or its startup facts (memory model)."""
    for t in trials:
        r = t.record
        if t.state != optuna.trial.TrialState.COMPLETE or r is None or not r.launched:
            continue
        resolved = dict(r.resolved or r.candidate)
        measured = r.outcome in MEASURED_OUTCOMES
        gate.remember(t.number, resolved, r.values if measured else None, r.constraints, r.bench)
        if r.outcome in LAUNCH_FAILURE_KINDS:
            gate.learn_failure(resolved, r.outcome)
        elif measured:
            gate.learn_success(resolved, r.startup or {})
