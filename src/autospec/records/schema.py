"""What one trial produced, as typed data, and its exact form in Optuna user attributes.

This module and `autospec.records.store` are the only code that knows the attribute keys.
`TrialRecord.to_attrs` and `TrialRecord.from_attrs` are inverse to each other
(``from_attrs(r.to_attrs()) == r``); attributes written before versioning (schema 1)
read the same way. Keys (documented for users in docs/study-data.md):

============= ================================================================
key           value
============= ================================================================
schema        `SCHEMA_VERSION` of the writer (absent: 1)
outcome       `OK`, or why not: `REJECTED`, `SKIPPED`, `DUPLICATE`, a launch
              failure kind (`autospec.launcher.LAUNCH_FAILURE_KINDS`),
              `BENCH_FAILED`, `CONSTRAINT_VIOLATED`; on FAIL trials
              `INTERRUPTED`, `STALE`, `ORPHANED` or a transient launch failure
reason        one line explaining a non-ok outcome ("" when ok)
launched      a server process was started for this trial
candidate     the flags the sampler chose (draft tokens mapped)
resolved      flags after SGLang's rewrites (preflight or static rules)
server_args   the exact argv (secrets redacted), or null when not launched
startup       facts parsed from the server log (max_total_num_tokens, ...)
bench         {"<concurrency>": level summary} per measured level
seconds       {"preflight", "launch", "bench", "teardown", "total"}
teardown      how the server was stopped
duplicate_of  the trial whose measurement a duplicate reuses
log_path      the server log
values        the measured objective values (schema 2), also for a trial that
              violated an SLO, which Optuna is told worst-case values for (so
              that no front, the dashboard's included, can show it)
============= ================================================================

Markers, set when a trial is queued (`Markers`): ``baseline``, ``calibration``,
``mem_push`` (the trial it raises), ``retry_of`` (the trial it repeats), ``confirm_of``
(the trial whose configuration it launches again to confirm it), ``imported`` (source and
key of an imported measurement), ``reference`` (the name of a reference point measured
beside the search: ``no_speculation``, ``sglang_defaults``, ``adaptive``;
`autospec.study.proposing.references`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "TrialRecord",
    "Markers",
    "OK",
    "REJECTED",
    "SKIPPED",
    "DUPLICATE",
    "BENCH_FAILED",
    "CONSTRAINT_VIOLATED",
    "INTERRUPTED",
    "STALE",
    "ORPHANED",
    "WITHDRAWN",
    "NOT_LAUNCHED_OUTCOMES",
    "MEASURED_OUTCOMES",
]

SCHEMA_VERSION = 2

OK = "ok"
REJECTED = "rejected"  # SGLang would refuse the flags (static rule or preflight)
SKIPPED = "skipped"  # predicted to fail from what earlier launches showed
DUPLICATE = "duplicate"  # resolves to a server already launched
BENCH_FAILED = "bench_failed"  # too many failed requests, or an objective not measurable
CONSTRAINT_VIOLATED = "constraint_violated"  # measured, but an SLO is broken
INTERRUPTED = "interrupted"  # a stop signal ended it (FAIL, queued again)
STALE = "stale"  # its tuner died while it ran (FAIL, queued again)
ORPHANED = "orphaned"  # RUNNING without a tuner record (FAIL, queued again)
WITHDRAWN = "withdrawn"  # another worker claimed the launch first (FAIL, never retried; autospec.study.claims)

NOT_LAUNCHED_OUTCOMES = (REJECTED, SKIPPED, DUPLICATE)
#: outcomes whose values are real measurements of the configuration
MEASURED_OUTCOMES = (OK, CONSTRAINT_VIOLATED)


def _int_keys(bench: Mapping[Any, Any]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for key, summary in bench.items():
        try:
            out[int(key)] = dict(summary)
        except (TypeError, ValueError):
            continue
    return out


@dataclass
class TrialRecord:
    """Everything a trial chain produced. `values` (objective values in the study's
    order) and `constraints` (SLO name -> violation, <= 0 satisfied) are None/empty when
    nothing was measured; a duplicate carries its source's. `intervals`: per objective and
    constraint name (`metric@cC`), {"value", "ci95": [lo, hi] or None, "method"}, the
    figure's 95% interval as its level measured it, in one place for optuna-dashboard
    (the level summaries in `bench` hold the same)."""

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
    intervals: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        """The configuration ran (or repeats one that ran) and was measured: the value of
        the ``feasible`` constraint. SLO violations are separate constraints."""
        return self.values is not None and self.outcome in (*MEASURED_OUTCOMES, DUPLICATE)

    @property
    def may_be_on_a_front(self) -> bool:
        """Feasible and within every SLO: the only records Optuna is told real values for."""
        return self.feasible and not any(v > 0 for v in self.constraints.values())

    def to_attrs(self) -> dict[str, Any]:
        """The user attributes that store this record (JSON-ready)."""
        attrs: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "outcome": self.outcome,
            "reason": self.reason,
            "launched": self.launched,
            "candidate": dict(self.candidate),
            "resolved": dict(self.resolved),
            "server_args": list(self.server_args) if self.server_args is not None else None,
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
        if self.values is not None:
            attrs["values"] = list(self.values)
        if self.intervals:
            attrs["intervals"] = {k: dict(v) for k, v in self.intervals.items()}
        return attrs

    @classmethod
    def from_attrs(
        cls, attrs: Mapping[str, Any], values: list[float] | None = None, constraints: Mapping[str, float] | None = None
    ) -> TrialRecord | None:
        """The record stored in `attrs`, or None when no record was written (a trial that
        is queued, running, or was ended before its chain finished). `values` and
        `constraints` are what the trial was told, kept only for outcomes that measured; the
        measured values stored with the record (schema 2) take precedence over `values`."""
        if "outcome" not in attrs:
            return None
        outcome = str(attrs["outcome"])
        measured = outcome in (*MEASURED_OUTCOMES, DUPLICATE)
        duplicate_of = attrs.get("duplicate_of")
        stored = attrs.get("values")
        values = list(stored) if isinstance(stored, list) else values
        return cls(
            outcome=outcome,
            candidate=dict(attrs.get("candidate") or {}),
            reason=str(attrs.get("reason") or ""),
            launched=bool(attrs.get("launched")),
            resolved=dict(attrs.get("resolved") or {}),
            server_args=list(attrs["server_args"]) if attrs.get("server_args") is not None else None,
            startup=dict(attrs["startup"]) if attrs.get("startup") else None,
            bench=_int_keys(attrs.get("bench") or {}),
            seconds={k: float(v) for k, v in (attrs.get("seconds") or {}).items()},
            teardown=dict(attrs["teardown"]) if attrs.get("teardown") is not None else None,
            values=list(values) if measured and values is not None else None,
            constraints=dict(constraints or {}) if measured else {},
            duplicate_of=int(duplicate_of) if isinstance(duplicate_of, int) else None,
            log_path=attrs.get("log_path") or None,
            intervals={str(k): dict(v) for k, v in (attrs.get("intervals") or {}).items() if isinstance(v, Mapping)},
        )


@dataclass(frozen=True)
class Markers:
    """Why a trial was queued (set at enqueue time, before it runs)."""

    baseline: bool = False
    calibration: bool = False
    mem_push: int | None = None  # the front trial whose configuration it raises
    retry_of: int | None = None  # the trial whose parameters it repeats
    confirm_of: int | None = None  # the trial whose configuration it relaunches (--confirm)
    imported: Mapping[str, Any] | None = None  # {"source", "key", ...} of an imported measurement
    predicted: Mapping[str, Any] | None = None  # --sampler model: what it expected (`ModelSampler.prediction_for`)
    reference: str | None = None  # a reference point outside the search (`autospec.study.proposing.references`)
    control: str | None = None  # a control relaunch, and why: "machine" (another machine) or "pause" (`...proposing.control`)

    def to_attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value is False:  # `is`: trial 0 is a valid mem_push / retry_of
                continue
            out[f.name] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> Markers:
        def number(key: str) -> int | None:
            value = attrs.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        imported, predicted, reference = attrs.get("imported"), attrs.get("predicted"), attrs.get("reference")
        control = attrs.get("control")
        return cls(
            baseline=bool(attrs.get("baseline")),
            calibration=bool(attrs.get("calibration")),
            mem_push=number("mem_push"),
            retry_of=number("retry_of"),
            confirm_of=number("confirm_of"),
            imported=dict(imported) if isinstance(imported, Mapping) else None,
            predicted=dict(predicted) if isinstance(predicted, Mapping) else None,
            reference=reference if isinstance(reference, str) and reference else None,
            control=control if isinstance(control, str) and control else None,
        )
