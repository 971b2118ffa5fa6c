"""Paired comparison of two configurations over the same requests (pure).

Every launch of a study sends the same requests in the same order, and most of what makes
one request faster than another (its prompt, its place in a launch while NGRAM's cache
learns) repeats in every launch. Measured on SGLang 0.5.16 / H200: launches of one
configuration agreed within 1-2% while each launch's own interval over its requests said
+-5-11%. Compared request by request, that repeating part cancels.

For configurations A and B, each with one or more launches whose per-position figures are
keyed by request (C = 1) or wave (C > 1) id (`autospec.metrics.series`):

    per id, the mean log figure over the launches of each configuration holding it;
    d_i = that of A minus that of B, over the ids both hold (the *matched* ids; an id only
    one side holds, a lost or failed request or one past the other's count, is dropped and
    counted); ratio = exp(mean d_i)
    var = e^2 sum_i (1 / nA_i + 1 / nB_i) / n^2  +  tau^2 (1 / nA + 1 / nB)

where n is the number of matched ids, nA_i and nB_i the launches holding id i, nA and nB
the launches. Two parts, both measured from the study's relaunches (`launch_spread`, pooled
over every configuration launched more than once):

- e, the per-request (per-wave) noise that does not repeat between launches: the residual
  of a configuration's launches x ids table of log figures once each launch's mean and each
  id's mean are taken out. What a prompt or a position does repeats in every launch and is
  not noise for a ratio over this stream, however much it differs between requests, nor is
  how differently two configurations treat one prompt. Before relaunches measured e (fewer
  than `MIN_NOISE_DF` degrees of freedom), sd(d)^2 / n stands in for the first part, which
  holds both and is the larger.
- tau, the launch's own shift (the spread of a launch's mean log figure over shared ids, s,
  less what e puts into such a mean: tau^2 = s^2 - e^2 / ids), shrunk towards `PRIOR_SD`
  worth `PRIOR_DF` degrees of freedom (before relaunches measured it, the prior decides).
  Relaunches outside the study can measure tau too (`SpreadHistory`: the storage's other
  studies on the same hardware and target, `autospec.records.history`); they add their
  degrees of freedom, so a study that launches each configuration once is not left to the
  prior where earlier studies measured the spread. Per-request noise e is never taken from
  them: it belongs to this study's request stream.

The 95% interval is exp(mean d +- t q), q = sqrt(var), with t from Student's distribution at
the Welch-Satterthwaite degrees of freedom of the two parts. The spread s is the floor: over
the ids it was measured on, var is s^2 (1 / nA + 1 / nB); no pairing shrinks that, it only
stops adding the per-request spread to it.

Where a side has no per-position figures (studies measured before them), `unpaired_ratio`
compares the two pooled figures as before (their 95% half-widths, which hold the
per-request spread, combined on the log scale) and says so (`paired` False). A comparison
that rests on a launch whose rate never settled (`autospec.metrics.warmup`) is reported but
never *separated*: it does not decide.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scipy import stats as _stats

__all__ = [
    "MIN_MATCHED",
    "MIN_NOISE_DF",
    "PRIOR_DF",
    "PRIOR_SD",
    "Comparison",
    "LogSpread",
    "Side",
    "SpreadHistory",
    "across_machines",
    "compare",
    "launch_spread",
    "paired_ratio",
    "unpaired_ratio",
    "with_history",
]

Series = Mapping[str, float]

_Z95 = 1.959963984540054
#: the between-launch sd of a launch's log figure over shared requests before relaunches
#: measured it: SGLang 0.5.16 on one H200 showed 0.9% (C=1) and 1.9% (C=32) over three
#: launches, and 2.0% at C=1 over four launches of another configuration (issue 37)
PRIOR_SD = 0.02
PRIOR_DF = 4  # the prior's weight in degrees of freedom
#: fewer matched ids than this: no paired comparison (the unpaired fallback instead): the sd of
#: the differences is barely known (a quick start's C=32 level on the simulator measures 2
#: waves; paired over them, t(1) = 12.7 made the interval 0.37-3.2 where the unpaired one said +-7%)
MIN_MATCHED = 4
#: fewer degrees of freedom than this behind the per-request noise e: sd(d)^2 / n instead
MIN_NOISE_DF = 8


@dataclass(frozen=True)
class SpreadHistory:
    """tau (`LogSpread.launch_sd`) as relaunches outside the study measured it: `sd` over `df`
    degrees of freedom, pooled over `studies` studies (`pooled`)."""

    sd: float
    df: int
    studies: int

    @classmethod
    def pooled(cls, spreads: Sequence[LogSpread]) -> SpreadHistory | None:
        """Each spread's tau weighted by its degrees of freedom; None where none has any."""
        measured = [s for s in spreads if s.df > 0]
        df = sum(s.df for s in measured)
        if df == 0:
            return None
        return cls(math.sqrt(sum(s.df * s.launch_sd() ** 2 for s in measured) / df), df, len(measured))


