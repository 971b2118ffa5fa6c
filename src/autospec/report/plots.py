"""Plots of a study with matplotlib (Agg, no display; imported lazily).

- `pareto_figure`: every measured configuration on the two main objectives; the front
  (filled, with 95% error bars, joined by its staircase), dominated configurations
  (hollow), infeasible ones that were measured (red crosses), a count of infeasible
  ones that never produced numbers, the baseline (star), the reference points measured
  in the study (diamonds, named) and the three picks.
- `concurrency_figure`: for the front's configurations (and the baseline), per-request
  output tok/s and aggregate output tok/s against concurrency, like the table of the
  hand-tuning sweep the default sim profile is calibrated to.

`render(fig, path_stem)` writes ``<stem>.png`` and returns the SVG text, which the
report embeds in self-contained HTML (no JavaScript, no network).
"""

from __future__ import annotations

import io
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.report.data import Measure, StudyData, TrialView
from autospec.report.table import compact

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from autospec.report.recommend import Pick

__all__ = ["pareto_figure", "concurrency_figure", "render"]

_FRONT = "#1f77b4"
_DOMINATED = "#7f7f7f"
_INFEASIBLE = "#d62728"
_BASELINE = "#000000"
_PICK = "#2ca02c"
_REFERENCE = "#9467bd"
_DPI = 110


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=_DPI, layout="constrained")


def _varying(data: StudyData) -> set[str]:
    """Flags that differ between measured configurations (the rest is noise in a label)."""
    shown = data.measured or data.trials
    keys = {k for t in shown for k in t.flags}
    return {k for k in keys if len({repr(t.flags.get(k)) for t in shown}) > 1} or keys


def _name(t: TrialView, keys: set[str]) -> str:
    if t.reference is not None:
        return f"#{t.number} {t.reference}"
    return f"#{t.number} {compact({k: v for k, v in t.flags.items() if k in keys})}".rstrip()


def _label_offsets(xs: list[float], ys: list[float], step: float = 11.0) -> list[float]:
    """Vertical label offsets (points) that keep labels of points lying close together (within
    3% of the y range and 10% of the x range) from printing over each other."""
    y_span = (max(ys) - min(ys)) or 1.0
    x_span = (max(xs) - min(xs)) or 1.0
    order = sorted(range(len(ys)), key=lambda i: -ys[i])
    offsets = [0.0] * len(ys)
    placed: list[int] = []
    for i in order:
        near = [j for j in placed if abs(ys[j] - ys[i]) < 0.03 * y_span and abs(xs[j] - xs[i]) < 0.1 * x_span]
        offsets[i] = min((offsets[j] for j in near), default=step) - step if near else 0.0
        placed.append(i)
    return offsets


def _xy(data: StudyData, t: TrialView, ix: int, iy: int) -> tuple[Measure, Measure]:
    """Objectives `ix` and `iy` of `t` (NaN, which is not drawn, where `t` has no value)."""
    mx = t.objective_measure(data.objectives[ix], ix) or Measure(math.nan)
    my = t.objective_measure(data.objectives[iy], iy) or Measure(math.nan)
    return mx, my


_Point = tuple[tuple[float, float | None], tuple[float, float | None]]  # ((x, ±x), (y, ±y))


def pareto_figure(data: StudyData, baseline: TrialView | None = None, picks: Mapping[str, Pick] | None = None) -> Figure:
    """The front on (latency objective, throughput objective); one objective: against trial number."""
    fig = _figure(9.0, 6.0)
    ax = fig.add_subplot()
    ix, iy = data.latency_objective, data.throughput_objective
    single = ix == iy
    keys = _varying(data)

    def point(t: TrialView) -> _Point:
        if single:
            m = t.objective_measure(data.objectives[ix], ix) or Measure(math.nan)
            return (float(t.number), None), (m.value, m.half_width)
        mx, my = _xy(data, t, ix, iy)
        return (mx.value, mx.half_width), (my.value, my.half_width)

    _draw_off_front(ax, data, point)
    _draw_front(ax, sorted(data.front, key=lambda t: point(t)[0][0]), point, keys, single)
    if baseline is not None and baseline.measured:
        (bx, _), (by, _) = point(baseline)
        ax.scatter([bx], [by], marker="*", s=260, color=_BASELINE, zorder=5, label=f"baseline {_name(baseline, keys)}")
    _draw_references(ax, data, point)
    _draw_picks(ax, data, picks or {}, point)
    _label_axes(ax, data, ix, iy, single)
    return fig


