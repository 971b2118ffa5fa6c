"""The exception tree shared by every layer.

    AutospecError                 base; `str(err)` is one line: problem and fix
    ├── UsageError                bad input (files, flags, names); CLI exit code 2
    │   ├── ConfigError           search-space / run file invalid or inconsistent
    │   └── StorageError          storage URL unusable, or study clash
    └── RuntimeFailure            something failed while running; CLI exit code 1
        ├── LaunchError           (autospec.launcher) server did not come up / died
        └── BenchError            (autospec.bench) the benchmark could not run

Lower-level exceptions (OSError, httpx, optuna, sqlalchemy) are mapped to these at
the module boundary that catches them, so the CLI only needs `exit_code`.
"""

from __future__ import annotations


class AutospecError(Exception):
    """Base class. The message is a single line naming the problem and the fix."""

    exit_code = 1


class UsageError(AutospecError):
    """The user's input is wrong; nothing was started or changed."""

    exit_code = 2


class ConfigError(UsageError):
    """A search-space file or a command-line override is invalid."""


class StorageError(UsageError):
    """The study storage cannot be used as asked (bad URL, unreachable, clash)."""


class RuntimeFailure(AutospecError):
    """Work that had started could not finish."""

    exit_code = 1


class BenchError(RuntimeFailure):
    """The benchmark could not run at all (as opposed to per-request errors)."""
