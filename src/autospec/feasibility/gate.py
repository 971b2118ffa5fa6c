"""The one question the study asks before a launch: should this configuration run?

Order (cheapest and most certain first): static rules for the SGLang version ->
SGLang's own resolver (preflight, when available; it overrides static rewrites) ->
rules learned from earlier failures -> deduplication against configurations that
resolve to the same server. Each step returns the shared `Verdict` type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.feasibility.learned import LearnedRules
from autospec.feasibility.oracle import ArgvBuilder, PreflightOracle
from autospec.feasibility.preflight import PreflightError
from autospec.feasibility.rules import check_static
from autospec.feasibility.verdict import Verdict
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION

__all__ = ["FeasibilityGate", "Measurement", "dedup_key"]

# Flags that never change what server runs (where it listens, its logs).
_IRRELEVANT = {"host", "port", "log_level", "random_seed"}


def dedup_key(resolved: Mapping[str, Any]) -> str:
    """Canonical text of the resolved flags: equal keys mean the same server."""
    canon = {
        k: (round(v, 6) if isinstance(v, float) else v)
        for k, v in resolved.items()
        if k not in _IRRELEVANT
    }
    return json.dumps(canon, sort_keys=True, default=str)


@dataclass(frozen=True)
class Measurement:
    number: int
    values: Sequence[float] | None
    constraints: Mapping[str, float]
    bench: dict


@dataclass
class FeasibilityGate:
    """Stateful: learns from every launch the study reports back to it."""

    sglang_version: str = DEFAULT_SGLANG_VERSION
    preflight: PreflightOracle | None = None
    to_argv: ArgvBuilder | None = None  # flags -> the argv words the preflight checks
    learn: bool = True
    remeasure: bool = False
    rules: LearnedRules = field(default_factory=LearnedRules)
    measured: dict[str, Measurement] = field(default_factory=dict)

    def verdict(self, flags: Mapping[str, Any]) -> Verdict:
        static = check_static(flags, self.sglang_version)
        if not static.ok:
            return static
        resolved = dict(static.resolved)
        if self.preflight is not None and self.to_argv is not None:
            try:
                pre = self.preflight.check(self.to_argv(flags))
            except PreflightError:
                pre = None  # the resolver itself broke (not a verdict): static rules stand
            if pre is not None and not pre.ok:
                return pre
            if pre is not None:
                resolved.update({k: pre.resolved[k] for k in flags if k in pre.resolved})
        if self.learn:
            explained = self.rules.explain(resolved)
            if explained is not None:
                rule, reason = explained
                return Verdict(status="skipped", reason=reason, source="learned", rule=rule, resolved=resolved)
        if not self.remeasure and dedup_key(resolved) in self.measured:
            first = self.measured[dedup_key(resolved)]
            what = "its measurement is reused" if first.values is not None else "it failed, and would again"
            return Verdict(
                status="duplicate",
                reason=f"resolves to the same server as trial {first.number}; {what}",
                source="dedup", rule="same_resolved_flags", resolved=resolved,
            )
        return Verdict(status="ok", reason="", source=static.source, rule=None, resolved=resolved)

    def prefetch(self, candidates: Sequence[Mapping[str, Any]]) -> int:
        """Resolve many configurations in one call of the preflight oracle (one interpreter
        start instead of one per candidate: importing sglang takes 20-30 s). Returns how
        many were sent; 0 without an oracle, when its batches do not save time, or when it
        fails (checks then run one at a time, when they are asked for)."""
        if self.preflight is None or self.to_argv is None or not self.preflight.batch_saves_time:
            return 0
        argvs = [self.to_argv(c) for c in candidates if check_static(c, self.sglang_version).ok]
        try:
            self.preflight.check_many(argvs)
        except PreflightError:
            return 0
        return len(argvs)

    def learn_failure(self, resolved: Mapping[str, Any], kind: str) -> None:
        self.rules.record_failure(resolved, kind)

    def learn_success(self, resolved: Mapping[str, Any], startup: Mapping[str, Any]) -> None:
        self.rules.record_success(resolved, startup)

    def remember(self, number: int, resolved: Mapping[str, Any], values, constraints, bench) -> None:
        """Record a launched trial (values None when it failed) so repeats are not launched."""
        self.measured.setdefault(dedup_key(resolved), Measurement(number, values, dict(constraints), bench))

    def measurement_of(self, resolved: Mapping[str, Any]) -> Measurement | None:
        return self.measured.get(dedup_key(resolved))
