"""When a level's rate has settled: MSER truncation over its first requests (pure).

A new server is slow at first (kernels compile for each new batch shape), and NGRAM's
n-gram cache learns from what the server generates, so its accept length climbs over a
launch (SGLang 0.5.16 / H200: 2.0-2.5 on the first C=1 requests, 3.0-3.4 by the 25th;
about 296 -> 430 tok/s). A fixed warm-up count is too short for one and too long for
another. The warm-up instead goes on while the per-request rate still trends.

MSER (the marginal standard error rule, White 1997): for a series x_1..x_n, the truncation
point d minimises sum((x_i - mean(x_d+1..n))^2 for i > d) / (n - d)^2, the squared standard
error of the mean of what is kept, over d <= n / 2. The series has *settled* when the cut
stops short of that bound and what it keeps shows no monotone trend (Kendall's tau against
the order, two-sided p >= `TREND_P`): a minimum at the bound, or a kept part that still
climbs, says the rate is still trending. `settled` asks that of the rates seen so far, once
there are `MIN_POINTS` of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _stats

__all__ = ["MIN_POINTS", "WarmupCut", "mser_cut", "settled"]

MIN_POINTS = 6  # fewer rates than this say nothing about a trend
TREND_P = 0.05  # a kept part whose trend test gives a smaller p still trends


@dataclass(frozen=True)
class WarmupCut:
    """`cut` values to drop from the front of a series of `n`; `settled` False where the
    cut reached its bound (n // 2): the series was still trending."""

    cut: int
    n: int
    settled: bool


def mser_cut(values: Sequence[float]) -> WarmupCut:
    """The MSER truncation point of `values` (module docstring); non-finite values are
    dropped first. Fewer than MIN_POINTS values: no cut, and not settled."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    n = int(x.size)
    if n < MIN_POINTS:
        return WarmupCut(0, n, False)
    bound = n // 2
    # tails' sums and sums of squares, for every d at once
    suffix = np.cumsum(x[::-1])[::-1]
    suffix_sq = np.cumsum((x * x)[::-1])[::-1]
    kept = n - np.arange(bound + 1)
    sums, squares = suffix[: bound + 1], suffix_sq[: bound + 1]
    stat = (squares - sums * sums / kept) / (kept * kept)
    cut = int(np.argmin(stat))
    kept_part = x[cut:]
    trend = _stats.kendalltau(np.arange(kept_part.size), kept_part).pvalue
    return WarmupCut(cut, n, cut < bound and not (np.isfinite(trend) and trend < TREND_P))


def settled(values: Sequence[float]) -> bool:
    """The rate of `values` (in the order they were measured) no longer trends."""
    return mser_cut(values).settled
