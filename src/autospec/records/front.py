"""The Pareto front of a study: computed here and nowhere else.

Only `TrialClass.MEASURED` trials can be on the front. A configuration launched again to
confirm it (`TrialClass.RELAUNCH` trials, `Markers.confirm_of`) stays one point: its
first trial, with the mean of every measured launch (`launch_groups`, `pooled_values`); so
does one measured again as a trial of its own (`autospec optimize --remeasure`: the same
parameters and resolved flags as an earlier measured trial).
A trial is on the front when no other measured trial is at least as good on every
objective and better on one; ties (equal values) stay on it together.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

from autospec.records.stored import StoredTrial, TrialClass
from autospec.sglang_facts import dedup_key

__all__ = ["dominates", "pareto_front", "launch_groups", "pooled_values"]


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """`a` is at least as good as `b` on every objective and better on at least one."""
    no_worse = all((x >= y) if up else (x <= y) for x, y, up in zip(a, b, maximize))
    better = any((x > y) if up else (x < y) for x, y, up in zip(a, b, maximize))
    return no_worse and better


def launch_groups(trials: Sequence[StoredTrial]) -> dict[int, list[StoredTrial]]:
    """Measured trial number -> that trial and its measured relaunches, in number order: the
    trials that confirm it, and later measured trials of the same parameters and resolved
    flags (`--remeasure`). A relaunch always comes after the trial it relaunches."""
    groups: dict[int, list[StoredTrial]] = {}
    first_of: dict[str, int] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.trial_class == TrialClass.RELAUNCH:
            root = t.markers.confirm_of
        elif t.trial_class == TrialClass.MEASURED and t.values is not None:
            key = _server_key(t)
            root = first_of.get(key) if key is not None else None
            if root is None or not t.has_measurement:
                groups[t.number] = [t]
                if key is not None:
                    first_of.setdefault(key, t.number)
                continue
        else:
            continue
        if root in groups and t.has_measurement:
            groups[root].append(t)
    return groups


def _server_key(t: StoredTrial) -> str | None:
    """The trial's parameters and resolved flags as one text (None without resolved flags):
    equal keys mean the same configuration launched again."""
    if t.record is None or not t.record.resolved:
        return None
    return json.dumps([sorted(t.params.items()), dedup_key(t.record.resolved)], default=str)


def _measured(t: StoredTrial) -> Sequence[float] | None:
    if t.has_measurement and t.record is not None and t.record.values is not None:
        return t.record.values
    return t.values


def pooled_values(group: Sequence[StoredTrial]) -> tuple[float, ...]:
    """Per objective, the mean of the group's measured values (one launch: its values)."""
    rows = [v for v in map(_measured, group) if v is not None]
    return tuple(statistics.fmean(column) for column in zip(*rows))


def pareto_front(trials: Sequence[StoredTrial], maximize: Sequence[bool]) -> list[StoredTrial]:
    """The measured trials (relaunches pooled in) that no other one dominates, in number order."""
    points = [(group[0], pooled_values(group)) for group in launch_groups(trials).values()]
    return [t for t, v in points if not any(o is not t and dominates(ov, v, maximize) for o, ov in points)]
