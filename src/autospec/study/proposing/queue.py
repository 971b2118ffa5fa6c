"""What the next trial of a run is: `LaunchQueue` asks the run's launch policies.

A run launches only trials that were queued first (Optuna WAITING trials carrying the
parameters, with `Markers` saying why). Each kind of launch is a `LaunchPolicy`
(`autospec.study.proposing.policy`); the queue asks them, in the order it was given
them, at the moments of the run they act at, queues what they plan and logs their lines:

- START, once per run: every policy acting then is asked once: the baseline and the
  calibration points (`once`), the reference points (`references`); each is queued
  once per study (a study flag);
- TURN, before each ask: confirmation relaunches within the last launches of the
  budget (`confirmations`);
- ASK, when a trial is to be asked: the search's proposals (`proposals`);
- LAUNCHED, after a launch of this worker is stored: mem-fraction pushes (`pushes`);
- NOTHING_LEFT, when the search has nothing left: the confirmations still allowed.

At every moment but START, the first policy with a plan wins, and no policy is asked
while a trial is queued already (retries and other workers' queues go first). The
callers hold the study's lock at every moment but ASK (`StudyRun`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import optuna

from autospec.records import StoredTrial, TrialRecord, TrialStore
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = ["LaunchQueue"]

P = TypeVar("P", bound=LaunchPolicy)


class LaunchQueue:
    """Asks `policies` for launches and queues them in `store` (see the module docstring);
    `log` reports a line to the user and the events log. The run's events (`started`,
    `asked`, `measured`, `finished`, `close`) go to every policy."""

    def __init__(self, policies: Sequence[LaunchPolicy], store: TrialStore, log: Callable[[str], None]) -> None:
        self.policies = list(policies)
        self.store = store
        self._log = log
        self._last_line: dict[int, str] = {}

    def policy(self, kind: type[P]) -> P | None:
        """The first policy of `kind`, if the run has one."""
        return next((p for p in self.policies if isinstance(p, kind)), None)

    def acts_at(self, moment: Moment) -> bool:
        """Whether a policy acts at `moment`."""
        return any(moment in p.moments for p in self.policies)

    def queue(self, moment: Moment, trials: Sequence[StoredTrial], launched: int) -> bool:
        """Ask the policies acting at `moment`, given the study's `trials` now and the
        `launched` trials the run counts, and queue what they plan. True when a trial is
        queued afterwards (at START: when one was queued now)."""
        queued = False
        for i, policy in enumerate(self.policies):
            if moment not in policy.moments:
                continue
            view = StudyView(moment, trials, launched, lambda: self.store.study.user_attrs)
            if moment is not Moment.START and view.waiting:
                return True
            plan = policy.next_launch(view)
            if plan is None:
                continue
            self._apply(i, plan)
            queued = queued or bool(plan.trials)
            if moment is not Moment.START and plan.trials:
                return True
            trials = self.store.read()
        return queued

    def _apply(self, index: int, plan: Plan) -> None:
        for params, markers in reversed(plan.trials) if plan.first else plan.trials:
            self.store.enqueue(params, markers, first=plan.first)
        if plan.study_flag is not None:
            self.store.set_study_flag(plan.study_flag)
        # The same line again (a relaunch queued again after another worker took it) is not news.
        if plan.line and plan.line != self._last_line.get(index):
            for line in plan.line.split("\n"):
                self._log(line)
            self._last_line[index] = plan.line

    # ------------------------------------------------------------------ the run's events
    def started(self, trials: Sequence[StoredTrial]) -> None:
        for policy in self.policies:
            policy.started(trials)

    def asked(self, number: int, params: Mapping[str, Any]) -> None:
        for policy in self.policies:
            policy.asked(number, params)

    def measured(self, trial: optuna.Trial, record: TrialRecord, launched_after: int) -> None:
        for policy in self.policies:
            policy.measured(trial, record, launched_after)

    def finished(self, number: int, record: TrialRecord, off_search: bool) -> None:
        for policy in self.policies:
            policy.finished(number, record, off_search)

    def summary(self, trials: Sequence[StoredTrial]) -> list[str]:
        """Store what each policy keeps at the end of the run; returns their lines."""
        lines = []
        for policy in self.policies:
            attrs, line = policy.summary(trials)
            for key, value in attrs.items():
                self.store.set_study_attr(key, value)
            if line:
                lines.append(line)
        return lines

    def close(self) -> None:
        for policy in self.policies:
            policy.close()
