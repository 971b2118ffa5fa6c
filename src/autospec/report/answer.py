"""The one answer of a study (pure): what to deploy, from the pooled front and the picks.

`answer(data, baseline)` is the front (`StudyData.front`: `autospec.records.pareto_front`
over configurations, reference points included) and the picks (`recommend`), with the
verdict lines that say what to deploy. `autospec optimize`'s closing lines, `autospec
pareto` (text and `--json`), the report and optuna-dashboard's study note all print these,
so they name the same configurations.

The verdict: when the latency and the throughput pick are one configuration, deploy it for
every load; when they differ, one line says which to deploy for light load (the lowest
concurrency's objective) and which for heavy load (the highest), and whether
``--speculative-adaptive`` (the `adaptive` reference point, as measured) gets both: its
ratio to each pick on that pick's objective has an interval that reaches 1 (within noise)
or lies above it. When the two picks tie (one is within the intervals of the other where
that other leads), the verdict says so and names the one to deploy for every load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autospec.report.data import Measure, StudyData, TrialView
from autospec.report.recommend import Pick, recommend
from autospec.report.support import standing
from autospec.report.table import Ratio, describe, fmt_ratio, ratio

__all__ = ["Answer", "answer", "verdict_lines", "picks_json", "pick_lines"]

ADAPTIVE = "adaptive"


@dataclass(frozen=True)
class Answer:
    data: StudyData
    baseline: TrialView | None
    picks: dict[str, Pick]
    verdict: list[str]


def answer(data: StudyData, baseline: TrialView | None = None) -> Answer:
    """The study's front, picks and verdict (module docstring)."""
    picks = recommend(data, baseline)
    return Answer(data, baseline, picks, verdict_lines(data, picks))


def _measure(data: StudyData, t: TrialView, i: int) -> Measure | None:
    return t.objective_measure(data.objectives[i], i)


def _where(data: StudyData, i: int) -> str:
    o = data.objectives[i]
    return f"C={o.concurrency}" if o.concurrency is not None else o.name


def _reaches(r: Ratio | None, maximize: bool) -> bool:
    """The ratio is not worse than 1 beyond its interval (no interval: its value)."""
    if r is None:
        return False
    half = r.half_width or 0.0
    return r.value + half >= 1.0 if maximize else r.value - half <= 1.0


def _adaptive_line(data: StudyData, picks: Mapping[str, Pick]) -> str:
    adaptive = next((t for t in data.references if t.reference == ADAPTIVE), None)
    if adaptive is None:
        return "--speculative-adaptive was not measured here (optimize --references measures it where SGLang supports it)"
    parts, both = [], True
    for name in ("latency", "throughput"):
        pick = picks[name]
        i = pick.objective if pick.objective is not None else 0
        if pick.trial.number == adaptive.number:
            parts.append(f"it is the {name} pick at {_where(data, i)}")
            continue
        r = ratio(_measure(data, adaptive, i), _measure(data, pick.trial, i))  # one call: a paired ratio can replace it
        both = both and _reaches(r, data.objectives[i].maximize)
        parts.append(f"{fmt_ratio(r)} of trial {pick.trial.number} at {_where(data, i)}")
    how = "gets both" if both else "does not get both"
    return f"--speculative-adaptive (trial {adaptive.number}), as measured, {how}: {', '.join(parts)}"


def _tied_pick(lat: Pick, thr: Pick) -> Pick | None:
    """The pick to deploy for every load when the two picks tie where one of them leads:
    the throughput pick when it ties with the latency pick at the latency objective (it
    loses nothing there, within the intervals, and leads at the other), else the latency
    pick when it ties with the throughput pick at the throughput objective; else None."""
    if thr.trial.number in lat.tied_with:
        return thr
    if lat.trial.number in thr.tied_with:
        return lat
    return None


