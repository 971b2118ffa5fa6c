"""Trials as stored in a study, read back into typed views with one classification.

`read_trials(study)` is the only reader of trial attributes; every count, front, table,
report and recovery decision starts from the `StoredTrial` views it returns.

Classes (`TrialClass`), decided only by `classify`:

    measured     COMPLETE, feasible, with real values (launched, or imported)
    infeasible   COMPLETE with a violated constraint (rejected, skipped, failed at init,
                 bench failed, SLO violated), or COMPLETE with nothing measured
    duplicate    COMPLETE, reusing an earlier trial's measurement
    relaunch     COMPLETE, feasible, measured by launching a measured trial's configuration
                 again (`Markers.confirm_of`); pooled with it, never on a front by itself
    reference    COMPLETE, launched and measured, a reference point outside the search
                 (`Markers.reference`: no speculation, SGLang's defaults, adaptive): a
                 configuration of the front and the picks like a measured one (within
                 its SLOs: `autospec.records.servers`), left out of what the samplers,
                 the duplicate check and the mem-fraction pushes learn from
    failed       FAIL / PRUNED: the tuner died, or a transient host failure; retried
    interrupted  FAIL after a stop signal; retried
    running      RUNNING, or WAITING in the queue
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna

from autospec.records.schema import DUPLICATE, INTERRUPTED, MEASURED_OUTCOMES, Markers, TrialRecord

__all__ = [
    "TrialClass",
    "StoredTrial",
    "classify",
    "read_trial",
    "read_trials",
    "WORKER_KEY",
    "SERVER_KEY",
    "FIXED_PARAMS_KEY",
    "FINGERPRINT_KEY",
]

WORKER_KEY = "autospec:worker"  # system attr: {host, pid, start_s, boot_id, launch_id} of the tuner running the trial
FINGERPRINT_KEY = "autospec:fingerprint"  # study user attr: the search space's fingerprint (every autospec study)
SERVER_KEY = "autospec:server"  # system attr: {host, pid, pgid, port, start_s, boot_id, cmdline, log_path} of its server
FIXED_PARAMS_KEY = "fixed_params"  # Optuna 5.0's system attr of enqueued parameters

_State = optuna.trial.TrialState


class TrialClass(str, enum.Enum):
    MEASURED = "measured"
    INFEASIBLE = "infeasible"
    DUPLICATE = "duplicate"
    RELAUNCH = "relaunch"
    REFERENCE = "reference"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    RUNNING = "running"


def classify(
    state: _State,
    record: TrialRecord | None,
    constraints: Mapping[str, float],
    imported: bool,
    relaunch: bool = False,
    reference: bool = False,
) -> TrialClass:
    """The one decision of what a stored trial is (see the module docstring)."""
    if state in (_State.RUNNING, _State.WAITING):
        return TrialClass.RUNNING
    if state != _State.COMPLETE:
        return TrialClass.INTERRUPTED if record is not None and record.outcome == INTERRUPTED else TrialClass.FAILED
    if reference and record is not None and record.launched and record.outcome in MEASURED_OUTCOMES and record.values:
        return TrialClass.REFERENCE
    if any(v > 0 for v in constraints.values()):
        return TrialClass.INFEASIBLE
    if record is not None and record.outcome == DUPLICATE:
        return TrialClass.DUPLICATE
    if record is not None and record.outcome in MEASURED_OUTCOMES and (record.launched or imported):
        return TrialClass.RELAUNCH if relaunch else TrialClass.MEASURED
    return TrialClass.INFEASIBLE


@dataclass(frozen=True)
class StoredTrial:
    """One trial of a study, typed. `values` are what Optuna was told (worst-case stand-ins
    for infeasible trials); `has_measurement` says whether the record holds real ones."""

    number: int
    trial_id: int
    state: _State
    trial_class: TrialClass
    params: dict[str, Any]
    values: tuple[float, ...] | None
    constraints: dict[str, float]
    record: TrialRecord | None
    markers: Markers
    worker: dict[str, Any] | None = None
    server: dict[str, Any] | None = None
    fixed_params: dict[str, Any] = field(default_factory=dict)
    started: datetime.datetime | None = None
    finished: datetime.datetime | None = None

    @property
    def outcome(self) -> str:
        return self.record.outcome if self.record is not None else self.state.name.lower()

    @property
    def machine(self) -> str | None:
        """The machine key its server ran on (`autospec.records.machines`); None for trials
        recorded before keys were."""
        key = (self.worker or {}).get("machine")
        return key if isinstance(key, str) and key else None

    @property
    def launched(self) -> bool:
        """A server was started for it (recorded, or known from its server record)."""
        return self.record.launched if self.record is not None else self.server is not None

    @property
    def counts_as_launch(self) -> bool:
        """Counts towards ``--trials``: COMPLETE and a server was started (confirmation
        relaunches included: they are launches of the budget)."""
        return self.state == _State.COMPLETE and self.record is not None and self.record.launched

    @property
    def has_measurement(self) -> bool:
        """The record holds real measurements of this configuration (`record.values`; for a
        trial that violated an SLO, Optuna's `values` are worst-case stand-ins)."""
        return (
            self.state == _State.COMPLETE
            and self.record is not None
            and self.record.values is not None
            and self.record.outcome in MEASURED_OUTCOMES
            and (self.record.launched or self.markers.imported is not None)
        )

    @property
    def candidate(self) -> dict[str, Any]:
        """The configuration as server flags (draft tokens mapped); the Optuna params when
        no record was written."""
        if self.record is not None and self.record.candidate:
            return dict(self.record.candidate)
        return dict(self.params)

    @property
    def retry_params(self) -> dict[str, Any]:
        """Parameters to run again: those suggested so far over any that were enqueued."""
        return {**self.fixed_params, **self.params}


def read_trial(t: optuna.trial.FrozenTrial) -> StoredTrial:
    """Type one Optuna trial."""
    attrs = t.user_attrs
    constraints = {k: float(v) for k, v in t.constraints.items()}
    values = tuple(t.values) if t.values is not None else None
    record = TrialRecord.from_attrs(
        attrs,
        list(values) if values is not None else None,
        {k: v for k, v in constraints.items() if not k.isdigit() and k != "feasible"},
    )
    markers = Markers.from_attrs(attrs)
    worker = t.system_attrs.get(WORKER_KEY)
    server = t.system_attrs.get(SERVER_KEY)
    fixed = t.system_attrs.get(FIXED_PARAMS_KEY)
    return StoredTrial(
        number=t.number,
        trial_id=t._trial_id,  # Optuna 5.0 exposes the storage id only privately
        state=t.state,
        trial_class=classify(
            t.state,
            record,
            constraints,
            markers.imported is not None,
            markers.confirm_of is not None,
            markers.reference is not None,
        ),
        params=dict(t.params),
        values=values,
        constraints=constraints,
        record=record,
        markers=markers,
        worker=dict(worker) if isinstance(worker, dict) else None,
        server=dict(server) if isinstance(server, dict) else None,
        fixed_params=dict(fixed) if isinstance(fixed, dict) else {},
        started=t.datetime_start,
        finished=t.datetime_complete,
    )


def read_trials(study: optuna.Study, states: Iterable[_State] | None = None) -> list[StoredTrial]:
    """Every trial of `study` (or those in `states`), in number order."""
    trials = study.get_trials(deepcopy=False, states=tuple(states) if states is not None else None)
    return [read_trial(t) for t in trials]
