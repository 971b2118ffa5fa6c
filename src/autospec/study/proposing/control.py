"""A control relaunch when a study continues on another machine or after a long pause:
`ControlPolicy`.

Figures from two machines differ by the machines (a few percent between two H200s of one
model), and one machine drifts over hours. So a run that finds the study's last launch on
another machine key (`autospec.records.machines`: host plus GPU UUIDs, or the simulated
machine's name), or finished more than ``[study] control_after_hours`` ago (default 6),
first queues one relaunch of a configuration already measured, ahead of any trial queued
before (a retry of an interrupted launch too), and not while another worker's launch is
running (workers of one study at once are not a continuation): the current latency pick,
or a measured reference point when there is no pick yet. It carries the marker
``control`` ("machine" or "pause") and counts towards ``--trials`` as a confirmation
does, without taking one of the confirmations. Its launches against those of the old
machine give the machine factor (`autospec.records.machines.machine_factors`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence

import optuna

from autospec.config import SearchSpace
from autospec.records import Markers, StoredTrial
from autospec.records.confirming import contests, pick_objectives
from autospec.records.launches import ObjectiveRef
from autospec.records.machines import machine_of
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = ["ControlPolicy"]

_PENDING = (optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)


def _launches(trials: Sequence[StoredTrial]) -> list[StoredTrial]:
    """The study's measured launches, oldest first."""
    return [t for t in trials if t.has_measurement and t.markers.imported is None]


class ControlPolicy(LaunchPolicy):
    """At START, one control relaunch when `machine` (this run's machine key; None: not
    known) differs from the last measured launch's, or that launch finished more than
    `after_hours` before `now()` (see the module docstring)."""

    moments = frozenset({Moment.START})

    def __init__(
        self,
        space: SearchSpace,
        maximize: Sequence[bool],
        machine: str | None,
        after_hours: float,
        now: Callable[[], datetime.datetime] = datetime.datetime.now,  # Optuna stores naive local times
    ) -> None:
        self._refs = ObjectiveRef.each(space.objectives)
        self.maximize, self.machine, self.after_hours, self._now = list(maximize), machine, after_hours, now

    def why(self, trials: Sequence[StoredTrial]) -> str | None:
        """ "machine", "pause" or None: whether this run needs a control first."""
        launches = _launches(trials)
        if not launches:
            return None
        last = max(launches, key=lambda t: t.number)
        before = machine_of(last)
        others_at_work = any(t.state == optuna.trial.TrialState.RUNNING for t in trials)  # not a continuation
        if self.machine is not None and before is not None and before != self.machine and not others_at_work:
            return "machine"
        finished = max((t.finished for t in launches if t.finished is not None), default=None)
        if finished is not None and self._now() - finished > datetime.timedelta(hours=self.after_hours):
            return "pause"
        return None

    def control_of(self, trials: Sequence[StoredTrial]) -> StoredTrial | None:
        """The trial to relaunch: the latency pick's leader, else the last measured reference point."""
        latency = pick_objectives(self._refs)[:1]
        leader = next((c.leader for c in contests(trials, self._refs, self.maximize) if c.objective in latency), None)
        if leader is not None:
            return next((t for t in trials if t.number == leader), None)
        refs = [t for t in _launches(trials) if t.markers.reference is not None]
        return refs[-1] if refs else None

    def next_launch(self, view: StudyView) -> Plan | None:
        trials = view.trials
        if any(t.markers.control is not None and t.state in _PENDING for t in trials):
            return None
        why = self.why(trials)
        target = self.control_of(trials) if why is not None else None
        if why is None or target is None:
            return None
        if target.markers.reference is not None:
            markers = Markers(reference=target.markers.reference, control=why)
        else:
            markers = Markers(confirm_of=target.number, control=why)
        reason = f"another machine ({self.machine})" if why == "machine" else f"a pause of over {self.after_hours:g} h"
        line = f"control relaunch of trial {target.number} first: the study continues after {reason}"
        return Plan(((target.retry_params, markers),), line=line, first=True)