@dataclass(frozen=True)
class LogSpread:
    """What relaunches measured, pooled over the `configurations` launched more than once:
    `sd`, the sd of a launch's mean log figure over the ids its configuration's launches
    share (`df` = sum of L - 1), those means over `ids` shared ids (harmonic mean), and
    `noise_sd`, the per-id noise that does not repeat between launches (`noise_df` = sum of
    (L - 1)(ids - 1); None where no configuration's launches shared MIN_MATCHED ids), and
    `history`, tau as relaunches outside the study measured it (`with_history`; df 0 and no
    configurations where only they did)."""

    sd: float
    df: int
    configurations: int
    noise_sd: float | None = None
    noise_df: int = 0
    ids: float = 0.0
    history: SpreadHistory | None = None

    def launch_sd(self) -> float:
        """tau: a launch's own shift, `sd` less what the noise puts into a mean over `ids`."""
        if self.noise_sd is None or self.ids <= 0:
            return self.sd
        return math.sqrt(max(0.0, self.sd**2 - self.noise_sd**2 / self.ids))

    def shrunk(self) -> tuple[float, int]:
        """(tau, degrees of freedom) the intervals use: `launch_sd` and the history's tau, each
        weighted by its degrees of freedom, shrunk towards PRIOR_SD."""
        past = self.history or SpreadHistory(0.0, 0, 0)
        df = self.df + past.df + PRIOR_DF
        return math.sqrt((PRIOR_DF * PRIOR_SD**2 + past.df * past.sd**2 + self.df * self.launch_sd() ** 2) / df), df


def with_history(spread: LogSpread | None, history: SpreadHistory | None) -> LogSpread | None:
    """`spread` with `history` folded in (a spread of no df of its own where the study has none)."""
    if history is None:
        return spread
    return LogSpread(0.0, 0, 0, history=history) if spread is None else replace(spread, history=history)


def _prior_or(spread: LogSpread | None) -> tuple[float, int]:
    return (PRIOR_SD, PRIOR_DF) if spread is None else spread.shrunk()


def _logs(series: Series) -> dict[str, float]:
    return {k: math.log(v) for k, v in series.items() if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)}


def _residual_ss(launches: Sequence[Mapping[str, float]], ids: Sequence[str]) -> float:
    """The launches x ids table's sum of squares left once launch and id means are out."""
    table = [[logs[k] for k in ids] for logs in launches]
    rows = [statistics.fmean(row) for row in table]
    cols = [statistics.fmean(col) for col in zip(*table, strict=True)]
    grand = statistics.fmean(rows)
    return sum((x - r - c + grand) ** 2 for row, r in zip(table, rows, strict=True) for x, c in zip(row, cols, strict=True))


def launch_spread(groups: Sequence[Sequence[Series]]) -> LogSpread | None:
    """Pool what relaunches show over `groups` (per configuration, its launches' series):
    each launch's mean log figure over the ids every launch of its configuration holds
    (over all its own ids where they share fewer than MIN_MATCHED), and the noise in the
    table of those shared ids; None when no configuration has two launches with figures."""
    weighted, df, used = 0.0, 0, 0
    noise_ss, noise_df, shared_df, inverse_ids = 0.0, 0, 0, 0.0
    for group in groups:
        launches = [logs for logs in (_logs(s) for s in group) if logs]
        if len(launches) < 2:
            continue
        common = sorted(set.intersection(*(set(logs) for logs in launches)))
        shared = len(common) >= MIN_MATCHED
        means = [statistics.fmean(logs[k] for k in common) if shared else statistics.fmean(logs.values()) for logs in launches]
        weighted += (len(means) - 1) * statistics.variance(means)
        df += len(means) - 1
        used += 1
        if shared:
            noise_ss += _residual_ss(launches, common)
            noise_df += (len(launches) - 1) * (len(common) - 1)
            shared_df += len(launches) - 1
            inverse_ids += (len(launches) - 1) / len(common)
    if df == 0:
        return None
    noise = math.sqrt(noise_ss / noise_df) if noise_df else None
    return LogSpread(math.sqrt(weighted / df), df, used, noise, noise_df, shared_df / inverse_ids if noise_df else 0.0)


