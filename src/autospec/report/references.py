"""The picks' gains over the reference points measured in the same study (pure).

A study that measured its reference points (`autospec optimize --references`: no
speculation, SGLang's defaults for the algorithm, ``--speculative-adaptive``) answers
"does tuning beat what SGLang does on its own?" here. For every pick (`recommend`) and
every measured reference (`StudyData.references`), per objective:

    gain = pick value / reference value, +- r * sqrt((h_p/p)^2 + (h_r/r)^2)

the 95% half-widths h of the two figures propagated to first order (`table.ratio`, as the
table's ratios to a baseline; the two launches are independent measurements). Where both
launches have per-position figures the gain is instead the paired ratio over the requests
(or waves) both measured (`StudyData.compare`, `autospec.metrics.paired`: the prompts'
own spread cancels, the between-launch spread stays), its +- the larger side of that
interval (`Gain.comparison` holds it whole); the text marks the others ``(unpaired)``. A
gain whose interval holds 1 is "within noise"; otherwise "better" or "worse" by the
objective's direction (a gain above 1 on a minimised objective is worse). Without both
intervals the gain has no +- and no verdict beyond "no interval".

Each reference then gets one verdict over all the picks (`reference_verdict`): "beaten"
when every pick is better on some objective and worse on none, "unbeaten" when no pick is
better on any objective and some pick is worse on one (the tuned configurations do not
beat what SGLang does on its own: serve the reference), else "mixed".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autospec.metrics.paired import Comparison
from autospec.report.data import Measure, Objective, StudyData, TrialView
from autospec.report.recommend import Pick
from autospec.report.table import Ratio, fmt_measure, fmt_ratio, ratio

__all__ = [
    "Gain",
    "PickGains",
    "reference_gains",
    "reference_flags",
    "reference_verdict",
    "gains_lines",
    "gains_json",
    "GAINS_LEGEND",
]

NO_FLAGS = "no speculative flags"
GAINS_LEGEND = (
    "gain xR +-h: the pick's value / the reference's, with the half-width of its 95% interval: paired "
    "over the requests (or waves) both measured, as the picks' comparisons are; where they cannot pair, "
    "marked (unpaired), from both figures' intervals (first-order); better/worse by the objective's "
    "direction, within noise when the interval holds 1"
)


@dataclass(frozen=True)
class Gain:
    """One objective's gain of a pick over a reference."""

    objective: str
    ratio: Ratio | None
    verdict: str  # "better" | "worse" | "within noise" | "no interval" | "not measured"
    comparison: Comparison | None = None  # the paired ratio where both launches have per-request figures


@dataclass(frozen=True)
class PickGains:
    """The gains of the picks `picks` (one trial) over reference `reference`."""

    picks: tuple[str, ...]
    trial: int
    reference: str
    reference_trial: int
    gains: tuple[Gain, ...]


def _verdict(r: Ratio | None, o: Objective) -> str:
    if r is None:
        return "not measured"
    if r.half_width is None:
        return "no interval"
    if abs(r.value - 1.0) <= r.half_width:
        return "within noise"
    return "better" if (r.value > 1.0) == o.maximize else "worse"


def _gain(data: StudyData, pick: TrialView, ref: TrialView, i: int, unpaired: Ratio | None) -> Gain:
    """Objective `i`'s gain: paired where both have per-position figures, else `unpaired`."""
    o = data.objectives[i]
    c = data.compare(pick, ref, i)
    if c is None or not c.paired:
        return Gain(o.name, unpaired, _verdict(unpaired, o))
    r = Ratio(c.ratio, c.half)
    verdict = ("better" if (c.ratio > 1.0) == o.maximize else "worse") if c.separated else "within noise"
    return Gain(o.name, r, verdict, c)


def _measures(data: StudyData, t: TrialView) -> list[Measure | None]:
    return [t.objective_measure(o, i) for i, o in enumerate(data.objectives)]


def reference_gains(data: StudyData, picks: Mapping[str, Pick]) -> list[PickGains]:
    """Per measured reference, the gains of each picked trial (picks of one trial together)."""
    by_trial: dict[int, tuple[TrialView, list[str]]] = {}
    for name, pick in picks.items():
        by_trial.setdefault(pick.trial.number, (pick.trial, []))[1].append(name)
    out = []
    for ref in data.references:
        base = _measures(data, ref)
        for number, (t, names) in by_trial.items():
            if number == ref.number:
                continue  # the reference is that pick: no gain over itself
            gains = []
            for i, (a, b) in enumerate(zip(_measures(data, t), base)):
                gains.append(_gain(data, t, ref, i, ratio(a, b)))
            out.append(PickGains(tuple(names), number, str(ref.reference), ref.number, tuple(gains)))
    return out


