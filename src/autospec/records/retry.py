"""Riding out a storage that is briefly away: a PostgreSQL server restarting, a SQLite
file locked by the dashboard, a journal file on a busy disk.

`StorageRetry` runs one storage operation, and on an error that a storage that is away
raises, waits (0.5 s, doubling to 10 s) and runs it again, for at most `patience_s`;
then it raises `StorageUnavailable` naming the storage, the operation and the last
error. Only operations that can safely run twice are given to it (attribute writes, a
tell whose first attempt may have landed).

Errors that mean "away" (checked against Optuna 5.0 and SQLAlchemy 2): Optuna's RDB
storage wraps SQLAlchemy errors raised at commit as `optuna.exceptions.StorageInternalError`;
a lost connection outside a commit is `sqlalchemy.exc.OperationalError` or
`InterfaceError`; the journal file storage raises `OSError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import optuna
import sqlalchemy.exc

from autospec.errors import RuntimeFailure

__all__ = ["StorageRetry", "StorageUnavailable", "STORAGE_AWAY_ERRORS"]

T = TypeVar("T")

STORAGE_AWAY_ERRORS: tuple[type[BaseException], ...] = (
    optuna.exceptions.StorageInternalError,
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    OSError,
)


class StorageUnavailable(RuntimeFailure):
    """The study's storage did not answer within the retry budget."""


def _first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0]}" if text else type(cause).__name__


@dataclass
class StorageRetry:
    """Retries storage operations for up to `patience_s` (see the module docstring).
    `on_wait(message)` is told once per outage, when the first retry starts."""

    description: str = "the storage"
    patience_s: float = 120.0
    first_wait_s: float = 0.5
    max_wait_s: float = 10.0
    on_wait: Callable[[str], None] | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __call__(self, what: str, operation: Callable[[], T], patience_s: float | None = None) -> T:
        budget = self.patience_s if patience_s is None else patience_s
        deadline = self.clock() + budget
        wait = self.first_wait_s
        told = False
        while True:
            try:
                return operation()
            except STORAGE_AWAY_ERRORS as exc:
                if self.clock() + wait > deadline:
                    raise StorageUnavailable(
                        f"{self.description} did not answer for {budget:.0f} s while trying to {what} "
                        f"({_first_line(exc)}); check that it runs, then run the same command again"
                    ) from exc
                if not told and self.on_wait is not None:
                    self.on_wait(
                        f"{self.description} is not answering ({_first_line(exc)}); retrying to {what} for up to {budget:.0f} s"
                    )
                    told = True
                self.sleep(wait)
                wait = min(wait * 2, self.max_wait_s)
