"""The Pareto table: each front configuration with its objectives (value +- half-width
of the 95% interval), C=1 TPOT, accept length, max_running_requests, ratios to a
baseline trial with +-, typed warnings, and a legend (pure).

Ratios: r = value / baseline value; its +- is r * sqrt((h_a/a)^2 + (h_b/b)^2) from the
two half-widths (first-order error propagation, as hyperfine reports relative speed);
absent when either half-width is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.report.checks import WARNING_KINDS, TrialWarning, trial_warnings
from autospec.report.data import Measure, StudyData, TrialView
from autospec.report.wrapping import wrap_lines
from autospec.sglang_facts import ALGORITHM, DRAFT_TOKENS, MEM_FRACTION, STEPS, TOPK

__all__ = [
    "Ratio",
    "TableRow",
    "ParetoTable",
    "ratio",
    "build_table",
    "compact",
    "describe",
    "format_text",
    "format_markdown",
    "fmt_measure",
    "fmt_ratio",
    "table_json",
]

_SHORT = {
    STEPS: "steps",
    TOPK: "topk",
    DRAFT_TOKENS: "draft",
    MEM_FRACTION: "mem",
    "cuda_graph_max_bs": "graph_bs",
    "max_running_requests": "max_req",
    ALGORITHM: "algo",
}


def compact(flags: Mapping[str, Any]) -> str:
    """'steps=3 topk=1 draft=4 mem=0.84' (short names for the usual flags); flags a
    reference point leaves unset (None) are listed last: 'unset: steps,topk'."""
    parts, unset = [], []
    for key, value in flags.items():
        if value is None:
            unset.append(_SHORT.get(key, key))
            continue
        if isinstance(value, float):
            value = f"{value:g}"
        parts.append(f"{_SHORT.get(key, key)}={value}")
    if unset:
        parts.append(f"unset: {','.join(unset)}")
    return " ".join(parts)


def describe(t: TrialView) -> str:
    """A configuration in a few words: a reference point by its name ('no_speculation',
    'sglang_defaults', 'adaptive': SGLang chooses what it leaves unset), else `compact`."""
    return str(t.reference) if t.reference is not None else compact(t.flags)


@dataclass(frozen=True)
class Ratio:
    value: float
    half_width: float | None


def ratio(a: Measure | None, b: Measure | None) -> Ratio | None:
    if a is None or b is None or not b.value:
        return None
    r = a.value / b.value
    if a.half_width is None or b.half_width is None or not a.value:
        return Ratio(r, None)
    rel = math.hypot(a.half_width / a.value, b.half_width / b.value)
    return Ratio(r, abs(r) * rel)


@dataclass(frozen=True)
class TableRow:
    trial: TrialView
    objectives: list[Measure | None]
    tpot: Measure | None  # TPOT (ms) at the lowest measured concurrency, normally C=1
    accept_length: Measure | None
    max_running_requests: int | None
    ratios: list[Ratio | None]
    warnings: list[TrialWarning]
    marks: list[str] = field(default_factory=list)  # "baseline", "latency pick", ...

    @property
    def number(self) -> int:
        return self.trial.number


@dataclass(frozen=True)
class ParetoTable:
    study: str
    objective_names: list[str]
    objective_units: list[str]
    tpot_concurrency: int | None
    rows: list[TableRow]  # the front, best first on the first objective
    baseline: TableRow | None  # also listed when it is not on the front
    legend: list[str]


def _lowest_level(data: StudyData) -> int | None:
    levels = sorted({c for t in data.measured for c in t.bench})
    return levels[0] if levels else None


def _row(data: StudyData, t: TrialView, baseline: TrialView | None, level: int | None, marks: list[str]) -> TableRow:
    objectives = [t.objective_measure(o, i) for i, o in enumerate(data.objectives)]
    base = [baseline.objective_measure(o, i) for i, o in enumerate(data.objectives)] if baseline else []
    ratios: list[Ratio | None] = [ratio(a, b) for a, b in zip(objectives, base)] if baseline else [None] * len(objectives)
    tpot = t.measure("tpot_ms_mean", level) if level is not None else None
    accept = t.measure("accept_length", level) if level is not None else None
    mrr = t.startup.get("max_running_requests")
    return TableRow(
        t, objectives, tpot, accept, int(mrr) if isinstance(mrr, (int, float)) else None, ratios, trial_warnings(data, t), marks
    )


def shared_note(data: StudyData, t: TrialView) -> str:
    """'C=1 pooled with trial(s) 10 (only the KV pool's size differs)' where `t`'s figures
    include launches of other configurations (`TrialView.pooled_with`); '' where none do."""
    by_others: dict[tuple[int, ...], list[str]] = {}
    for o, others in zip(data.objectives, t.pooled_with):
        if others:
            by_others.setdefault(others, []).append(f"C={o.concurrency}" if o.concurrency is not None else o.name)
    return "; ".join(
        f"{', '.join(where)} pooled with trial(s) {', '.join(map(str, others))} (only the KV pool's size differs)"
        for others, where in by_others.items()
    )


def build_table(data: StudyData, baseline: TrialView | None = None, marks: dict[int, list[str]] | None = None) -> ParetoTable:
    """The table for `data`'s front; `marks` adds labels by trial number."""
    marks = {k: list(v) for k, v in (marks or {}).items()}
    for t in data.front:
        if t.launches > 1:
            marks.setdefault(t.number, []).append(f"mean of {t.launches} launches")
        shared = shared_note(data, t)
        if shared:
            marks.setdefault(t.number, []).append(shared)
    if baseline is not None:
        marks.setdefault(baseline.number, []).insert(0, "baseline")
    level = _lowest_level(data)
    rows = [_row(data, t, baseline, level, marks.get(t.number, [])) for t in data.front]
    base_row = None
    if baseline is not None:
        base_row = next((r for r in rows if r.number == baseline.number), None) or _row(
            data, baseline, baseline, level, marks.get(baseline.number, [])
        )
    return ParetoTable(
        study=data.name,
        objective_names=[o.name for o in data.objectives],
        objective_units=[o.unit for o in data.objectives],
        tpot_concurrency=level,
        rows=rows,
        baseline=base_row,
        legend=_legend(data, baseline, level, rows + ([base_row] if base_row else [])),
    )