def _draw_references(ax: Any, data: StudyData, point: Callable[[TrialView], _Point]) -> None:
    """The reference points measured in the study as named diamonds (on the front, where
    nothing dominates them, they are also front points)."""
    for t in data.references:
        (x, _), (y, _) = point(t)
        ax.scatter([x], [y], marker="D", s=60, color=_REFERENCE, zorder=4, label=f"reference {t.reference}: #{t.number}")
        ax.annotate(str(t.reference), (x, y), textcoords="offset points", xytext=(7, -10), fontsize=8, color=_REFERENCE)


def _draw_off_front(ax: Any, data: StudyData, point: Callable[[TrialView], _Point]) -> None:
    """Dominated trials as rings, measured infeasible ones as crosses, and the count of
    infeasible ones without numbers in the legend."""
    dominated = data.of_kind("dominated")
    if dominated:
        pts = [point(t) for t in dominated]
        ax.scatter(
            [p[0][0] for p in pts],
            [p[1][0] for p in pts],
            s=40,
            facecolors="none",
            edgecolors=_DOMINATED,
            linewidths=1.2,
            label=f"dominated ({len(dominated)})",
            zorder=2,
        )
    infeasible = data.of_kind("infeasible")
    measured_bad = [t for t in infeasible if t.measured]
    if measured_bad:
        pts = [point(t) for t in measured_bad]
        ax.scatter(
            [p[0][0] for p in pts],
            [p[1][0] for p in pts],
            marker="x",
            s=50,
            color=_INFEASIBLE,
            label=f"infeasible, measured ({len(measured_bad)}): violated an SLO",
            zorder=3,
        )
    unmeasured = [t for t in infeasible if not t.measured]
    if unmeasured:
        why = Counter(t.outcome for t in unmeasured).most_common()
        text = ", ".join(f"{k} {v}" for k, v in why)
        ax.plot(
            [],
            [],
            linestyle="none",
            marker="x",
            color=_INFEASIBLE,
            alpha=0.5,
            label=f"infeasible, no numbers ({len(unmeasured)}): {text}",
        )


def _draw_front(ax: Any, front: Sequence[TrialView], point: Callable[[TrialView], _Point], keys: set[str], single: bool) -> None:
    """The front's points with their 95% intervals, joined, each named."""
    if not front:
        return
    pts = [point(t) for t in front]
    xs, ys = [p[0][0] for p in pts], [p[1][0] for p in pts]
    ax.errorbar(
        xs,
        ys,
        xerr=[p[0][1] or 0 for p in pts],
        yerr=[p[1][1] or 0 for p in pts],
        fmt="o",
        color=_FRONT,
        ecolor=_FRONT,
        elinewidth=1,
        capsize=3,
        markersize=7,
        label=f"Pareto front ({len(front)}), 95% intervals",
        zorder=4,
    )
    if not single and len(front) > 1:
        ax.plot(xs, ys, color=_FRONT, alpha=0.35, linewidth=1.5, zorder=1)
    for t, x, y, dy in zip(front, xs, ys, _label_offsets(xs, ys)):
        ax.annotate(_name(t, keys), (x, y), textcoords="offset points", xytext=(7, dy), fontsize=8, color="#1a1a1a", va="center")


def _draw_picks(ax: Any, data: StudyData, picks: Mapping[str, Pick], point: Callable[[TrialView], _Point]) -> None:
    """A ring around each picked point, named in the legend."""
    by_trial: dict[int, list[str]] = {}
    for name, pick in picks.items():
        by_trial.setdefault(pick.trial.number, []).append(name)
    for number, names in by_trial.items():
        picked = data.trial(number)
        if picked is None:
            continue
        (px, _), (py, _) = point(picked)
        ax.scatter(
            [px],
            [py],
            s=330,
            facecolors="none",
            edgecolors=_PICK,
            linewidths=2.2,
            zorder=6,
            label=f"{' + '.join(names)} pick: #{number}",
        )


