"""Launches queued once per study at the start of a run: the user's baseline and the
memory model's calibration points (the reference points: `references.ReferencePolicy`).

A study flag records that they were queued, so a resumed run or another worker of the
study does not queue them again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from autospec.config import SearchSpace
from autospec.feasibility.verdict import Verdict
from autospec.records import Markers
from autospec.space import calibration_points, to_distribution_params
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = ["BaselinePolicy", "CalibrationPolicy", "BASELINE_ENQUEUED", "CALIBRATION_ENQUEUED"]

BASELINE_ENQUEUED = "autospec:baseline_enqueued"
CALIBRATION_ENQUEUED = "autospec:calibration_enqueued"


class BaselinePolicy(LaunchPolicy):
    """The user's current deployment (``--baseline``), once, unless SGLang would reject it.
    `declared`: the space as declared (its baseline and fixed flags); `space`: the space
    its parameters are queued in."""

    moments = frozenset({Moment.START})

    def __init__(
        self, declared: SearchSpace, space: SearchSpace, argument_verdict: Callable[[Mapping[str, Any]], Verdict]
    ) -> None:
        self.declared, self.space, self.argument_verdict = declared, space, argument_verdict

    def next_launch(self, view: StudyView) -> Plan | None:
        baseline = self.declared.baseline
        if not baseline or view.attrs.get(BASELINE_ENQUEUED):
            return None
        verdict = self.argument_verdict({**self.declared.server.flags, **baseline})
        if not verdict.ok:
            return Plan(line=f"baseline not measured: SGLang would reject it ({verdict.reason})", study_flag=BASELINE_ENQUEUED)
        return Plan(((to_distribution_params(baseline, self.space), Markers(baseline=True)),), study_flag=BASELINE_ENQUEUED)


class CalibrationPolicy(LaunchPolicy):
    """The memory model's calibration points (`autospec.space.calibration_points`), once."""

    moments = frozenset({Moment.START})

    def __init__(self, space: SearchSpace) -> None:
        self.space = space

    def next_launch(self, view: StudyView) -> Plan | None:
        if view.attrs.get(CALIBRATION_ENQUEUED):
            return None
        markers = Markers(calibration=True)
        points = tuple((to_distribution_params(c, self.space), markers) for c in calibration_points(self.space))
        return Plan(points, study_flag=CALIBRATION_ENQUEUED)
