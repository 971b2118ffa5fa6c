"""The exception tree shared by every layer.

    AutospecError                     base; `str(err)` is one line: problem and fix
    ├── NothingCanStart               no configuration of the space can start (weights do not fit,
    │                                 a fixed flag SGLang lacks, model path missing); CLI exit code 3
    ├── UsageError                    bad input (files, flags, names); CLI exit code 2
    │   ├── ConfigError               search-space / run file invalid or inconsistent
    │   └── StorageError              storage URL unusable, or study clash
    └── RuntimeFailure                something failed while running; CLI exit code 1
        ├── LaunchError               (autospec.launcher.errors) server did not come up / died
        │   ├── ArgumentsRejected     "rejected_args"
        │   ├── KvPoolTooSmall        "kv_pool_too_small"
        │   ├── CudaGraphOOM          "cuda_graph_oom"
        │   ├── WeightsOOM            "weights_oom"
        │   ├── ForeignGpuMemory      "foreign_gpu_memory"
        │   ├── StartupTimeout        "startup_timeout"
        │   ├── ServerCrashed         "crashed"
        │   ├── PortInUse             "port_in_use"
        │   └── UnknownLaunchFailure  "unknown"
        ├── ProbeUnavailable          (autospec.launcher.probes) GPU memory cannot be read here
        ├── PreflightError            (autospec.feasibility.preflight) the resolver could not run;
        │                             never a verdict: the static rules stand in
        ├── BenchError                (autospec.bench) the benchmark could not be done as asked
        │   └── StreamError           (autospec.bench.protocol) one request's stream failed;
        │                             the client turns it into a failed record, never raises it
        ├── StorageUnavailable        (autospec.records.retry) storage did not answer within the retry budget
        ├── StudyInterrupted          (autospec.study) the user stopped the study; CLI exit 130
        └── StudyStopped              (autospec.study) storage stayed away; the result waits in a pending file

Lower-level exceptions (OSError, httpx, optuna, sqlalchemy) are mapped to these at
the module boundary that catches them, so the CLI only needs `exit_code`. Outside the
tree: private control-flow exceptions that never leave their module
(`launcher.launch._Exited`, `_TimedOut`; `feasibility.resolver_probe._ArgvRejected`,
which runs in the server's Python), and `autospec.sim`'s own errors (a separate server
process that imports nothing from autospec but SGLang's rules and facts).
"""

from __future__ import annotations


class AutospecError(Exception):
    """Base class. The message is a single line naming the problem and the fix."""

    exit_code = 1


class NothingCanStart(AutospecError):
    """No configuration of the search space can start, whatever is searched
    (`autospec.study.nothing_starts`); nothing more is launched."""

    exit_code = 3


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
    """The benchmark could not be done as asked; `StreamError` is the per-request kind."""