def verdict_lines(data: StudyData, picks: Mapping[str, Pick]) -> list[str]:
    """What to deploy, in plain words (module docstring); one line when nothing is measured."""
    if "latency" not in picks or "throughput" not in picks:
        return ["nothing measured on the front yet: run autospec optimize"]
    lat, thr = picks["latency"], picks["throughput"]
    if lat.trial.number == thr.trial.number:
        tied = sorted(set(lat.tied_with) | set(thr.tied_with))
        line = f"deploy trial {lat.trial.number} ({describe(lat.trial)}) for every load: the latency and the throughput pick"
        if tied:
            line += f"; trial(s) {', '.join(map(str, tied))} tie with it within the intervals: deploy trial {lat.trial.number}"
        return [line]
    li, ti = lat.objective or 0, thr.objective or 0
    one = _tied_pick(lat, thr)
    if one is not None:
        other, tie_at, lead_at = (lat, li, ti) if one is thr else (thr, ti, li)
        return [
            f"the picks are tied: deploy trial {one.trial.number} ({describe(one.trial)}) for every load; it is "
            f"the {one.name} pick at {_where(data, lead_at)}, and at {_where(data, tie_at)} within the intervals "
            f"of the {other.name} pick, trial {other.trial.number}"
        ]
    return [
        f"for light load ({_where(data, li)}) deploy trial {lat.trial.number} ({describe(lat.trial)}); "
        f"for heavy load ({_where(data, ti)}) deploy trial {thr.trial.number} ({describe(thr.trial)})",
        _adaptive_line(data, picks),
    ]


def pick_lines(data: StudyData, picks: Mapping[str, Pick]) -> list[str]:
    """One short line per pick: its configuration and its figures on every objective."""
    lines = []
    for name, pick in picks.items():
        figures = []
        for i, o in enumerate(data.objectives):
            m = _measure(data, pick.trial, i)
            if m is not None:
                hw = f" +-{m.half_width:.1f}" if m.half_width is not None else ""
                figures.append(f"{o.name} {m.value:.1f}{hw}")
        lines.append(f"{name:<10} trial {pick.trial.number} ({describe(pick.trial)}): {', '.join(figures)}")
    return lines


def _measure_json(m: Measure | None) -> dict[str, Any] | None:
    if m is None:
        return None
    ci = None if m.half_width is None else [m.value - m.half_width, m.value + m.half_width]
    return {"value": m.value, "half_width": m.half_width, "ci95": ci, "n": m.n}


def picks_json(data: StudyData, picks: Mapping[str, Pick]) -> dict[str, Any]:
    """Per pick: `number`, `params`, `reference`, `why`, and structured: `objective` (the
    one it was chosen on; null for the knee), `value` (that figure with `half_width` and
    `ci95`), `launches` (behind that figure), `pooled_with`, `tied_with`, `separated`
    (its interval excludes the runner-up's, on enough launches; null: nothing to compare
    with), `runner_up` ({number, value}), `versus_runner_up` (the paired ratio to it:
    `autospec.report.support.versus_json`) and `values` (every objective's figure)."""
    out: dict[str, Any] = {}
    for name, pick in picks.items():
        t = pick.trial
        entry: dict[str, Any] = {
            "number": t.number,
            "params": t.flags,
            "reference": t.reference,
            "why": pick.why,
            "objective": None,
            "value": None,
            "launches": t.launches,
            "pooled_with": [],
            "tied_with": list(pick.tied_with),
            "separated": None,
            "runner_up": None,
            "versus_runner_up": pick.versus,
            "values": {o.name: _measure_json(_measure(data, t, i)) for i, o in enumerate(data.objectives)},
        }
        if pick.objective is not None:
            st = standing(data, t, pick.objective)
            entry.update(
                objective=data.objectives[pick.objective].name,
                value=_measure_json(st.measure),
                launches=st.launches,
                pooled_with=list(st.pooled_with),
                separated=st.separated,
                runner_up=None
                if st.runner_up is None or st.runner_up_measure is None
                else {"number": st.runner_up.number, "value": st.runner_up_measure.value},
            )
        out[name] = entry
    return out