def _label_axes(ax: Any, data: StudyData, ix: int, iy: int, single: bool) -> None:
    """Axis labels, title and a legend in a fixed order of kinds."""
    from matplotlib.lines import Line2D

    if single:
        ax.set_xlabel("trial number")
        ax.set_ylabel(data.objectives[ix].label)
    else:
        ax.set_xlabel(data.objectives[ix].label)
        ax.set_ylabel(data.objectives[iy].label)
    n_launched = sum(1 for t in data.trials if t.launched)
    ax.set_title(f"Study {data.name}: {n_launched} launched trials, {len(data.measured)} measured configurations")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    kinds = (
        "Pareto",
        "latency",
        "throughput",
        "knee",
        "dominated",
        "baseline",
        "reference",
        "infeasible, measured",
        "infeasible, no",
    )
    order = sorted(range(len(labels)), key=lambda i: next(k for k, p in enumerate(kinds) if labels[i].startswith(p)))
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    if not handles:
        handles, labels = [Line2D([], [], linestyle="none")], ["no measured configuration yet"]
    ax.legend(handles, labels, loc="best", fontsize=8, framealpha=0.9)


def _series(data: StudyData, t: TrialView, metric: str) -> tuple[list[int], list[float], list[float]]:
    """`t`'s figures at every level: pooled where the level is an objective (the table's)."""
    cs: list[int] = []
    vs: list[float] = []
    hs: list[float] = []
    for c in t.levels:
        if (t.bench[c] or {}).get("failed_reason"):
            continue
        m = t.level_figure(data.objectives, metric, c)
        if m is None:
            continue
        cs.append(c)
        vs.append(m.value)
        hs.append(m.half_width or 0.0)
    return cs, vs, hs


def concurrency_figure(data: StudyData, baseline: TrialView | None = None) -> Figure:
    """Per-request and aggregate output tok/s against concurrency for the front (and baseline)."""
    import matplotlib

    fig = _figure(12.0, 5.0)
    axes = fig.subplots(1, 2)
    shown = list(data.front)
    if baseline is not None and all(t.number != baseline.number for t in shown):
        shown.append(baseline)
    colors = matplotlib.colormaps["tab10"]
    keys = _varying(data)
    levels = sorted({c for t in shown for c in t.levels})
    panels = (
        ("output_tok_s", "per-request output speed (tok/s)", "What one user sees"),
        ("agg_output_tok_s", "aggregate output throughput (tok/s)", "What the server delivers"),
    )
    for ax, (metric, ylabel, title) in zip(axes, panels):
        for k, t in enumerate(shown):
            cs, vs, hs = _series(data, t, metric)
            if not cs:
                continue
            is_base = baseline is not None and t.number == baseline.number
            mrr = t.startup.get("max_running_requests")
            label = _name(t, keys) + (f", max_req {mrr}" if mrr else "") + (" (baseline)" if is_base else "")
            ax.errorbar(
                cs,
                vs,
                yerr=hs,
                marker="*" if is_base else "o",
                markersize=9 if is_base else 5,
                linestyle="--" if is_base else "-",
                color=_BASELINE if is_base else colors(k % 10),
                capsize=3,
                linewidth=1.4,
                label=label,
            )
        ax.set_xscale("log", base=2)
        if levels:
            ax.set_xticks(levels)
            ax.set_xticklabels([str(c) for c in levels])
        ax.set_xlabel("concurrency C (requests in flight)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        axes[1].legend(handles, labels, loc="best", fontsize=8, framealpha=0.9)
    fig.suptitle(f"Study {data.name}: the front's configurations at every measured concurrency (95% intervals)")
    return fig


def render(fig: Figure, stem: Path) -> str:
    """Write ``<stem>.png``; return the figure as SVG text for HTML embedding."""
    import matplotlib

    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(stem.with_suffix(".png"), dpi=_DPI, metadata={"Software": None})
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "autospec"}):  # stable ids: same study, same SVG
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]
