"""The first lines of `autospec pareto`: what to deploy, in plain words (pure).

`headline_lines(found)` is the study's verdict (`Answer.verdict`, the same lines as
optimize's closing lines and the dashboard's note), then one line per load: the latency
pick (the lowest concurrency's objective), the throughput pick (the highest's) and the
knee for a mixed load, each with its figure and the configurations tied with it; then the
picks' gains over SGLang's defaults and over no speculation where the study measured them
(`references.reference_gains`: the same ratios and intervals as pareto's references
section). Nothing here is computed anew: figures, ties and gains come from the answer.
"""

from __future__ import annotations

from autospec.report.answer import Answer
from autospec.report.data import StudyData
from autospec.report.recommend import Pick, share_of_best
from autospec.report.references import PickGains, reference_gains
from autospec.report.table import describe, fmt_measure, fmt_ratio

__all__ = ["KNEE", "headline_lines"]

KNEE = "the knee (the configuration that keeps the highest share of the best value on every objective)"
_LOADS = (("latency", "for latency"), ("throughput", "for throughput"), ("knee", "for a mixed load"))
_REFERENCES = (("sglang_defaults", "SGLang's defaults"), ("no_speculation", "no speculation"))


def _where(data: StudyData, i: int) -> str:
    o = data.objectives[i]
    return f"C={o.concurrency}" if o.concurrency is not None else o.name


def _figure(data: StudyData, pick: Pick, i: int) -> str:
    o = data.objectives[i]
    m = pick.trial.objective_measure(o, i)
    return f"{fmt_measure(m)}{' ' + o.unit if o.unit else ''} at {_where(data, i)}"


def _tie(picks: dict[str, Pick], pick: Pick) -> str:
    """'; tied within the intervals with trial(s) 9 (the pick for a mixed load)', or ''
    (the other picks named by their load: the knee is defined on its own line, after)."""
    if not pick.tied_with:
        return ""
    labels = dict(_LOADS)
    named = []
    for number in pick.tied_with:
        others = [labels[name] for name, p in picks.items() if p.trial.number == number and name != pick.name]
        named.append(f"{number} (the pick {' and '.join(others)})" if others else str(number))
    return f"; tied within the intervals with trial(s) {', '.join(named)}"


def _pick_line(data: StudyData, picks: dict[str, Pick], name: str, label: str) -> str:
    pick = picks[name]
    head = f"{label}: trial {pick.trial.number} ({describe(pick.trial)})"
    if pick.objective is not None:
        return f"{head}, {_figure(data, pick, pick.objective)}{_tie(picks, pick)}"
    shares = share_of_best(data, pick.trial, data.front)
    kept = ", ".join(f"{s:.0%} at {_where(data, i)}" for i, s in enumerate(shares))
    return f"{head}, {KNEE}: {kept}"


def _gain_line(data: StudyData, picks: dict[str, Pick], gains: list[PickGains], reference: str, label: str) -> str | None:
    ref = next((t for t in data.references if t.reference == reference), None)
    if ref is None:
        return None
    parts = []
    for name, _ in _LOADS:
        pick = picks[name]
        if pick.trial.number == ref.number:
            parts.append(f"{name} pick is {label}")
            continue
        mine = next((g for g in gains if g.reference_trial == ref.number and name in g.picks), None)
        if mine is None:
            continue
        objectives = range(len(data.objectives)) if pick.objective is None else [pick.objective]
        figures = [
            f"{fmt_ratio(mine.gains[i].ratio)} at {_where(data, i)} ({mine.gains[i].verdict})"
            for i in objectives
            if mine.gains[i].ratio is not None
        ]
        if figures:
            parts.append(f"{name} {', '.join(figures)}")
    if all(pick.trial.number == ref.number for pick in picks.values()):
        parts = [f"every pick is {label}"]
    return f"gain over {label} (trial {ref.number}): {'; '.join(parts)}" if parts else None


def headline_lines(found: Answer) -> list[str]:
    """The verdict, what to deploy for each load, and the gains over the references (module
    docstring); the verdict alone while nothing is on the front."""
    data, picks = found.data, found.picks
    lines = list(found.verdict)
    if not all(name in picks for name, _ in _LOADS):
        return lines
    lines += [_pick_line(data, picks, name, label) for name, label in _LOADS]
    gains = reference_gains(data, picks)
    for reference, label in _REFERENCES:
        line = _gain_line(data, picks, gains, reference, label)
        if line is not None:
            lines.append(line)
    return lines