@dataclass(frozen=True)
class Comparison:
    """A over B: `ratio` with its 95% interval [`lo`, `hi`], over `matched` ids (requests or
    waves, `unit`) with `dropped` ids left out, from `launches` = (nA, nB); `paired` False
    for the unpaired fallback (its `unit` "figures" where a side had no per-position figures,
    else the too few ids that matched); `unsettled` launches behind it whose rate never settled."""

    ratio: float
    lo: float
    hi: float
    matched: int
    dropped: int
    launches: tuple[int, int]
    paired: bool
    unit: str = "requests"
    unsettled: int = 0
    machines: int = 1  # machines whose paired comparisons it combines (`across_machines`)
    factors: int = 0  # machine factors it went through (`autospec.records.machines.through_factor`)
    #: its sides ran on two machines no control joins, so the machines' difference is in it
    unjoined: bool = False

    @property
    def separated(self) -> bool:
        """The interval excludes 1, every launch behind it settled, and no machine difference
        is left in it (`unjoined`)."""
        return self.unsettled == 0 and not self.unjoined and (self.lo > 1.0 or self.hi < 1.0)

    @property
    def half(self) -> float:
        """The interval's larger distance from the ratio (for sentences: x1.05 +-0.03)."""
        return max(self.ratio - self.lo, self.hi - self.ratio)

    def inverse(self) -> Comparison:
        """B over A."""
        return replace(self, ratio=1 / self.ratio, lo=1 / self.hi, hi=1 / self.lo, launches=self.launches[::-1])

    def as_dict(self) -> dict[str, Any]:
        return {
            "ratio": self.ratio,
            "lo": self.lo,
            "hi": self.hi,
            "separated": self.separated,
            "paired": self.paired,
            "matched": self.matched,
            "unit": self.unit,
            "dropped": self.dropped,
            "launches": list(self.launches),
            "unsettled": self.unsettled,
            "machines": self.machines,
            "factors": self.factors,
            "unjoined": self.unjoined,
        }


def _per_id(launches: Sequence[Series]) -> tuple[dict[str, float], dict[str, int]]:
    """Per id, the mean log figure over the launches holding it, and how many hold it."""
    sums: dict[str, list[float]] = {}
    for series in launches:
        for k, v in _logs(series).items():
            sums.setdefault(k, []).append(v)
    return {k: statistics.fmean(v) for k, v in sums.items()}, {k: len(v) for k, v in sums.items()}


def paired_ratio(
    a: Sequence[Series], b: Sequence[Series], spread: LogSpread | None, *, unit: str = "requests", unsettled: int = 0
) -> Comparison | None:
    """A over B from matched ids (module docstring); None when fewer than MIN_MATCHED ids match
    or a side has no launch with figures."""
    la, lb = [s for s in a if s], [s for s in b if s]
    if not la or not lb:
        return None
    (ma, na), (mb, nb) = _per_id(la), _per_id(lb)
    matched = sorted(set(ma) & set(mb))
    if len(matched) < MIN_MATCHED:
        return None
    d = [ma[k] - mb[k] for k in matched]
    n = len(d)
    if spread is not None and spread.noise_sd is not None and spread.noise_df >= MIN_NOISE_DF:
        within = spread.noise_sd**2 * sum(1 / na[k] + 1 / nb[k] for k in matched) / n**2
        df_within = spread.noise_df
    else:
        within, df_within = statistics.variance(d) / n, n - 1
    sd, df_between = _prior_or(spread)
    between = sd**2 * (1 / len(la) + 1 / len(lb))
    total = within + between
    parts = within**2 / df_within + between**2 / df_between
    df = total**2 / parts if parts > 0 else math.inf
    t = float(_stats.t.ppf(0.975, df)) if math.isfinite(df) else _Z95
    centre = statistics.fmean(d)
    q = t * math.sqrt(total)
    dropped = len(set(ma) ^ set(mb))
    return Comparison(
        math.exp(centre), math.exp(centre - q), math.exp(centre + q), n, dropped, (len(la), len(lb)), True, unit, unsettled
    )


