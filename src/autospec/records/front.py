"""The Pareto front of a study: computed here and nowhere else.

Only `TrialClass.MEASURED` trials can be on the front. A trial is on it when no other
measured trial is at least as good on every objective and better on one; ties (equal
values) stay on it together.
"""

from __future__ import annotations

from collections.abc import Sequence

from autospec.records.stored import StoredTrial, TrialClass

__all__ = ["dominates", "pareto_front"]


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """`a` is at least as good as `b` on every objective and better on at least one."""
    no_worse = all((x >= y) if up else (x <= y) for x, y, up in zip(a, b, maximize))
    better = any((x > y) if up else (x < y) for x, y, up in zip(a, b, maximize))
    return no_worse and better


def pareto_front(trials: Sequence[StoredTrial], maximize: Sequence[bool]) -> list[StoredTrial]:
    """The measured trials no other measured trial dominates, in number order."""
    measured = [(t, t.values) for t in trials if t.trial_class == TrialClass.MEASURED and t.values is not None]
    return [t for t, v in measured if not any(o is not t and dominates(ov, v, maximize) for o, ov in measured)]