def reference_verdict(gains: Sequence[PickGains]) -> str:
    """ "beaten", "unbeaten" or "mixed" for one reference's gains over every pick (module
    docstring); "mixed" without picks."""
    verdicts = [[g.verdict for g in pick.gains] for pick in gains]
    if not verdicts:
        return "mixed"
    if all("better" in v and "worse" not in v for v in verdicts):
        return "beaten"
    if not any("better" in v for v in verdicts) and any("worse" in v for v in verdicts):
        return "unbeaten"
    return "mixed"


def _verdict_line(name: str, flags: str, verdict: str) -> str | None:
    if verdict == "beaten":
        return f"    every pick beats {name} beyond the intervals on some objective and loses on none"
    if verdict == "unbeaten":
        serve = "serve without speculative decoding" if flags == NO_FLAGS else f"serve it ({flags})"
        return (
            f"    no pick beats {name} on any objective, and it beats some beyond the intervals: tuning did not pay "
            f"here; {serve}, or search other flags"
        )
    return None


def reference_flags(t: TrialView) -> str:
    """The speculative flags a reference was launched with, from its argv: e.g.
    '--speculative-algorithm NEXTN --speculative-adaptive', or 'no speculative flags'."""
    words = list(t.server_args or [])
    kept: list[str] = []
    for i, word in enumerate(words):
        if word.startswith("--speculative-"):
            kept.append(word)
            if i + 1 < len(words) and not words[i + 1].startswith("--"):
                kept.append(words[i + 1])
    return " ".join(kept) if kept else NO_FLAGS


def _gain_text(g: Gain) -> str:
    if g.ratio is None:
        return f"{g.objective} -"
    how = "" if g.comparison is not None or g.ratio.half_width is None else " (unpaired)"
    return f"{g.objective} {fmt_ratio(g.ratio)}{how} {g.verdict}"


def gains_lines(data: StudyData, picks: Mapping[str, Pick]) -> list[str]:
    """Text lines: each reference with its measured figures, then each pick's gains over it;
    empty when no reference was measured."""
    refs = data.references
    if not refs:
        return []
    gains = reference_gains(data, picks)
    lines = []
    for ref in refs:
        figures = ", ".join(
            f"{o.name} {fmt_measure(m)}{' ' + o.unit if o.unit else ''}" for o, m in zip(data.objectives, _measures(data, ref))
        )
        lines.append(f"{ref.reference} (trial {ref.number}; {reference_flags(ref)}): {figures}")
        mine = [g for g in gains if g.reference_trial == ref.number]
        for g in mine:
            lines.append(f"    {', '.join(g.picks)} pick (trial {g.trial}) over it: " + "; ".join(_gain_text(x) for x in g.gains))
        verdict = _verdict_line(str(ref.reference), reference_flags(ref), reference_verdict(mine))
        if verdict:
            lines.append(verdict)
    return lines


def _ratio_json(r: Ratio | None) -> dict[str, Any] | None:
    if r is None:
        return None
    lo, hi = (r.value - r.half_width, r.value + r.half_width) if r.half_width is not None else (None, None)
    return {"value": r.value, "half_width": r.half_width, "ci95": None if lo is None else [lo, hi]}


def gains_json(data: StudyData, picks: Mapping[str, Pick]) -> dict[str, Any]:
    """``references`` (each measured reference with its figures) and ``gains`` (each pick
    over each reference, per objective) for ``pareto --json`` and the report."""

    def measures(t: TrialView) -> dict[str, Any]:
        return {
            o.name: None if m is None else {"value": m.value, "half_width": m.half_width, "n": m.n}
            for o, m in zip(data.objectives, _measures(data, t))
        }

    gains: Sequence[PickGains] = reference_gains(data, picks)
    return {
        "references": [
            {
                "name": t.reference,
                "number": t.number,
                "flags": reference_flags(t),
                "objectives": measures(t),
                "verdict": reference_verdict([g for g in gains if g.reference_trial == t.number]),
            }
            for t in data.references
        ],
        "gains": [
            {
                "picks": list(g.picks),
                "number": g.trial,
                "reference": g.reference,
                "reference_number": g.reference_trial,
                "objectives": {
                    x.objective: {
                        "ratio": _ratio_json(x.ratio),
                        "verdict": x.verdict,
                        "paired": None if x.comparison is None else x.comparison.as_dict(),
                    }
                    for x in g.gains
                },
            }
            for g in gains
        ],
    }
