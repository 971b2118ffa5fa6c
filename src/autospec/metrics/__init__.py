"""Records -> per-level summaries and objective values (pure; never imports Optuna).

summarize(result)            one level run -> LevelSummary
summarize_repeats(results)   several runs of one level -> LevelSummary with
                             intervals across runs
metric_value(summary, name)  objective by name (METRICS lists the names)
metric_uncertainty(...)      half-width of its 95% interval, where known
steady_window(records, C)    the full-concurrency window behind agg_output_tok_s
with_accept_length(...)      accept length from the server where responses had none
"""

from __future__ import annotations

from autospec.metrics.objectives import (
    METRIC_DIRECTIONS,
    METRICS,
    metric_direction,
    metric_uncertainty,
    metric_value,
)
from autospec.metrics.steady import SteadyWindow, steady_window
from autospec.metrics.summary import (
    DEFAULT_MAX_ERROR_RATE,
    LevelSummary,
    summarize,
    summarize_repeats,
    with_accept_length,
)

__all__ = [
    "DEFAULT_MAX_ERROR_RATE",
    "LevelSummary",
    "METRICS",
    "METRIC_DIRECTIONS",
    "SteadyWindow",
    "metric_direction",
    "metric_uncertainty",
    "metric_value",
    "summarize",
    "steady_window",
    "summarize_repeats",
    "with_accept_length",
]