def _legend(data: StudyData, baseline: TrialView | None, level: int | None, rows: Sequence[TableRow]) -> list[str]:
    lines = [
        "value +-h: value and half-width of its 95% interval (Student-t over requests; the steady aggregate: "
        "batch means over waves, or sub-wave slices in a window under 3 waves (F); Student-t over repeat runs)",
    ]
    for o in data.objectives:
        lines.append(f"{o.name}: {o.label}, {'higher' if o.maximize else 'lower'} is better")
    if level is not None:
        lines.append(
            f"TPOT@c{level}: time per output token after the first at C={level}, ms; "
            f"accept: tokens accepted per verify step at C={level}"
        )
    lines.append("max_req: max_running_requests SGLang chose at startup (requests beyond it queue)")
    if baseline is not None:
        lines.append(
            f"xR +-h: ratio to the baseline, trial {baseline.number} ({describe(baseline)}); >1 means larger than the baseline"
        )
    used = {w.kind for r in rows for w in r.warnings}
    for kind, (code, sentence) in WARNING_KINDS.items():
        if kind in used:
            lines.append(f"{code} ({kind}): {sentence}")
    return lines


def fmt_measure(m: Measure | None, digits: int = 1) -> str:
    if m is None:
        return "-"
    if m.half_width is None:
        return f"{m.value:.{digits}f}"
    return f"{m.value:.{digits}f} +-{m.half_width:.{digits}f}"


def fmt_ratio(r: Ratio | None) -> str:
    if r is None:
        return "-"
    if r.half_width is None:
        return f"x{r.value:.2f}"
    return f"x{r.value:.2f} +-{r.half_width:.2f}"


def _cells(table: ParetoTable, row: TableRow, with_ratios: bool) -> list[str]:
    cells = [str(row.number), describe(row.trial)]
    cells += [fmt_measure(m) for m in row.objectives]
    cells += [
        fmt_measure(row.tpot, 2),
        fmt_measure(row.accept_length, 2),
        "-" if row.max_running_requests is None else str(row.max_running_requests),
    ]
    if with_ratios:
        cells += [fmt_ratio(r) for r in row.ratios]
    cells.append("".join(w.code for w in row.warnings))
    cells.append(", ".join(row.marks))
    return cells


def _headers(table: ParetoTable, with_ratios: bool) -> list[str]:
    level = table.tpot_concurrency
    headers = [
        "trial",
        "configuration",
        *table.objective_names,
        f"TPOT@c{level} ms" if level is not None else "TPOT ms",
        f"accept@c{level}" if level is not None else "accept",
        "max_req",
    ]
    if with_ratios:
        headers += [f"vs base {n}" for n in table.objective_names]
    return headers + ["warn", "note"]


