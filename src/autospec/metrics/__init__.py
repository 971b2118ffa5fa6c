"""Records -> per-level summaries and objective values (pure; never imports Optuna).

summarize(result)            one level run -> LevelSummary
summarize_repeats(results)   several runs of one level -> LevelSummary with
                             intervals across runs
metric_value(summary, name)  objective by name (METRICS lists the names)
metric_uncertainty(...)      half-width of its 95% interval, where known
steady_window(records, C)    the full-concurrency window behind agg_output_tok_s
AGG_CI_METHODS               how the aggregate's interval was formed (batch means,
                             short window, whole run, repeats)
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
from autospec.metrics.steady import BATCH_MEANS, MIN_SLICES, PRECISE_SLICES, SHORT_WINDOW, SteadyWindow, steady_window
from autospec.metrics.summary import (
    AGG_CI_METHODS,
    DEFAULT_MAX_ERROR_RATE,
    REPEATS,
    WHOLE_RUN,
    LevelSummary,
    summarize,
    summarize_repeats,
    with_accept_length,
)

__all__ = [
    "AGG_CI_METHODS",
    "BATCH_MEANS",
    "DEFAULT_MAX_ERROR_RATE",
    "MIN_SLICES",
    "PRECISE_SLICES",
    "REPEATS",
    "SHORT_WINDOW",
    "WHOLE_RUN",
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
