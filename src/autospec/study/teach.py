"""Teach a feasibility gate what the launches already in a study showed, so a resumed
study skips what the first run learned would fail and never relaunches a measured server."""

from __future__ import annotations

from collections.abc import Iterable

import optuna

from autospec.feasibility.gate import FeasibilityGate
from autospec.launcher import LAUNCH_FAILURE_KINDS
from autospec.records import MEASURED_OUTCOMES, StoredTrial
from autospec.study.slots import crowded_out

__all__ = ["teach_gate"]


def teach_gate(trials: Iterable[StoredTrial], gate: FeasibilityGate, hardware: str | None = None) -> None:
    """Feed every COMPLETE launched trial to `gate`: its measurement (for dedup), its
    failure kind (learned rules) or its startup facts (memory model). Failure kinds and
    startup facts only from trials run on `hardware` (or whose hardware is not recorded):
    what fits in memory on one GPU type says little about another."""
    for t in trials:
        r = t.record
        if t.state != optuna.trial.TrialState.COMPLETE or r is None or not r.launched:
            continue
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
