"""Between-launch variance: the same flags do not give the same server twice (pure).

Graph capture, memory layout and clocks differ from launch to launch, so a figure
measured on one launch scatters around the configuration's true value by more than the
launch's own interval says (measured on SGLang 0.5.16 / H200: NGRAM-4 at C=32 ranged
16,530-17,606 tok/s over three launches, each with a +-1-3% interval). Relaunches of the
same configuration (`autospec optimize --confirm K`) measure that scatter.

Model: launch i of a configuration reports x_i = mu * (1 + b_i) + e_i, with b_i the
launch's relative offset (standard deviation `cv`, the same for every configuration of a
study: a property of the server, not of the flags) and e_i the launch's measuring error
(standard error se_i = half-width / 1.96). Per configuration with L >= 2 launches, the
sample variance of the x_i estimates cv^2 mu^2 + mean(se_i^2); the excess over the
measuring error, relative to the mean squared, is pooled over configurations weighted by
their L - 1 degrees of freedom (negative excesses count as 0).

A configuration's value is then the mean of its launches, and its 95% half-width
combines the two parts in quadrature: t(df) * cv * mu / sqrt(L) (the spread, known to df
degrees of freedom) and 1.96 * sqrt(mean(se_i^2) / L) (the measuring error). With cv
unknown (no relaunches yet) only the measuring error counts, which is what a single
launch can say.

A spread measured from one or two relaunches is itself barely known (t(1) = 12.7), and
taken at face value it widens every configuration's interval many times over (seen on an
H200: one relaunch, cv 5.8%, made every C=1 interval +-74%). So the intervals use the
measured cv shrunk towards a prior, `autospec.metrics.paired.PRIOR_SD` worth its `PRIOR_DF`
degrees of freedom (the conjugate scaled-inverse-chi-square update: cv^2 = (df0 cv0^2 + df
cv^2) / (df0 + df), known to df0 + df degrees of freedom): the prior of the paired comparisons,
the same quantity, a launch's own shift, once every launch sends the same requests. Relaunches
of one configuration on one request stream spread by 0.9-2.0% (SGLang 0.5.16 on an H200 and an
H100, issue 37); the 5.8-7.3% above, and the 5% prior taken from them until 2026-12-07, were
measured before a study had one request stream. With many relaunches the data decide.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats as _stats

from autospec.metrics.paired import PRIOR_DF, PRIOR_SD

__all__ = ["LaunchFigure", "Spread", "Pooled", "between_launch_spread", "pool_launches"]

_Z95 = 1.959963984540054


@dataclass(frozen=True)
class LaunchFigure:
    """One launch's figure and the half-width of its 95% interval (None: unknown)."""

    value: float
    half: float | None = None

    @property
    def se(self) -> float:
        return 0.0 if self.half is None else self.half / _Z95


@dataclass(frozen=True)
class Spread:
    """The pooled relative between-launch standard deviation of one figure, from
    `configurations` configurations launched more than once (`df` = sum of L - 1)."""

    cv: float
    df: int
    configurations: int

    def shrunk(self) -> tuple[float, int]:
        """(cv, degrees of freedom) the intervals use: the measured cv shrunk towards
        `PRIOR_SD` (module docstring)."""
        df = self.df + PRIOR_DF
        return math.sqrt((PRIOR_DF * PRIOR_SD**2 + self.df * self.cv**2) / df), df


@dataclass(frozen=True)
class Pooled:
    """A configuration's figure over its launches."""

    value: float
    half: float | None  # 95% half-width (None: no interval known)
    launches: int
    within_half: float | None  # the measuring error's share of the half-width, alone
    between_half: float | None  # the between-launch share alone (None: cv unknown)

    @property
    def between_dominates(self) -> bool:
        """Launch-to-launch scatter is larger than the error of measuring one launch."""
        return self.between_half is not None and self.between_half > (self.within_half or 0.0)


def between_launch_spread(groups: Sequence[Sequence[LaunchFigure]]) -> Spread | None:
    """Pool the relative between-launch variance over `groups` (one per configuration,
    its launches' figures); None when no configuration has two usable launches."""
    weighted, df, used = 0.0, 0, 0
    for launches in groups:
        values = [f.value for f in launches if math.isfinite(f.value)]
        if len(values) < 2:
            continue
        mean = statistics.fmean(values)
        if mean == 0:
            continue
        sample = statistics.variance(values)
        measuring = statistics.fmean(f.se**2 for f in launches if math.isfinite(f.value))
        excess = max(sample - measuring, 0.0) / mean**2
        weighted += (len(values) - 1) * excess
        df += len(values) - 1
        used += 1
    if df == 0:
        return None
    return Spread(math.sqrt(weighted / df), df, used)


def pool_launches(launches: Sequence[LaunchFigure], spread: Spread | None) -> Pooled:
    """The mean of a configuration's launches with its interval (module docstring)."""
    finite = [f for f in launches if math.isfinite(f.value)]
    if not finite:
        return Pooled(math.nan, None, 0, None, None)
    n = len(finite)
    mean = statistics.fmean(f.value for f in finite)
    known = all(f.half is not None for f in finite)
    within_var = statistics.fmean(f.se**2 for f in finite) / n
    within = _Z95 * math.sqrt(within_var) if known else None
    if spread is None:
        return Pooled(mean, within, n, within, None)
    cv, df = spread.shrunk()
    between = float(_stats.t.ppf(0.975, df)) * cv * abs(mean) / math.sqrt(n)
    return Pooled(mean, math.hypot(between, within or 0.0), n, within, between)
