"""What `--sampler model` expected, beside what was measured, and why the configurations
never launched were not worth a launch.

Both come from the study: each trial the model chose carries its prediction from before
the launch (`Markers.predicted`), and the end of each run stores the model's verdict on
every configuration not launched (study attribute ``model_unlaunched``,
`autospec.study.proposing.samplers.ModelSampler.unlaunched`). Studies of other samplers have
neither; then there is nothing to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autospec.records import MODEL_SUMMARY_KEY
from autospec.report.data import StudyData, TrialView
from autospec.report.recommend import Pick

__all__ = ["model_lines", "model_json"]

_GROUPS = (
    ("fail", "predicted to fail at init"),
    ("dominated", "predicted dominated"),
    ("repeats", "another memory fraction of a server whose pool bound nothing"),
    ("open", "could still improve the front"),
)


def _prediction_text(t: TrialView, data: StudyData) -> str | None:
    p = t.predicted
    if not p:
        return None
    means, lows, highs = (p.get(k) or [] for k in ("values", "low", "high"))
    if not len(means) == len(lows) == len(highs) == len(data.objectives):
        return None
    parts = [
        f"{o.label} predicted {mean:,.4g} ({low:,.4g}-{high:,.4g}), measured {t.value(i):,.4g}"
        for i, (o, mean, low, high) in enumerate(zip(data.objectives, means, lows, highs))
    ]
    return f"trial {t.number}: " + "; ".join(parts) + f" (fitted on {p.get('launches', '?')} launches)"


def _unlaunched(data: StudyData) -> Mapping[str, Any] | None:
    summary = data.user_attrs.get(MODEL_SUMMARY_KEY)
    return summary if isinstance(summary, Mapping) else None


def model_lines(data: StudyData, picks: Mapping[str, Pick], examples: int = 3) -> list[str]:
    """Lines for `autospec pareto` and the report; empty for a study the model did not drive."""
    lines = []
    seen: set[int] = set()
    for name, pick in picks.items():
        if pick.trial.number in seen:
            continue
        seen.add(pick.trial.number)
        text = _prediction_text(pick.trial, data)
        if text is not None:
            lines.append(f"{name} pick, {text}")
    summary = _unlaunched(data)
    if summary:
        counts = ", ".join(f"{summary[g]['count']} {what}" for g, what in _GROUPS if summary.get(g, {}).get("count"))
        lines.append(
            f"never launched: {summary.get('candidates', 0)} configurations the model valued after "
            f"{summary.get('launches', 0)} launches: {counts}"
        )
        for g, what in _GROUPS:
            shown = summary.get(g, {}).get("examples", [])[:examples]
            if shown:
                lines.append(f"  {what}, e.g.:")
                lines += [f"    {example}" for example in shown]
        if summary.get("open", {}).get("count"):
            lines.append("  (more trials would launch those that could still improve the front)")
    return lines


def model_json(data: StudyData, picks: Mapping[str, Pick]) -> dict[str, Any] | None:
    """The same as data: the picks' predictions and the stored summary."""
    predicted = {
        name: {"trial": p.trial.number, "predicted": dict(p.trial.predicted), "measured": p.trial.values}
        for name, p in picks.items()
        if p.trial.predicted
    }
    summary = _unlaunched(data)
    if not predicted and not summary:
        return None
    return {"picks": predicted, "unlaunched": dict(summary) if summary else None}
