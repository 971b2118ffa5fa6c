"""What one trial produced, and how it is stored on an Optuna trial.

User attributes (stable keys, documented in docs/study-data.md):

========== ===================================================================
key        value
========== ===================================================================
outcome    "ok", or why not: "rejected", "skipped", "duplicate", a launch
           failure kind ("kv_pool_too_small", "cuda_graph_oom", "weights_oom",
           "startup_timeout", "crashed", ...), "bench_failed", "constraint_violated"
reason     one line explaining a non-"ok" outcome ("" when ok)
launched   bool: a server process was started for this trial
candidate  the flags the sampler chose (after draft-token mapping)
resolved   flags after SGLang's rewrites (from preflight or static rules)
server_args the exact argv (secrets redacted), or null when not launched
startup    facts parsed from the server log (max_total_num_tokens, ...)
bench      {concurrency: LevelSummary.as_dict()} per measured level
seconds    {"preflight", "launch", "bench", "teardown", "total"}
teardown   TeardownReport as a dict
duplicate_of the trial number whose measurement was reused
========== ===================================================================

Feasibility is stored the Optuna 5 way (`trial.set_constraint("feasible", 0|1)` and
one `"<metric>@c<C>"` constraint per SLO) *and* mirrored into the old list-valued
system attribute ``constraints``, which optuna-dashboard 0.21.0 reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["TrialRecord", "OK", "LAUNCH_FAILURES", "NOT_LAUNCHED", "FEASIBLE_KEY", "SERVER_KEY", "WORKER_KEY"]

OK = "ok"
NOT_LAUNCHED = ("rejected", "skipped", "duplicate")
LAUNCH_FAILURES = (
    "rejected_args",
    "kv_pool_too_small",
    "cuda_graph_oom",
    "weights_oom",
    "foreign_gpu_memory",
    "startup_timeout",
    "crashed",
    "port_in_use",
    "unknown",
)
FEASIBLE_KEY = "feasible"
SERVER_KEY = "autospec:server"  # system attr: {pid, pgid, start_time, cmdline, port, host}
WORKER_KEY = "autospec:worker"  # system attr: {host, pid, start_time} of the tuner running the trial


@dataclass
class TrialRecord:
    """Everything a trial chain produced; `values` is None when nothing was measured."""

    outcome: str
    candidate: Mapping[str, Any]
    reason: str = ""
    launched: bool = False
    resolved: Mapping[str, Any] = field(default_factory=dict)
    server_args: list[str] | None = None
    startup: Mapping[str, Any] | None = None
    bench: dict[int, dict[str, Any]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    teardown: Mapping[str, Any] | None = None
    values: list[float] | None = None
    constraints: dict[str, float] = field(default_factory=dict)
    duplicate_of: int | None = None
    log_path: str | None = None
    interrupted: bool = False

    @property
    def feasible(self) -> bool:
        return self.values is not None and all(v <= 0 for v in self.constraints.values())

    def user_attrs(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "outcome": self.outcome,
            "reason": self.reason,
            "launched": self.launched,
            "candidate": dict(self.candidate),
            "resolved": dict(self.resolved),
            "server_args": self.server_args,
            "startup": dict(self.startup) if self.startup else None,
            "bench": {str(k): v for k, v in self.bench.items()},
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }
        if self.teardown is not None:
            attrs["teardown"] = dict(self.teardown)
        if self.duplicate_of is not None:
            attrs["duplicate_of"] = self.duplicate_of
        if self.log_path:
            attrs["log_path"] = self.log_path
        return attrs
