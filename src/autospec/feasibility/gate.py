"""The one question the study asks before a launch: should this configuration run?

Order (cheapest and most certain first): static rules for the SGLang version ->
SGLang's own resolver (preflight, when available; it overrides static rewrites) ->
rules learned from earlier failures -> deduplication against configurations that
resolve to the same server. Each step returns the shared `Verdict` type.

`argument_verdict` is the first two steps only: does SGLang accept these flags at all?
Its preflight answers are keyed by the flags the resolver reads: `mem_fraction_static`
never changes SGLang's verdict on the arguments (sglang 0.5.23: the memory hooks only
rewrite it, `arg_groups/attention_hook.py`, `kv_shard_hook.py`, `memory_hook.py`; no
check rejects on it), so the configurations that differ only in it share one answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.feasibility.learned import LearnedRules
from autospec.feasibility.oracle import ArgvBuilder, PreflightOracle
from autospec.feasibility.preflight import PreflightError
from autospec.feasibility.rules import check_static
from autospec.feasibility.verdict import Verdict
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION, MEM_FRACTION, dedup_key

__all__ = ["FeasibilityGate", "Measurement", "dedup_key", "distinct_argument_sets", "RESOLVER_IGNORES", "PREFETCH_LIMIT"]

#: flags whose value never changes SGLang's verdict on the arguments (see the module docstring)
RESOLVER_IGNORES = (MEM_FRACTION,)
#: grid points resolved up front in one preflight batch (larger spaces are checked as asked)
PREFETCH_LIMIT = 5000


def distinct_argument_sets(flag_sets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One representative (the first) of each group of flag sets the resolver answers
    alike: they differ only in `RESOLVER_IGNORES`."""
    seen: dict[str, Mapping[str, Any]] = {}
    for flags in flag_sets:
        seen.setdefault(_resolver_key(flags), flags)
    return list(seen.values())


def _resolver_key(flags: Mapping[str, Any]) -> str:
    return dedup_key({k: v for k, v in flags.items() if k not in RESOLVER_IGNORES})


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
    _answers: dict[str, Verdict | None] = field(default_factory=dict, repr=False)

    def argument_verdict(self, flags: Mapping[str, Any]) -> Verdict:
        """Static rules, then SGLang's resolver: "ok" (with the resolved flags) when SGLang
        accepts the arguments, else "rejected". Nothing learned is applied."""
        static = check_static(flags, self.sglang_version)
        if not static.ok:
            return static
        resolved = dict(static.resolved)
        pre = self._preflight(flags)
        if pre is not None and not pre.ok:
            return pre
        if pre is not None:
            resolved.update({k: pre.resolved[k] for k in flags if k in pre.resolved and k not in RESOLVER_IGNORES})
        return Verdict(
            status="ok",
            reason=static.reason,
            source=static.source,
            rule=None,
            resolved=resolved,
            hardware_dependent=static.hardware_dependent or bool(pre and pre.hardware_dependent),
        )

    def _preflight(self, flags: Mapping[str, Any]) -> Verdict | None:
        """The resolver's answer for `flags`, cached by the flags it reads; None without
        an oracle or when the resolver itself broke (the static rules then stand)."""
        if self.preflight is None or self.to_argv is None:
            return None
        key = _resolver_key(flags)
        if key not in self._answers:
            try:
                self._answers[key] = self.preflight.check(self.to_argv(flags))
            except PreflightError:
                self._answers[key] = None
        return self._answers[key]

    def verdict(self, flags: Mapping[str, Any], reuse: bool = True) -> Verdict:
        """Launch `flags`, or why not. `reuse=False`: a server already measured is launched
        again (a confirmation relaunch) instead of answered as a duplicate, and rules
        learned since do not skip it (it started and was measured)."""
        arguments = self.argument_verdict(flags)
        if not arguments.ok:
            return arguments
        resolved = dict(arguments.resolved)
        known = self.measured.get(dedup_key(resolved))
        started_before = not reuse and known is not None and known.values is not None
        if self.learn and not started_before:
            explained = self.rules.explain(resolved)
            if explained is not None:
                rule, reason = explained
                return Verdict(status="skipped", reason=reason, source="learned", rule=rule, resolved=resolved)
        if reuse and not self.remeasure and dedup_key(resolved) in self.measured:
            first = self.measured[dedup_key(resolved)]
            what = "its measurement is reused" if first.values is not None else "it failed, and would again"
            return Verdict(
                status="duplicate",
                reason=f"resolves to the same server as trial {first.number}; {what}",
                source="dedup",
                rule="same_resolved_flags",
                resolved=resolved,
            )
        return Verdict(status="ok", reason="", source=arguments.source, rule=None, resolved=resolved)

    def prefetch(self, candidates: Sequence[Mapping[str, Any]]) -> int:
        """Resolve many configurations in one call of the preflight oracle (one interpreter
        start instead of one per candidate: importing sglang takes 20-30 s). Returns how
        many were sent; 0 without an oracle, when its batches do not save time, or when it
        fails (checks then run one at a time, when they are asked for)."""
        if self.preflight is None or self.to_argv is None or not self.preflight.batch_saves_time:
            return 0
        todo: dict[str, Mapping[str, Any]] = {}
        for flags in candidates:
            key = _resolver_key(flags)
            if key not in self._answers and key not in todo and check_static(flags, self.sglang_version).ok:
                todo[key] = flags
        try:
            answers = self.preflight.check_many([self.to_argv(f) for f in todo.values()])
        except PreflightError:
            return 0
        self._answers.update(zip(todo, answers))
        return len(todo)

    def learn_failure(self, resolved: Mapping[str, Any], kind: str) -> None:
        self.rules.record_failure(resolved, kind)

    def learn_success(self, resolved: Mapping[str, Any], startup: Mapping[str, Any]) -> None:
        self.rules.record_success(resolved, startup)

    def remember(
        self,
        number: int,
        resolved: Mapping[str, Any],
        values: Sequence[float] | None,
        constraints: Mapping[str, float],
        bench: dict,
    ) -> None:
        """Record a launched trial (values None when it failed) so repeats are not launched."""
        self.measured.setdefault(dedup_key(resolved), Measurement(number, values, dict(constraints), bench))

    def measurement_of(self, resolved: Mapping[str, Any]) -> Measurement | None:
        return self.measured.get(dedup_key(resolved))
