"""Objective values by metric name (pure; no Optuna).

`METRICS` names every figure a study may optimise or constrain, with its unit and
meaning; `METRIC_DIRECTIONS` says whether larger is better (both defined in
`autospec.metric_names`, re-exported here). `metric_value` raises KeyError for other
names.
"""

from __future__ import annotations

import math

from autospec.metric_names import METRIC_DIRECTIONS, METRICS
from autospec.metrics import stats
from autospec.metrics.summary import LevelSummary

__all__ = ["METRICS", "METRIC_DIRECTIONS", "metric_direction", "metric_uncertainty", "metric_value"]


def metric_value(summary: LevelSummary, name: str) -> float:
    """The named figure of `summary` (NaN where it could not be formed, e.g.
    accept_length without speculative decoding). KeyError for unknown names."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    value = getattr(summary, name)
    return math.nan if value is None else float(value)


def metric_uncertainty(summary: LevelSummary, name: str) -> float | None:
    """Half-width of the named figure's 95% interval, where known (None otherwise).
    KeyError for unknown names."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    interval = summary.cis.get(name)
    return None if interval is None else stats.half_width(interval)


def metric_direction(name: str) -> str:
    """ "maximize" or "minimize" (KeyError for unknown names)."""
    if name not in METRICS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRIC_DIRECTIONS[name]
