"""The capacity curve of one configuration (`autospec capacity`), as files (pure apart from
writing them).

Input is the saved curve (`CapacityCurve.as_dict()` with ``study``, ``trial`` and
``pick`` added): every measured level with its summary and what it broke, the bounds,
the capacity and the first level that broke.

- `curve_rows` / `write_csv`: one row per measured level (the bounded metrics, TTFT and
  TPOT p99, aggregate tok/s, whether it held).
- `capacity_figure`: each bounded metric against concurrency with its bound as a line
  (levels that held filled, those that broke hollow), and the aggregate output
  throughput, the capacity marked on both.
- `write_html`: the figure embedded as SVG with the summary line (no JavaScript).
"""

from __future__ import annotations

import csv
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["curve_rows", "write_csv", "capacity_figure", "summary_line", "write_html", "CURVE_COLUMNS"]

CURVE_COLUMNS = ("ttft_ms_p99", "tpot_ms_p99", "itl_ms_p99", "agg_output_tok_s", "output_tok_s", "n_ok", "n_errors")
_HELD = "#2ca02c"
_BROKE = "#d62728"


def _columns(curve: Mapping[str, Any]) -> list[str]:
    bounded = [b["metric"] for b in curve.get("bounds", [])]
    return bounded + [c for c in CURVE_COLUMNS if c not in bounded]


def curve_rows(curve: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One dict per measured level, in concurrency order."""
    rows = []
    for p in curve.get("points", []):
        summary = p.get("summary") or {}
        row: dict[str, Any] = {"concurrency": p["concurrency"], "holds": p["holds"]}
        row.update({c: summary.get(c) for c in _columns(curve)})
        row["broken"] = "; ".join(p.get("broken") or [])
        rows.append(row)
    return rows


def write_csv(curve: Mapping[str, Any], path: Path) -> None:
    rows = curve_rows(curve)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["concurrency", "holds", *_columns(curve), "broken"])
        writer.writeheader()
        writer.writerows(rows)


def summary_line(curve: Mapping[str, Any]) -> str:
    """'capacity C=13 under ttft_ms_p99 <= 2000: C=14 breaks it (...)' or why there is none;
    for a search that stopped early (``stopped``), what the finished levels show."""
    bounds = " and ".join(f"{b['metric']} <= {b['max']:g}" for b in curve.get("bounds", []))
    capacity, broken = curve.get("capacity"), curve.get("first_broken")
    points = {p["concurrency"]: p for p in curve.get("points", [])}
    stopped = curve.get("stopped")
    if stopped and not (capacity is not None and broken == capacity + 1):
        return f"{_stopped(stopped, len(points))}: {_so_far(capacity, broken)} under {bounds}"
    if capacity is None:
        why = "; ".join(points[broken]["broken"]) if broken in points else "nothing measured"
        return f"no concurrency holds {bounds}: C={broken} already breaks it ({why})"
    if broken is None:
        return (
            f"capacity C>={capacity} under {bounds}: every level up to the limit held (raise --max-concurrency to look further)"
        )
    return f"capacity C={capacity} under {bounds}; C={broken} breaks it ({'; '.join(points[broken]['broken'])})"


def _stopped(reason: str, levels: int) -> str:
    how = "at --timeout" if reason == "timeout" else f"by {reason}"
    return f"stopped {how} after {levels} finished level{'s' if levels != 1 else ''}"


def _so_far(capacity: int | None, broken: int | None) -> str:
    """What the finished levels of an unfinished search say about the capacity."""
    if capacity is None and broken is None:
        return "no capacity known"
    if capacity is None:
        return f"C={broken} broke, no lower level measured"
    if broken is None:
        return f"capacity C>={capacity} so far"
    return f"capacity between C={capacity} and C={broken - 1} (C={capacity} held, C={broken} broke)"


def _series(curve: Mapping[str, Any], metric: str) -> tuple[list[int], list[float], list[bool]]:
    cs, vs, ok = [], [], []
    for p in sorted(curve.get("points", []), key=lambda p: p["concurrency"]):
        value = (p.get("summary") or {}).get(metric)
        if isinstance(value, (int, float)):
            cs.append(int(p["concurrency"]))
            vs.append(float(value))
            ok.append(bool(p["holds"]))
    return cs, vs, ok


def _panel(ax: Any, curve: Mapping[str, Any], metric: str, bound: float | None, ylabel: str) -> None:
    cs, vs, ok = _series(curve, metric)
    ax.plot(cs, vs, color="#1f77b4", linewidth=1.2, zorder=1)
    ax.scatter([c for c, o in zip(cs, ok) if o], [v for v, o in zip(vs, ok) if o], color=_HELD, zorder=2, label="held")
    ax.scatter(
        [c for c, o in zip(cs, ok) if not o],
        [v for v, o in zip(vs, ok) if not o],
        facecolors="none",
        edgecolors=_BROKE,
        zorder=2,
        label="level broke a bound",
    )
    if bound is not None:
        ax.axhline(bound, color=_BROKE, linestyle="--", linewidth=1.0, label=f"bound {bound:g}")
    if curve.get("capacity") is not None:
        ax.axvline(curve["capacity"], color=_HELD, linestyle=":", linewidth=1.2, label=f"capacity C={curve['capacity']}")
    if cs:  # a run stopped before its first level has no points to scale
        ax.set_xscale("log", base=2)
        ax.set_xticks(cs)
        ax.set_xticklabels([str(c) for c in cs], fontsize=7)
    ax.set_xlabel("concurrency C (requests in flight)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)


def capacity_figure(curve: Mapping[str, Any]) -> Figure:
    """The bounded metrics and the aggregate throughput against concurrency."""
    from matplotlib.figure import Figure

    bounds: Sequence[Mapping[str, Any]] = curve.get("bounds", [])
    panels = [(b["metric"], float(b["max"]), f"{b['metric']} (ms)" if "_ms" in b["metric"] else b["metric"]) for b in bounds]
    panels.append(("agg_output_tok_s", None, "aggregate output throughput (tok/s)"))  # type: ignore[arg-type]
    fig = Figure(figsize=(5.5 * len(panels), 4.5), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (metric, bound, label) in zip(axes, panels):
        _panel(ax, curve, metric, bound, label)
    where = f"study {curve.get('study')}, trial {curve.get('trial')}" + (f" ({curve['pick']} pick)" if curve.get("pick") else "")
    fig.suptitle(f"Capacity of {where}: {summary_line(curve)}", fontsize=9)
    return fig


def write_html(curve: Mapping[str, Any], svg: str, path: Path) -> None:
    """A self-contained page: the summary line, the figure, the per-level table."""
    rows = curve_rows(curve)
    head = ["concurrency", "holds", *_columns(curve), "broken"]
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row.get(h)))}</td>" for h in head) + "</tr>\n" for row in rows)
    table = "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>\n" + cells + "</table>"
    title = html.escape(f"Capacity of study {curve.get('study')}, trial {curve.get('trial')}")
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px}"
        "table{border-collapse:collapse}</style></head>"
        f"<body><h1>{title}</h1><p>{html.escape(summary_line(curve))}</p>{svg}{table}</body></html>\n",
        encoding="utf-8",
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "" if value is None else str(value)
