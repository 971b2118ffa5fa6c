"""Small statistics helpers: percentiles and 95% intervals (pure).

Which interval for which figure (each the usual tool for its kind of statistic, all
from scipy.stats, all deterministic for the same data):

    mean of per-request values     Student-t (`t_interval`)
    percentile (p50, p90, p99)     distribution-free order-statistic interval
                                   (`quantile_interval`, binomial; no resampling, exact
                                   coverage; unknown where too few values: the p99 of 64
                                   requests has no upper bound)
    ratio of sums (accept length)  paired percentile bootstrap (`bootstrap_ratio_ci`,
                                   `scipy.stats.bootstrap`, seeded with BOOTSTRAP_SEED)
    steady-state throughput        batch means: Student-t over sub-window rates (a
                                   window under 3 waves: over sub-wave slices, widened
                                   for their lag-1 autocorrelation)
    repeat runs                    Student-t over the runs' values

Intervals are 95% two-sided throughout; (nan, nan) where unknown. scipy.stats is
imported lazily (it costs about half a second), so importing autospec stays quick.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20240601
BOOTSTRAP_RESAMPLES = 1000
# Cap on resamples x sample size, so large levels stay cheap.
_BOOTSTRAP_BUDGET = 2_000_000

NAN_INTERVAL: tuple[float, float] = (math.nan, math.nan)


def preload() -> None:
    """Import scipy.stats now (about half a second the first time), so that it does not
    happen inside a running level: the precision loop summarises records while requests
    are in flight, and a stall there would delay the client's timestamps."""
    import scipy.stats  # noqa: F401


def lag1_autocorrelation(values: Sequence[float] | np.ndarray) -> float:
    """The lag-1 sample autocorrelation sum((x_i - m)(x_i+1 - m)) / sum((x_i - m)^2);
    0 below 3 values or without spread."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 3:
        return 0.0
    dev = arr - arr.mean()
    denominator = float(np.dot(dev, dev))
    return float(np.dot(dev[:-1], dev[1:])) / denominator if denominator > 0 else 0.0


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


def t_quantile(df: float) -> float:
    """Two-sided 95% Student-t quantile for `df` degrees of freedom (fractional allowed)."""
    from scipy.stats import t

    return float(t.ppf(1 - (1 - CONFIDENCE) / 2, df))


def t_interval(values: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Student-t interval of the mean; (nan, nan) below 2 values."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        return NAN_INTERVAL
    centre = float(arr.mean())
    half = t_quantile(arr.size - 1) * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    return centre - half, centre + half


def overlapping_batch_means_interval(values: Sequence[float] | np.ndarray, batch: int) -> tuple[float, float]:
    """Student-t interval of the mean of a correlated series of `values` (equal weights),
    by overlapping batch means (Meketon and Schmeiser 1984): the variance of the mean from
    every run of `batch` consecutive values, n b / ((n - b + 1)(n - b)) x sum of (batch mean
    - mean)^2, over n; degrees of freedom 1.5 (n / b - 1), half again as many as the n / b
    disjoint batches give from the same values. (nan, nan) below two batches' worth."""
    arr = np.asarray(values, dtype=float)
    n = arr.size
    if batch < 1 or n < 2 * batch:
        return NAN_INTERVAL
    centre = float(arr.mean())
    sums = np.concatenate([[0.0], np.cumsum(arr)])
    means = (sums[batch:] - sums[:-batch]) / batch
    variance = n * batch / ((n - batch + 1) * (n - batch)) * float(np.sum((means - centre) ** 2))
    half = t_quantile(1.5 * (n / batch - 1)) * math.sqrt(variance / n)
    return centre - half, centre + half


def quantile_interval(values: Sequence[float] | np.ndarray, q: float) -> tuple[float, float]:
    """Distribution-free 95% interval of the q-th percentile: the order statistics
    x_(l) and x_(u) (1-based) with l = binom.ppf(0.025; n, q/100) and u =
    binom.ppf(0.975; n, q/100) + 1, so that P(x_(l) <= quantile <= x_(u)) >= 95% for
    any continuous distribution. A side whose order statistic does not exist (too few
    values for that tail) is NaN, and then the interval is unknown."""
    arr = np.sort(np.asarray(values, dtype=float))
    n = arr.size
    if n < 2:
        return NAN_INTERVAL
    from scipy.stats import binom

    p = min(max(q / 100.0, 0.0), 1.0)
    alpha = 1 - CONFIDENCE
    lower = int(binom.ppf(alpha / 2, n, p))  # 1-based rank of the lower bound
    upper = int(binom.ppf(1 - alpha / 2, n, p)) + 1
    lo = float(arr[lower - 1]) if lower >= 1 else math.nan
    hi = float(arr[upper - 1]) if upper <= n else math.nan
    return lo, hi


def _resamples(n: int) -> int:
    return max(200, min(BOOTSTRAP_RESAMPLES, _BOOTSTRAP_BUDGET // max(n, 1)))


def bootstrap_ci(
    samples: Sequence[Sequence[float] | np.ndarray],
    statistic: Callable[..., np.ndarray],
) -> tuple[float, float]:
    """Paired percentile-bootstrap interval (`scipy.stats.bootstrap`, seeded) of
    `statistic(*arrays, axis=-1)` over items: every array in `samples` is resampled with
    the same indices. Fewer than 2 items, or a degenerate resample: (nan, nan)."""
    arrays = tuple(np.asarray(s, dtype=float) for s in samples)
    n = arrays[0].size
    if n < 2 or any(a.size != n for a in arrays):
        return NAN_INTERVAL
    from scipy.stats import bootstrap

    with np.errstate(divide="ignore", invalid="ignore"):
        result = bootstrap(
            arrays,
            statistic,
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=_resamples(n),
            confidence_level=CONFIDENCE,
            random_state=np.random.default_rng(BOOTSTRAP_SEED),
        )
    lo, hi = float(result.confidence_interval.low), float(result.confidence_interval.high)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else NAN_INTERVAL


def _ratio_of_sums(num: np.ndarray, den: np.ndarray, axis: int = -1) -> np.ndarray:
    return num.sum(axis=axis) / den.sum(axis=axis)


def bootstrap_ratio_ci(
    numerators: Sequence[float] | np.ndarray, denominators: Sequence[float] | np.ndarray
) -> tuple[float, float]:
    """Interval of sum(num) / sum(den) under a paired bootstrap over items."""
    return bootstrap_ci((numerators, denominators), _ratio_of_sums)


def half_width(interval: tuple[float, float]) -> float | None:
    """Half the width of an interval; None when it is unknown (NaN)."""
    lo, hi = interval
    if math.isnan(lo) or math.isnan(hi):
        return None
    return (hi - lo) / 2
