"""Confirmation relaunches at the end of the budget: `ConfirmationPolicy`.

Within the last launches of the budget, as many as the confirmations still allowed
(``--confirm K``, counted over the study), the policy queues a relaunch of what the
picks depend on (`autospec.records.confirming` decides which) while one of them is
unsettled; the search goes on when every pick is settled or tied. Once the search has
nothing left, the confirmations still allowed may be spent anywhere. Confirmations count
towards ``--trials``; no mem-fraction push is queued within that window
(`in_confirmation_window`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import optuna

from autospec.config import SearchSpace
from autospec.metrics.paired import SpreadHistory
from autospec.records import Markers, StoredTrial
from autospec.records.confirming import MIN_LAUNCHES, Contest, contests, next_confirmation
from autospec.records.launches import ObjectiveRef
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = ["ConfirmationPolicy", "confirmation_launches", "confirmation_left", "in_confirmation_window", "CONFIRM_SHARE"]

CONFIRM_SHARE = 4  # by default at most 1/CONFIRM_SHARE of the launch budget may go to confirmation
_COMPLETE = optuna.trial.TrialState.COMPLETE
_RUNNING = optuna.trial.TrialState.RUNNING


def confirmation_launches(n_trials: int, confirm: int | None) -> int:
    """How many of `n_trials` launches may confirm the picks: `confirm` when given (0: none),
    else ``n_trials // CONFIRM_SHARE``; never all of them (one launch at least searches)."""
    wanted = n_trials // CONFIRM_SHARE if confirm is None else confirm
    return max(0, min(wanted, n_trials - 1))


def confirmation_left(trials: Sequence[StoredTrial], confirm: int) -> int:
    """Confirmation launches still allowed of `confirm` (counted over the study: launched
    ones and those running on a worker; a queued one is not made yet, and one the gate
    answered without a launch takes nothing; a control relaunch is not a confirmation)."""
    made = [
        t
        for t in trials
        if t.markers.confirm_of is not None and t.markers.control is None and (t.state == _RUNNING or t.counts_as_launch)
    ]
    return max(confirm - len(made), 0)


def in_confirmation_window(trials: Sequence[StoredTrial], n_trials: int, confirm: int) -> bool:
    """The launches left of `n_trials` (launched and claimed ones subtracted) are no more
    than the confirmations still allowed: from here on the picks come first."""
    taken = sum(1 for t in trials if t.counts_as_launch or (t.state == _RUNNING and t.worker is not None))
    remaining = n_trials - taken
    return 0 < remaining <= confirmation_left(trials, confirm)


class ConfirmationPolicy(LaunchPolicy):
    """Queues the relaunch the picks depend on most (`next_confirmation`) within the
    confirmation window (moment TURN) or, once the search has nothing left, while any
    confirmation is allowed (moment NOTHING_LEFT); see the module docstring. `confirm`:
    the confirmation launches of `n_trials` (`confirmation_launches`). `machine`: this
    run's machine key (None: not known); a configuration measured only on other machines
    is not relaunched, since a launch here does not pool with those (`launch_groups`).
    `history`: the launch spread other studies measured (`TrialStore.history`)."""

    moments = frozenset({Moment.TURN, Moment.NOTHING_LEFT})

    def __init__(
        self,
        space: SearchSpace,
        maximize: Sequence[bool],
        n_trials: int,
        confirm: int,
        machine: str | None = None,
        history: Mapping[int, SpreadHistory] | None = None,
    ) -> None:
        objectives = space.objectives
        self._refs = ObjectiveRef.each(objectives)
        self._where = {i: f"C={o.concurrency}" for i, o in enumerate(objectives)}
        self.maximize, self.n_trials, self.confirm, self.machine = list(maximize), n_trials, confirm, machine
        self.history = history or {}

    def _elsewhere(self, trials: Sequence[StoredTrial]) -> set[int]:
        """Trials measured on another known machine than this run's. A configuration goes by
        its first launch (or reference), and its launches pool only on that launch's machine,
        so these name the configurations a launch here could not join."""
        if self.machine is None:
            return set()
        return {t.number for t in trials if t.machine and t.machine != self.machine}

    def in_window(self, trials: Sequence[StoredTrial]) -> bool:
        return in_confirmation_window(trials, self.n_trials, self.confirm)

    def standing(self, trials: Sequence[StoredTrial]) -> list[Contest]:
        """What the picks rest on now (`autospec.records.confirming.contests`)."""
        return contests(trials, self._refs, self.maximize, self.history)

    def next_launch(self, view: StudyView) -> Plan | None:
        trials = view.trials
        if self.confirm <= 0:
            return None
        exhausted = view.moment is Moment.NOTHING_LEFT
        if not (self.in_window(trials) or (exhausted and confirmation_left(trials, self.confirm) > 0)):
            return None
        unlaunchable = {
            t.markers.confirm_of for t in trials if t.markers.confirm_of is not None and t.state == _COMPLETE and not t.launched
        }
        relaunch = next_confirmation(self.standing(trials), self._where, exclude=unlaunchable | self._elsewhere(trials))
        target = next((t for t in trials if relaunch is not None and t.number == relaunch.trial), None)
        if relaunch is None or target is None:
            return None
        made = self.confirm - confirmation_left(trials, self.confirm) + 1
        line = f"confirmation relaunch {made} of at most {self.confirm}: {relaunch.reason}"
        # a reference point is relaunched as itself (its candidate comes from its marker)
        markers = Markers(confirm_of=target.number, reference=target.markers.reference)
        return Plan(((target.retry_params, markers),), line=line)

    def summary(self, trials: Sequence[StoredTrial]) -> tuple[dict[str, object], str]:
        """One line for the events log: what each pick objective's leader rests on (none
        without confirmation or before any measurement). What to deploy is the CLI's answer
        (`autospec.report`), not this line."""
        if self.confirm <= 0:
            return {}, ""
        parts = []
        for c in self.standing(trials):
            launches = c.launches[c.leader]
            if c.settled:
                how = "separated" if c.launches[c.leader] >= MIN_LAUNCHES else "separated by its interval"
            elif c.tied:
                how = "tied with trial(s) " + ", ".join(map(str, c.contenders))
            else:
                how = "not settled within the budget" + (
                    f" (within the intervals of trial(s) {', '.join(map(str, c.contenders))})" if c.contenders else ""
                )
            same = f" (the same server as trial(s) {', '.join(map(str, c.pooled_with))})" if c.pooled_with else ""
            parts.append(f"best at {self._where[c.objective]}: trial {c.leader}{same} on {launches} launch(es), {how}")
        return {}, ("confirmation contests: " + "; ".join(parts)) if parts else ""
