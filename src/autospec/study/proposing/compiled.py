"""The search space as the sampler sees it: only what SGLang accepts.

Before a study asks its first question, every configuration of the space is checked
against SGLang's argument rules (`FeasibilityGate.argument_verdict`: the static rules and,
when available, SGLang's own resolver). A dimension that no accepted configuration varies
is taken out of the sampler's view and fixed as a server flag; categorical choices that
no accepted configuration uses, and the ends of an integer range that none reaches, are
dropped. So the sampler never proposes, say, ``speculative_eagle_topk = 4`` on a backend
that only runs chains, and never spends a question on it.

What is left can still be infeasible for reasons learned while the study runs (memory),
which `autospec.study.proposing.proposer` handles.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autospec.config import CategoricalParam, IntParam, ParamSpec, SearchSpace
from autospec.space import grid

__all__ = ["CompiledSpace", "compile_space"]


@dataclasses.dataclass(frozen=True)
class CompiledSpace:
    """`space` narrowed to what SGLang accepts; `notes` say what was narrowed and why;
    `fixed` holds the tunables that became fixed flags (a trial's candidate includes them,
    so records and imports see every parameter of the original space). `accepted` and
    `total` count grid points (None when the grid was too large to walk). `declared` is
    the space as the user wrote it (the baseline is checked against its flags)."""

    space: SearchSpace
    notes: tuple[str, ...] = ()
    accepted: int | None = None
    total: int | None = None
    fixed: dict[str, Any] = dataclasses.field(default_factory=dict)
    narrowed_from: SearchSpace | None = None  # None: `space` was not narrowed

    @property
    def declared(self) -> SearchSpace:
        return self.narrowed_from if self.narrowed_from is not None else self.space

    def candidate(self, chosen: Mapping[str, Any]) -> dict[str, Any]:
        """A candidate of the original space: the fixed tunables plus what was chosen."""
        return {**self.fixed, **chosen}


def _values(points: Sequence[Mapping[str, Any]], name: str) -> list[Any]:
    """The distinct values `name` takes in `points` (in first-seen order)."""
    seen: dict[str, Any] = {}
    for p in points:
        if name in p:
            seen.setdefault(repr(p[name]), p[name])
    return list(seen.values())


def _narrow(p: ParamSpec, values: list[Any], everywhere: bool) -> tuple[ParamSpec | None, Any, str]:
    """(the narrowed parameter or None when it is fixed or unused, the fixed value, a note)."""
    if not values:
        return None, None, f"{p.name}: no accepted configuration sets it; left to SGLang's default"
    if len(values) == 1 and everywhere and p.type != "draft_tokens":
        return None, values[0], f"{p.name}: every accepted configuration has {values[0]!r}; fixed"
    if isinstance(p, CategoricalParam) and len(values) < len(p.choices):
        kept = tuple(c for c in p.choices if any(repr(c) == repr(v) for v in values))
        dropped = [c for c in p.choices if c not in kept]
        return dataclasses.replace(p, choices=kept), None, f"{p.name}: {dropped} are never accepted; dropped"
    if isinstance(p, IntParam) and not p.log and p.step in (None, 1):
        low, high = min(values), max(values)
        if (low, high) != (p.low, p.high):
            return (
                dataclasses.replace(p, low=low, high=high),
                None,
                (f"{p.name}: only {low}..{high} of {p.low}..{p.high} is accepted; narrowed"),
            )
    return p, None, ""


def compile_space(space: SearchSpace, accepts: Callable[[Mapping[str, Any]], bool], limit: int) -> CompiledSpace:
    """`space` narrowed to the configurations `accepts` (fixed flags merged in) lets
    through. Spaces with more than `limit` grid points, or none accepted, are returned
    unchanged (the sampler then meets rejections one at a time)."""
    points = list(itertools.islice(grid(space), limit + 1))
    if len(points) > limit:
        return CompiledSpace(space)
    fixed = dict(space.server.flags)
    accepted = [p for p in points if accepts({**fixed, **p})]
    if not accepted:
        return CompiledSpace(space, accepted=0, total=len(points))
    params: list[ParamSpec] = []
    new_fixed: dict[str, Any] = {}
    notes: list[str] = []
    for p in space.params:
        narrowed, value, note = _narrow(p, _values(accepted, p.name), all(p.name in a for a in accepted))
        if narrowed is not None:
            params.append(narrowed)
        elif value is not None:
            new_fixed[p.name] = value
        if note:
            notes.append(note)
    if not notes:
        return CompiledSpace(space, accepted=len(accepted), total=len(points))
    server = dataclasses.replace(space.server, flags={**space.server.flags, **new_fixed})
    return CompiledSpace(
        dataclasses.replace(space, params=tuple(params), server=server),
        tuple(notes),
        len(accepted),
        len(points),
        new_fixed,
        narrowed_from=space,
    )
