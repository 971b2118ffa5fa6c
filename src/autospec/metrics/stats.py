"""Small statistics helpers: percentiles, bootstrap and Student-t intervals (pure).

Bootstrap resampling is seeded (`BOOTSTRAP_SEED`), so the same records always give
the same intervals. Intervals are 95% two-sided throughout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20240601
BOOTSTRAP_RESAMPLES = 1000
# Cap on resamples x sample size, so large duration-mode levels stay cheap.
_BOOTSTRAP_BUDGET = 2_000_000

NAN_INTERVAL: tuple[float, float] = (math.nan, math.nan)


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (linear interpolation, like numpy and SGLang's
    bench_serving); NaN for no values."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return math.nan
    return float(np.percentile(arr, q))


def mean(values: Sequence[float] | np.ndarray) -> float:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()) if arr.size else math.nan


def _resample_indices(n: int) -> np.ndarray:
    resamples = max(200, min(BOOTSTRAP_RESAMPLES, _BOOTSTRAP_BUDGET // max(n, 1)))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    return rng.integers(0, n, size=(resamples, n))


def _interval(stats: np.ndarray) -> tuple[float, float]:
    alpha = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(stats, [alpha, 100 - alpha])
    return float(lo), float(hi)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, statistic: Callable[[np.ndarray], np.ndarray]
) -> tuple[float, float]:
    """Percentile-bootstrap interval of `statistic` over resamples of `values`.

    `statistic` maps a (resamples, n) array to (resamples,) values, e.g.
    `lambda a: a.mean(axis=1)`. Fewer than 2 values: (nan, nan).
    """
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return NAN_INTERVAL
    return _interval(statistic(arr[_resample_indices(arr.size)]))


def bootstrap_mean_ci(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    return bootstrap_ci(values, lambda a: a.mean(axis=1))


def bootstrap_percentile_ci(values: Sequence[float] | np.ndarray, q: float) -> tuple[float, float]:
    return bootstrap_ci(values, lambda a: np.percentile(a, q, axis=1))


def bootstrap_ratio_ci(
    numerators: Sequence[float] | np.ndarray, denominators: Sequence[float] | np.ndarray
) -> tuple[float, float]:
    """Interval of sum(num)/sum(den) under a paired bootstrap over items."""
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.size < 2 or num.size != den.size:
        return NAN_INTERVAL
    idx = _resample_indices(num.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    ratios = ratios[np.isfinite(ratios)]
    return _interval(ratios) if ratios.size else NAN_INTERVAL


def t_quantile(df: int) -> float:
    """Two-sided 95% Student-t quantile for `df` degrees of freedom."""
    from scipy.special import stdtrit  # lazy: scipy.special costs ~0.3 s to import

    return float(stdtrit(df, 1 - (1 - CONFIDENCE) / 2))


def t_interval(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Student-t interval of the mean (for a few repeat runs); (nan, nan) below 2."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return NAN_INTERVAL
    centre = float(arr.mean())
    half = t_quantile(arr.size - 1) * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    return centre - half, centre + half


def half_width(interval: tuple[float, float]) -> float | None:
    """Half the width of an interval; None when it is unknown (NaN)."""
    lo, hi = interval
    if math.isnan(lo) or math.isnan(hi):
        return None
    return (hi - lo) / 2
