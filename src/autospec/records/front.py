"""The Pareto front of a study: computed here and nowhere else.

The front is made of configurations (`autospec.records.servers`: every launch of one
server pooled, reference points included; per objective, the launches of the same server
at that objective's concurrency): each is one point with the mean of its launches
(`pooled_values`), named by the configuration's number.
A trial is on the front when no other measured trial is at least as good on every
objective and better on one; ties (equal values) stay on it together.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from autospec.records.servers import holds_level, launch_groups, objective_groups
from autospec.records.stored import StoredTrial

__all__ = ["dominates", "pareto_front", "launch_groups", "objective_groups", "holds_level", "pooled_values"]


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """`a` is at least as good as `b` on every objective and better on at least one."""
    no_worse = all((x >= y) if up else (x <= y) for x, y, up in zip(a, b, maximize))
    better = any((x > y) if up else (x < y) for x, y, up in zip(a, b, maximize))
    return no_worse and better


def _measured(t: StoredTrial) -> Sequence[float] | None:
    if t.has_measurement and t.record is not None and t.record.values is not None:
        return t.record.values
    return t.values


def pooled_values(group: Sequence[StoredTrial]) -> tuple[float, ...]:
    """Per objective, the mean of the group's measured values (one launch: its values)."""
    rows = [v for v in map(_measured, group) if v is not None]
    return tuple(statistics.fmean(column) for column in zip(*rows))


def pareto_front(
    trials: Sequence[StoredTrial], maximize: Sequence[bool], concurrencies: Sequence[int | None] | None = None
) -> list[StoredTrial]:
    """The measured trials (relaunches pooled in) that no other one dominates, in number
    order. With the objectives' `concurrencies`, each objective pools as `objective_groups`
    says; without, over each configuration's own launches."""
    groups = launch_groups(trials)
    levels = list(concurrencies) if concurrencies is not None else [None] * len(maximize)
    per_objective = [objective_groups(trials, c, groups) for c in levels]
    named = {n: next(t for t in group if t.number == n) for n, group in groups.items()}  # the configuration's name
    points = [(named[n], tuple(pooled_values(by[n])[i] for i, by in enumerate(per_objective))) for n in groups]
    return [t for t, v in points if not any(o is not t and dominates(ov, v, maximize) for o, ov in points)]
