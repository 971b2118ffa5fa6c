"""The interface every kind of launch a run queues implements: `LaunchPolicy`.

A run launches only trials that were queued first (Optuna WAITING trials carrying the
parameters, with `Markers` saying why). Each kind of launch (the baseline, the
calibration points, the reference points, confirmation relaunches, mem-fraction pushes,
the proposals of the search) is one `LaunchPolicy`; `autospec.study.proposing.queue.LaunchQueue`
asks them, in the order `autospec.study.building` lists them, at the `Moment`s of the run
they act at, and does the queueing itself. A policy sees the study only through a
`StudyView` and answers with a `Plan` (or None); it writes nothing to the study.

Adding a kind of launch is one subclass (its module and its test) and its place in
`building`'s list.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from autospec.records import Markers, StoredTrial, TrialRecord

__all__ = ["Moment", "StudyView", "Plan", "LaunchPolicy", "WAITING"]

WAITING = optuna.trial.TrialState.WAITING


class Moment(enum.Enum):
    """When the run asks its policies for a launch (and whether it holds the study's lock)."""

    START = "start"  # once per run, before the first ask; every policy is asked once (lock held)
    TURN = "turn"  # before each ask, ahead of the search (lock held)
    ASK = "ask"  # a trial is to be asked and none is queued (no lock: proposing takes time)
    LAUNCHED = "launched"  # a launch of this worker is stored (lock held)
    NOTHING_LEFT = "nothing_left"  # the search has nothing left and no other worker holds a claim (lock held)


@dataclass(frozen=True)
class StudyView:
    """What a policy sees: the `moment`, the study's `trials` as read now, the launched
    trials the run counts (`launched`) and the study's user attributes (`attrs`, read when
    asked for)."""

    moment: Moment
    trials: Sequence[StoredTrial]
    launched: int
    read_attrs: Callable[[], Mapping[str, Any]]

    @property
    def attrs(self) -> Mapping[str, Any]:
        return self.read_attrs()

    @property
    def waiting(self) -> int:
        """Trials queued and not yet asked."""
        return sum(1 for t in self.trials if t.state == WAITING)


@dataclass(frozen=True)
class Plan:
    """A policy's answer: the `trials` to queue (Optuna params, markers), in order, a `line`
    for the user and the events log ("" for none), and a `study_flag` to set once they are
    queued (a once-per-study launch: the flag tells a resumed run or another worker it is
    done). A plan may queue nothing and only say why, or only set its flag. `first`: its
    trials go ahead of those already queued (a control must measure the new machine before
    anything else does)."""

    trials: tuple[tuple[Mapping[str, Any], Markers | None], ...] = ()
    line: str = ""
    study_flag: str | None = None
    first: bool = False


class LaunchPolicy:
    """One kind of launch. Subclasses set `moments` and implement `next_launch`; the other
    methods are the run's events, no-ops unless a policy needs them."""

    moments: frozenset[Moment] = frozenset()

    def next_launch(self, view: StudyView) -> Plan | None:
        """What to queue now, given `view` (its `moment` is one of `moments`), or None.
        At every moment but START the queue asks only while nothing is waiting."""
        raise NotImplementedError

    def started(self, trials: Sequence[StoredTrial]) -> None:
        """The run starts; `trials` are the study's trials (under the study's lock)."""

    def asked(self, number: int, params: Mapping[str, Any]) -> None:
        """Trial `number` was asked with `params`."""

    def measured(self, trial: optuna.Trial, record: TrialRecord, launched_after: int) -> None:
        """A trial of the search is measured and its server is being torn down;
        `launched_after`: the launches once it is stored."""

    def finished(self, number: int, record: TrialRecord, off_search: bool) -> None:
        """Trial `number` ended with `record` and is stored; `off_search`: a confirmation
        relaunch or a reference point."""

    def summary(self, trials: Sequence[StoredTrial]) -> tuple[dict[str, Any], str]:
        """At the end of the run: study attributes to store and a line for the user."""
        return {}, ""

    def close(self) -> None:
        """The run is over: release what the policy holds (threads)."""
