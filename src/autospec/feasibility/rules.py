"""Static feasibility: SGLang's argument rules (`autospec.sglang_rules`, the one table
that the simulator reads too) turned into a :class:`Verdict`.

:func:`check_static` and :func:`resolve_static` are pure functions of the flags and the
SGLang version. The table, its row contract and its version gates live in
`autospec.sglang_rules`; this module adds what feasibility needs around it: a version
given by the user is checked (a one-line ``ConfigError``), and a walk becomes a verdict
(the first rejection in SGLang's order, else ok; "note" rows make an ok verdict
hardware-dependent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from autospec.errors import ConfigError
from autospec.feasibility.verdict import Verdict
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION, max_draft_tokens
from autospec.sglang_rules import EAGLE_FAMILY, RULES, Rule, applicable_rules, dp_attention_enabled, walk

__all__ = [
    "Rule",
    "RULES",
    "EAGLE_FAMILY",
    "check_static",
    "resolve_static",
    "rules_for",
    "max_draft_tokens",
    "dp_attention_enabled",
]


def _version(sglang_version: str | Version) -> Version:
    if isinstance(sglang_version, Version):
        return sglang_version
    try:
        return Version(str(sglang_version))
    except InvalidVersion:
        raise ConfigError(
            f"sglang version {sglang_version!r} is not a version number; give one such as {DEFAULT_SGLANG_VERSION}"
        ) from None


def rules_for(sglang_version: str | Version) -> tuple[Rule, ...]:
    """The rows of :data:`RULES` that apply to this SGLang version, in evaluation order."""
    return applicable_rules(_version(sglang_version))


def resolve_static(flags: Mapping[str, Any], sglang_version: str | Version = DEFAULT_SGLANG_VERSION) -> dict[str, Any]:
    """The flags after SGLang's rewrites for this version (rejections are not checked)."""
    return walk(flags, rules_for(sglang_version), stop_at_reject=False).resolved


def check_static(flags: Mapping[str, Any], sglang_version: str | Version = DEFAULT_SGLANG_VERSION) -> Verdict:
    """Verdict of the static rules: the first rejection in SGLang's order, else ok.

    ``resolved`` holds the flags after the rewrites that ran before the verdict. An ok
    verdict is ``hardware_dependent`` when a "note" row matched (its text is the reason).
    """
    result = walk(flags, rules_for(sglang_version))
    resolved, rejected, notes = result.resolved, result.rejected, result.notes
    if rejected is not None:
        return Verdict(
            status="rejected",
            reason=rejected.reason(resolved),
            source="static",
            rule=rejected.id,
            resolved=resolved,
            hardware_dependent=rejected.hardware_dependent or bool(notes),
        )
    return Verdict(
        status="ok",
        reason="; ".join(n.reason(resolved) for n in notes),
        source="static",
        rule=notes[0].id if notes else None,
        resolved=resolved,
        hardware_dependent=bool(notes),
    )
