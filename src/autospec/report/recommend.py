"""Three recommendations from the front, each with one sentence saying why (pure).

- latency: the best low-concurrency objective (normally C=1 tok/s) among front
  configurations that are not worse than the baseline on the high-concurrency objective
  (normally C=32 aggregate tok/s). "Not worse" allows for noise: the configuration's
  value plus the combined half-widths of both 95% intervals reaches the baseline's.
  Without a baseline, the best low-concurrency configuration.
- throughput: the best high-concurrency objective.

  For both, the pick is the best pooled value (the best estimate from every launch of
  each configuration); configurations within TIE_MARGIN (1%) of it count as equal and the
  other objective decides among them: a 0.1% edge at C=1 does not outweigh a clear gain
  at C=32. Configurations whose difference from the pick is within the combined
  half-widths of the two 95% intervals (which include the between-launch spread once
  relaunches measured it) are named as ties but do not decide: wide intervals say the
  order is uncertain, not that a worse estimate is as good (letting them decide made
  the picks of simulated studies with confirmation launches worse:
  docs/validation/2026-12-01-sim-optimum-gap-every-profile.md). Where both have per-request
  figures, "tied" means the paired ratio's 95% interval holds 1 (`StudyData.compare`,
  `autospec.metrics.paired`).
- knee: the balanced choice: the configuration whose worst objective, as a share of the
  best value on the front, is highest (max-min of normalised objectives).

The latency and throughput picks then say what they rest on (`autospec.report.support`):
how many launches, whether their interval separates them from the runner-up, and
where their launches disagree beyond their own intervals.

The low- and high-concurrency objectives are the ones measured at the lowest and highest
concurrency (`StudyData.latency_objective` / `throughput_objective`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from autospec.report.data import Measure, Objective, StudyData, TrialView
from autospec.report.support import rivals, support_note, versus_json
from autospec.report.table import describe, fmt_ratio, ratio

__all__ = ["Pick", "recommend", "PICKS", "share_of_best", "best_speculative"]

PICKS = ("latency", "throughput", "knee")
TIE_MARGIN = 0.01  # relative: values this close to the best are practically equal


@dataclass(frozen=True)
class Pick:
    """`trial` (a configuration of the front: a reference point too) picked as `name`;
    `objective`: the objective it was chosen on (None: the knee); `tied_with`: the measured
    configurations tied with it there, off the front too (named, not deciding: module docstring)."""

    name: str  # "latency" | "throughput" | "knee"
    trial: TrialView
    why: str
    objective: int | None = None
    tied_with: tuple[int, ...] = ()
    versus: dict[str, Any] | None = None  # the paired ratio to the runner-up (`support.versus_json`)


def best_speculative(data: StudyData, i: int) -> TrialView | None:
    """The best measured configuration on objective `i` that speculates: no reference point
    (they are SGLang's own choices), the configuration a reference pick is compared with."""
    tuned = [t for t in data.measured if t.reference is None]
    return max(tuned, key=lambda t: (_score(t, data, i), -t.number)) if tuned else None


def _reference_note(data: StudyData, t: TrialView, i: int) -> str:
    """For a reference point picked on objective `i`: the best speculative configuration's
    ratio to it there (one `ratio` call: the comparison a paired statistic can replace)."""
    if t.reference is None:
        return ""
    other = best_speculative(data, i)
    if other is None:
        return f" It is the reference point {t.reference}: nothing tuned was measured to compare it with."
    r = ratio(_value(other, data, i), _value(t, data, i))
    return (
        f" It is the reference point {t.reference}: the best tuned configuration, trial {other.number} "
        f"({describe(other)}), reads {fmt_ratio(r)} of it at {_where(data.objectives[i])}."
    )


def _value(t: TrialView, data: StudyData, i: int) -> Measure:
    m = t.objective_measure(data.objectives[i], i)
    return m if m is not None else Measure(t.value(i))


def _fmt(m: Measure, o: Objective) -> str:
    unit = f" {o.unit}" if o.unit else ""
    hw = f" +-{m.half_width:.1f}" if m.half_width is not None else ""
    return f"{m.value:.1f}{hw}{unit}"


def _where(o: Objective) -> str:
    return f"C={o.concurrency}" if o.concurrency is not None else o.name


def _not_worse(a: Measure, b: Measure, o: Objective) -> bool:
    slack = math.hypot(a.half_width or 0.0, b.half_width or 0.0)
    return a.value + slack >= b.value if o.maximize else a.value - slack <= b.value


def _score(t: TrialView, data: StudyData, i: int) -> float:
    """Larger is better, whatever the objective's direction."""
    v = _value(t, data, i).value
    return v if data.objectives[i].maximize else -v


def _tied(a: Measure, b: Measure, intervals: bool = True) -> bool:
    """`a` and `b` are equal as far as can be told: within TIE_MARGIN of each other, or
    (`intervals`) their difference within the combined half-widths of their 95% intervals."""
    slack = abs(b.value) * TIE_MARGIN
    if intervals:
        slack = max(slack, math.hypot(a.half_width or 0.0, b.half_width or 0.0))
    return abs(a.value - b.value) <= slack


def _best(trials: list[TrialView], data: StudyData, i: int, then: int | None = None) -> tuple[TrialView, list[TrialView]]:
    """The best trial on objective `i`; among those within TIE_MARGIN of it, the best on
    objective `then`. Also returns the trials tied with the chosen one within their
    intervals (the chosen one included): named, not deciding (module docstring)."""
    top = max(trials, key=lambda t: (_score(t, data, i), -t.number))
    chosen = top
    if then is not None and then != i:
        equal = [t for t in trials if _tied(_value(t, data, i), _value(top, data, i), intervals=False)]
        chosen = max(equal, key=lambda t: (_score(t, data, then), _score(t, data, i), -t.number))
    return chosen, _tied_set(data, chosen, i)


def _tied_set(data: StudyData, chosen: TrialView, i: int) -> list[TrialView]:
    """`chosen` and every rival (`support.rivals`) tied with it on objective `i`: off the
    front too, as the runner-up `support.runner_up` names may be."""
    return [chosen, *(t for t in rivals(data, chosen, i) if _tied_with(data, t, chosen, i))]


def _tied_with(data: StudyData, t: TrialView, chosen: TrialView, i: int) -> bool:
    """`t` cannot be told apart from `chosen` on objective `i`: within TIE_MARGIN, or the
    paired ratio's 95% interval holds 1 (`StudyData.compare`), or, unpaired (no per-request
    figures), their difference is within the combined half-widths."""
    a, b = _value(t, data, i), _value(chosen, data, i)
    if _tied(a, b, intervals=False):
        return True
    c = data.compare(t, chosen, i)
    return not c.separated if c is not None and c.paired else _tied(a, b)


def _others(tied: list[TrialView], chosen: TrialView) -> tuple[int, ...]:
    return tuple(sorted(t.number for t in tied if t is not chosen))


def _lead(tied: list[TrialView], data: StudyData, i: int, superlative: str) -> str:
    """'fastest at C=1', or 'practically fastest at C=1' when others tie with it."""
    return f"{'' if len(tied) < 2 else 'practically '}{superlative} at {_where(data.objectives[i])}"


def _tie_note(tied: list[TrialView], chosen: TrialView, data: StudyData, i: int, j: int) -> str:
    if len(tied) < 2:
        return ""
    others = ", ".join(str(t.number) for t in sorted(tied, key=lambda t: t.number) if t is not chosen)
    within = [t for t in tied if t is not chosen and _tied(_value(t, data, i), _value(chosen, data, i), intervals=False)]
    decided = f"; among those within {TIE_MARGIN:.0%} it is the best at {_where(data.objectives[j])}" if within else ""
    return (
        f"; tied at {_where(data.objectives[i])} with trial(s) {others} (differences within their 95% "
        f"intervals or {TIE_MARGIN:.0%}){decided}"
    )


def share_of_best(data: StudyData, t: TrialView, front: list[TrialView]) -> list[float]:
    """Each objective of `t` as a share of the best value on `front` (1.0 = the best)."""
    shares = []
    for i, o in enumerate(data.objectives):
        values = [_value(f, data, i).value for f in front]
        best = max(values) if o.maximize else min(values)
        v = _value(t, data, i).value
        if o.maximize:
            shares.append(v / best if best > 0 else 0.0)
        else:
            shares.append(best / v if v > 0 else 0.0)
    return shares


def _ratio_text(a: Measure, b: Measure) -> str:
    """'x1.12 +-0.02', with ', within noise' when the interval includes 1."""
    r = ratio(a, b)
    if r is None:
        return "-"
    noise = r.half_width is not None and abs(r.value - 1.0) <= r.half_width
    return fmt_ratio(r) + " vs the baseline" + (", within noise" if noise else "")


def recommend(data: StudyData, baseline: TrialView | None = None) -> dict[str, Pick]:
    """The three picks by name; empty when nothing is on the front."""
    if not data.front:
        return {}
    return {
        "latency": _latency_pick(data, baseline),
        "throughput": _throughput_pick(data, baseline),
        "knee": _knee_pick(data),
    }


def _latency_pick(data: StudyData, baseline: TrialView | None) -> Pick:
    """The fastest front configuration at the latency objective; with a baseline, among
    those not worse than it at the throughput objective where any is."""
    front = data.front
    lat, thr = data.latency_objective, data.throughput_objective
    ol, ot = data.objectives[lat], data.objectives[thr]
    if baseline is not None and lat != thr:
        base_t = _value(baseline, data, thr)
        eligible = [t for t in front if _not_worse(_value(t, data, thr), base_t, ot)]
    else:
        eligible = []
    if eligible and baseline is not None:
        t, tied = _best(eligible, data, lat, thr)
        a_l, a_t = _value(t, data, lat), _value(t, data, thr)
        b_l = _value(baseline, data, lat)
        why = (
            f"{_lead(tied, data, lat, 'fastest')} ({_fmt(a_l, ol)}, {_ratio_text(a_l, b_l)}) among "
            f"configurations not worse than the baseline at {_where(ot)} ({_fmt(a_t, ot)} vs {_fmt(base_t, ot)})"
            f"{_tie_note(tied, t, data, lat, thr)}."
        )
    else:
        t, tied = _best(front, data, lat, thr)
        a_l = _value(t, data, lat)
        if baseline is None or lat == thr:
            why = f"{_lead(tied, data, lat, 'fastest')}: {_fmt(a_l, ol)}{_tie_note(tied, t, data, lat, thr)}."
        else:
            why = (
                f"{_lead(tied, data, lat, 'fastest')} ({_fmt(a_l, ol)}); no front configuration matches the baseline at "
                f"{_where(ot)}, so this one costs throughput there ({_fmt(_value(t, data, thr), ot)} vs "
                f"{_fmt(_value(baseline, data, thr), ot)})."
            )
    return Pick(
        "latency",
        t,
        f"trial {t.number} ({describe(t)}) is {why}{support_note(data, t, lat)}{_reference_note(data, t, lat)}",
        lat,
        _others(tied, t),
        versus_json(data, t, lat),
    )


def _throughput_pick(data: StudyData, baseline: TrialView | None) -> Pick:
    """The front configuration with the highest figure at the throughput objective."""
    lat, thr = data.latency_objective, data.throughput_objective
    ol, ot = data.objectives[lat], data.objectives[thr]
    t, tied = _best(data.front, data, thr, lat)
    a_t, a_l = _value(t, data, thr), _value(t, data, lat)
    lead = f"the {'' if len(tied) < 2 else 'practically '}highest {ot.what}"
    extra = _tie_note(tied, t, data, thr, lat)
    extra += f"; at {_where(ol)} it gives {_fmt(a_l, ol)}" if lat != thr else ""
    if baseline is not None:
        extra += f"; at {_where(ot)} {_ratio_text(a_t, _value(baseline, data, thr))}"
    return Pick(
        "throughput",
        t,
        f"trial {t.number} ({describe(t)}) has {lead}: {_fmt(a_t, ot)}{extra}.{support_note(data, t, thr)}"
        f"{_reference_note(data, t, thr)}",
        thr,
        _others(tied, t),
        versus_json(data, t, thr),
    )


def _knee_pick(data: StudyData) -> Pick:
    """The knee: the front configuration whose worst share of the best value over the
    objectives is highest (the lowest trial number among equals)."""
    front = data.front
    scored = [(min(share_of_best(data, t, front)), t) for t in front]
    best_score = max(s for s, _ in scored)
    t = min((t for s, t in scored if s == best_score), key=lambda t: t.number)
    shares = share_of_best(data, t, front)
    parts = ", ".join(f"{s:.0%} at {_where(o)}" for s, o in zip(shares, data.objectives))
    return Pick(
        "knee",
        t,
        f"trial {t.number} ({describe(t)}) is the balanced choice: it keeps at least "
        f"{min(shares):.0%} of the best value on every objective ({parts}).",
    )
