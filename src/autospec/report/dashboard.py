"""What optuna-dashboard shows beside its own plots: the study note and the front figure (pure).

optuna-dashboard draws every launch as a point of its own; `autospec pareto` pools the
launches of one server (`autospec.records.servers`). So that the dashboard shows the same
answer, the study gets a note (Markdown; `note_markdown`) with the verdict, the picks, the
pooled front and the reference points, and a figure (`front_figure`, plotly's JSON form)
of the pooled front with 95% error bars, the other configurations, the references and the
picks. `autospec.cli.dashboard.publish` writes both (optuna-dashboard 0.21.0's
`save_note` and `save_plotly_graph_object`, which reads only the figure's ``to_json()``).
"""

from __future__ import annotations

import json
from typing import Any

from autospec.report.answer import Answer, pick_lines
from autospec.report.data import StudyData, TrialView
from autospec.report.table import describe, fmt_measure

__all__ = ["note_markdown", "front_figure", "FigureJson", "FIGURE_ID", "NOTE_TITLE"]

FIGURE_ID = "autospec-front"  # stable: a later save replaces the figure
NOTE_TITLE = "## autospec: what to deploy"


def _row(data: StudyData, t: TrialView) -> str:
    cells = [str(t.number), describe(t)]
    cells += [fmt_measure(t.objective_measure(o, i)) for i, o in enumerate(data.objectives)]
    cells.append(str(t.launches))
    return "| " + " | ".join(cells) + " |"


def _table(data: StudyData, trials: list[TrialView], first: str) -> list[str]:
    head = [first, "configuration", *(f"{o.name} ({o.unit})" if o.unit else o.name for o in data.objectives), "launches"]
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *(_row(data, t) for t in trials)]


def note_markdown(found: Answer) -> str:
    """The study note: verdict, picks, the pooled front and the references."""
    data = found.data
    lines = [NOTE_TITLE, "", *(f"- {line}" for line in found.verdict), ""]
    if found.picks:
        lines += ["### Picks", "", *(f"- {line}" for line in pick_lines(data, found.picks)), ""]
    lines += ["### Pooled front (as `autospec pareto` prints it; values +- 95% half-width)", ""]
    lines += [*_table(data, data.front, "trial"), ""]
    if data.references:
        on = {t.number for t in data.front}
        lines += ["### Reference points (deployable: SGLang chooses what they leave unset)", ""]
        lines += [
            f"- {t.reference}: trial {t.number}, {'on the front' if t.number in on else 'not on the front'}"
            for t in data.references
        ]
        lines.append("")
    lines.append(
        "Each launch is a point of its own in the dashboard's plots; this note and the figure "
        '"autospec: pooled front" pool the launches of one server, as `autospec pareto` does.'
    )
    return "\n".join(lines) + "\n"


def _trace(data: StudyData, trials: list[TrialView], ix: int, iy: int, name: str, marker: dict[str, Any]) -> dict[str, Any]:
    xs, ys, ex, ey, text = [], [], [], [], []
    for t in trials:
        mx, my = t.objective_measure(data.objectives[ix], ix), t.objective_measure(data.objectives[iy], iy)
        if mx is None or my is None:
            continue
        xs.append(mx.value)
        ys.append(my.value)
        ex.append(mx.half_width or 0.0)
        ey.append(my.half_width or 0.0)
        text.append(f"trial {t.number} ({describe(t)})")
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": xs,
        "y": ys,
        "text": text,
        "error_x": {"type": "data", "array": ex, "visible": True},
        "error_y": {"type": "data", "array": ey, "visible": True},
        "marker": marker,
        "hovertemplate": "%{text}<br>%{x:.1f}, %{y:.1f}<extra>" + name + "</extra>",
    }


def front_figure(found: Answer) -> dict[str, Any] | None:
    """The pooled front as a plotly figure dict (None with fewer than two objectives)."""
    data = found.data
    if len(data.objectives) < 2:
        return None
    ix, iy = data.latency_objective, data.throughput_objective
    if ix == iy:
        ix, iy = 0, 1
    front = sorted(data.front, key=lambda t: t.value(ix))
    dominated = [t for t in data.measured if t.kind == "dominated"]
    traces = [
        {**_trace(data, front, ix, iy, "pooled front", {"size": 10, "color": "#1f77b4"}), "mode": "lines+markers"},
        _trace(data, dominated, ix, iy, "dominated", {"size": 8, "color": "#999999", "symbol": "circle-open"}),
        _trace(data, data.references, ix, iy, "reference", {"size": 11, "color": "#9467bd", "symbol": "diamond"}),
    ]
    for name, pick in found.picks.items():
        traces.append(
            _trace(data, [pick.trial], ix, iy, f"{name} pick", {"size": 18, "symbol": "circle-open", "line": {"width": 2}})
        )
    ox, oy = data.objectives[ix], data.objectives[iy]
    layout = {
        "title": {"text": f"autospec: pooled front of {data.name} (95% intervals)"},
        "xaxis": {"title": {"text": ox.label}},
        "yaxis": {"title": {"text": oy.label}},
        "legend": {"orientation": "h", "y": -0.3},
        "margin": {"b": 120},
    }
    return {"data": traces, "layout": layout}


class FigureJson:
    """A plotly figure given as its dict, with the one method `save_plotly_graph_object` uses."""

    def __init__(self, figure: dict[str, Any]) -> None:
        self.figure = figure

    def to_json(self) -> str:
        return json.dumps(self.figure)
