"""What a study run reports while it works: the `Observer` protocol and a silent one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from autospec.records import TrialRecord

__all__ = ["Observer", "NullObserver"]


class Observer(Protocol):
    """Progress of a run (`autospec.cli.render.Progress` draws it)."""

    def study_started(self, study_name: str, done: int, target: int, measured: Sequence[Sequence[float]] = ()) -> None:
        """`measured`: objective values of the feasible trials already in the study."""
    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None: ...
    def phase(self, name: str) -> None: ...
    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None: ...
    def not_launched(self, candidate: Mapping[str, Any], outcome: str, reason: str) -> None:
        """A proposal answered without a launch (rejected, skipped or duplicate)."""
    def message(self, text: str) -> None: ...
    def finished(self) -> None:
        """The run ended, whichever way."""


class NullObserver:
    def study_started(self, study_name: str, done: int, target: int, measured: Sequence[Sequence[float]] = ()) -> None:
        pass

    def trial_started(self, number: int, index: int, target: int, candidate: Mapping[str, Any]) -> None:
        pass

    def phase(self, name: str) -> None:
        pass

    def trial_finished(self, number: int, record: TrialRecord, done: int, target: int) -> None:
        pass

    def not_launched(self, candidate: Mapping[str, Any], outcome: str, reason: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def finished(self) -> None:
        pass