def _all_rows(table: ParetoTable) -> list[TableRow]:
    rows = list(table.rows)
    if table.baseline is not None and all(r.number != table.baseline.number for r in rows):
        rows.append(table.baseline)
    return rows


def _short_marks(marks: list[str]) -> str:
    """'latency, knee pick; mean of 3 launches': the pick marks said once."""
    picks = [m.removesuffix(" pick") for m in marks if m.endswith(" pick")]
    rest = [m for m in marks if not m.endswith(" pick")]
    return "; ".join(([f"{', '.join(picks)} pick"] if picks else []) + rest)


def _aligned(headers: list[str], body: list[list[str]], right: list[bool]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(cells) for cells in body)]


def format_text(table: ParetoTable, width: int | None = None) -> str:
    """Plain-text table (columns aligned; numbers right-aligned) followed by the legend.

    With `width`: the pick marks said once, and where a row would be wider than `width`,
    each configuration and its notes go on a line of their own under the figures; the
    legend is folded to `width` (`wrapping.wrap_lines`)."""
    with_ratios = table.baseline is not None
    headers = _headers(table, with_ratios)
    rows = _all_rows(table)
    body = [_cells(table, r, with_ratios) for r in rows]
    if width is not None:
        for cells, row in zip(body, rows):
            cells[-1] = _short_marks(row.marks)
    right = [i not in (1, len(headers) - 2, len(headers) - 1) for i in range(len(headers))]
    out = _aligned(headers, body, right)
    if width is not None and max(len(line) for line in out) > width:
        narrow = [[c for i, c in enumerate(cells) if i not in (1, len(cells) - 1)] for cells in body]
        keep = [i for i in range(len(headers)) if i not in (1, len(headers) - 1)]
        out = _aligned([headers[i] for i in keep], narrow, [right[i] for i in keep])
        lines = out[:2]
        for figures, cells in zip(out[2:], body):
            lines.append(figures)
            lines.append("      " + "; ".join(c for c in (cells[1], cells[-1]) if c))
        out = wrap_lines(lines, width)
    out.append("")
    legend = [f"  {entry}" for entry in table.legend]
    out += legend if width is None else wrap_lines(legend, width)
    return "\n".join(out)


def format_markdown(table: ParetoTable) -> str:
    """GitHub-flavoured Markdown table followed by the legend as a list."""
    with_ratios = table.baseline is not None
    headers = _headers(table, with_ratios)
    out = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---:" if i not in (1, len(headers) - 2, len(headers) - 1) else "---" for i in range(len(headers))) + "|",
    ]
    for row in _all_rows(table):
        cells = [c.replace("+-", "±").replace("|", "\\|") for c in _cells(table, row, with_ratios)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {entry.replace('+-', '±')}" for entry in table.legend]
    return "\n".join(out)


def _measure_json(m: Measure | None) -> dict[str, Any] | None:
    if m is None:
        return None
    out: dict[str, Any] = {"value": m.value, "half_width": m.half_width, "n": m.n}
    if m.method is not None:
        out["interval_method"] = m.method
    return out


def _objective_json(m: Measure | None, t: TrialView, i: int) -> dict[str, Any] | None:
    """An objective's figure, with the launches behind it and the configurations it pools
    (`TrialView.pooled_with`: the same server at that objective's concurrency)."""
    out = _measure_json(m)
    if out is not None and i < len(t.objective_launches):
        out["launches"] = t.objective_launches[i]
        out["pooled_with"] = list(t.pooled_with[i])
    return out


def table_json(table: ParetoTable) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts (front first, then the baseline when off the front)."""
    out = []
    for row in _all_rows(table):
        out.append(
            {
                "number": row.number,
                "reference": row.trial.reference,
                "params": row.trial.flags,
                "objectives": {
                    n: _objective_json(m, row.trial, i) for i, (n, m) in enumerate(zip(table.objective_names, row.objectives))
                },
                "tpot_ms": _measure_json(row.tpot),
                "accept_length": _measure_json(row.accept_length),
                "max_running_requests": row.max_running_requests,
                "ratio_to_baseline": {
                    n: (None if r is None else {"value": r.value, "half_width": r.half_width})
                    for n, r in zip(table.objective_names, row.ratios)
                }
                if table.baseline
                else None,
                "warnings": [{"kind": w.kind, "code": w.code, "detail": w.detail} for w in row.warnings],
                "marks": row.marks,
                "on_front": row.trial.kind == "front",
            }
        )
    return out