def unpaired_ratio(
    a: float, a_half: float | None, b: float, b_half: float | None, launches: tuple[int, int] = (1, 1), *, unsettled: int = 0
) -> Comparison | None:
    """A over B from two pooled figures and their 95% half-widths (None: exact), on the log
    scale; None where a figure is not positive."""
    if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
        return None
    rel = math.hypot((a_half or 0.0) / a, (b_half or 0.0) / b)  # 95% half-widths, relative
    centre = math.log(a / b)
    return Comparison(
        math.exp(centre), math.exp(centre - rel), math.exp(centre + rel), 0, 0, launches, False, "figures", unsettled
    )


@dataclass(frozen=True)
class Side:
    """One configuration in a comparison: its pooled figure with its 95% half-width (None:
    exact) over `launches`, each launch's per-position figures (`series`; empty where a launch
    has none), how many of its launches never settled, and what the series' ids name."""

    value: float
    half: float | None
    launches: int
    series: tuple[Series, ...] = ()
    unsettled: int = 0
    unit: str = "requests"  # what the series' ids name: "requests" or "waves"


def compare(a: Side, b: Side, spread: LogSpread | None) -> Comparison | None:
    """A over B: paired over matched ids where both sides have per-position figures, else
    the unpaired fallback (module docstring); None when neither can be formed."""
    unsettled = a.unsettled + b.unsettled
    paired = paired_ratio(a.series, b.series, spread, unit=a.unit, unsettled=unsettled)
    if paired is not None:
        return paired
    found = unpaired_ratio(a.value, a.half, b.value, b.half, (a.launches, b.launches), unsettled=unsettled)
    if found is None or not any(a.series) or not any(b.series):
        return found
    # both have per-position figures, but too few match: say how many, in their unit
    matched = len(set(_per_id([s for s in a.series if s])[0]) & set(_per_id([s for s in b.series if s])[0]))
    return replace(found, matched=matched, unit=a.unit)


def across_machines(
    home: Comparison | None, away_a: Mapping[str, Side], away_b: Mapping[str, Side], spread: LogSpread | None
) -> Comparison | None:
    """`home` (A over B on the machine both were measured on) combined with their paired
    comparison on every other machine both ran on (`away_a`, `away_b`: machine -> that side).
    A machine moves both configurations alike (SGLang 0.5.16 on two H100s: 6/1/7 and 6/2/7 both
    x0.95 at C=32), so each machine's paired ratio estimates the same ratio, its own launches
    apart: the log ratios are weighted by their inverse squared 95% half-widths, and the half
    is 1 / sqrt(sum of weights). Every part uses the same spread, so the same t, which the
    combination keeps. Only paired comparisons combine; `home` is returned as it is otherwise."""
    if home is None or not home.paired:
        return home
    parts = [home]
    for machine in sorted(away_a.keys() & away_b.keys()):
        found = compare(away_a[machine], away_b[machine], spread)
        if found is not None and found.paired and found.unit == home.unit:
            parts.append(found)
    if len(parts) == 1:
        return home
    logs = [(math.log(c.ratio), (math.log(c.hi) - math.log(c.lo)) / 2) for c in parts]
    weights = [1 / half**2 if half > 0 else math.inf for _, half in logs]
    if any(math.isinf(w) for w in weights):
        return home
    centre = sum(w * x for w, (x, _) in zip(weights, logs, strict=True)) / sum(weights)
    q = 1 / math.sqrt(sum(weights))
    return Comparison(
        math.exp(centre),
        math.exp(centre - q),
        math.exp(centre + q),
        sum(c.matched for c in parts),
        sum(c.dropped for c in parts),
        (sum(c.launches[0] for c in parts), sum(c.launches[1] for c in parts)),
        True,
        home.unit,
        sum(c.unsettled for c in parts),
        len(parts),
    )
