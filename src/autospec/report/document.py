"""`autospec report`: a folder with the plots (PNG and self-contained HTML/SVG) and a
report (Markdown and HTML) holding the table, the recommendations, the plots and the
exact commands to deploy each pick.

Files written into the output folder:

    report.md, report.html           the report (HTML embeds the plots as SVG)
    pareto.png, pareto.html          the Pareto front
    concurrency.png, concurrency.html  tok/s against concurrency for the front
    launch-<pick>.sh                 the launch command of each pick
    adaptive.json                    the adaptive ladder (EAGLE/MTP topk=1 studies only)
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autospec.errors import UsageError
from autospec.report.adaptive import adaptive_flags, build_ladder, dumps
from autospec.report.answer import verdict_lines
from autospec.report.checks import study_warnings
from autospec.report.data import StudyData, TrialView, counts_line
from autospec.report.deploy import argv_of, deployment_for, render_cmd
from autospec.report.model_notes import model_lines
from autospec.report.plots import concurrency_figure, pareto_figure, render
from autospec.report.recommend import Pick, recommend
from autospec.report.references import GAINS_LEGEND, gains_lines
from autospec.report.table import ParetoTable, build_table, describe, format_markdown

__all__ = ["ReportFiles", "write_report", "pick_summary"]


@dataclass
class ReportFiles:
    folder: Path
    files: list[Path] = field(default_factory=list)


# A document is a list of blocks: ("h2", text) ("p", text) ("pre", text) ("list", [text])
# ("table", ParetoTable) ("figure", stem, caption, svg). Both renderers read the same list.
Block = tuple


def pick_summary(data: StudyData, t: TrialView) -> list[str]:
    """One comment line with the trial's objective values, for exported files."""
    parts = []
    for i, o in enumerate(data.objectives):
        m = t.objective_measure(o, i)
        if m is not None:
            hw = f" +-{m.half_width:.1f}" if m.half_width is not None else ""
            parts.append(f"{o.name} = {m.value:.1f}{hw} {o.unit}".rstrip())
    return ["measured: " + ", ".join(parts)] if parts else []


def _gains_blocks(data: StudyData, picks: dict[str, Pick]) -> list[Block]:
    """The picks' gains over the reference points measured in the study (none: no blocks)."""
    gains = gains_lines(data, picks)
    if not gains:
        return []
    return [
        ("h2", "Gains over the references"),
        ("p", f"Reference points measured in this study, outside the search and off the front. {GAINS_LEGEND}."),
        ("pre", "\n".join(gains) + "\n"),
    ]


def _blocks(
    data: StudyData,
    table: ParetoTable,
    picks: dict[str, Pick],
    baseline: TrialView | None,
    study_args: str,
    host: str,
    port: int,
    ladder_text: str | None,
    svgs: dict[str, str],
) -> list[Block]:
    objectives = ", ".join(f"{o.label} ({o.direction})" for o in data.objectives)
    blocks: list[Block] = [("p", counts_line(data) + "."), ("p", f"Objectives: {objectives}.")]
    if baseline is not None:
        blocks.append(("p", f"Baseline: trial {baseline.number} ({describe(baseline)}); ratios in the table are to it."))
    notes = study_warnings(data, baseline)
    if notes:
        blocks += [("h2", "Notes"), ("list", notes)]
    blocks += [("h2", "What to deploy"), ("list", verdict_lines(data, picks)), ("h2", "Recommendations")]
    blocks += _pick_blocks(data, picks, host, port)
    blocks += _gains_blocks(data, picks)
    explained = model_lines(data, picks)
    if explained:
        blocks += [("h2", "What the model expected"), ("pre", "\n".join(explained) + "\n")]
    blocks += [("h2", "Pareto front"), ("table", table)]
    blocks += [
        ("h2", "Plots"),
        ("figure", "pareto", "Pareto front: each point is one measured configuration.", svgs.get("pareto", "")),
        ("figure", "concurrency", "Tok/s against concurrency for the front's configurations.", svgs.get("concurrency", "")),
    ]
    if ladder_text is not None:
        blocks += [
            ("h2", "Adaptive speculation ladder"),
            (
                "p",
                "SGLang can switch the number of speculative steps by batch size "
                "(--speculative-adaptive-config). From this study's per-concurrency measurements, "
                "written to adaptive.json:",
            ),
            ("pre", ladder_text),
        ]
    blocks += _command_blocks(picks, study_args, host, port, ladder_text is not None)
    return blocks


def _pick_blocks(data: StudyData, picks: dict[str, Pick], host: str, port: int) -> list[Block]:
    """Each pick's reason and launch command (once per configuration)."""
    if not picks:
        return [("p", "Nothing is on the Pareto front yet: run autospec optimize.")]
    blocks: list[Block] = []
    shown: dict[int, str] = {}
    for name, pick in picks.items():
        blocks.append(("p", f"**{name}**: {pick.why}"))
        if pick.trial.number in shown:
            blocks.append(("p", f"Same configuration as the {shown[pick.trial.number]} pick."))
            continue
        shown[pick.trial.number] = name
        d = deployment_for(data, pick.trial, label=f"{name} pick", host=host, port=port, summary=pick_summary(data, pick.trial))
        blocks.append(("pre", render_cmd(d)))
    return blocks


def _command_blocks(picks: dict[str, Pick], study_args: str, host: str, port: int, ladder: bool) -> list[Block]:
    """The commands that show, export and inspect this study's answer."""
    export = f"autospec export {study_args}".rstrip()
    lines = [
        f"autospec pareto {study_args}".rstrip(),
        *(f"{export} --pick {name} --format cmd --host {host} --port {port}" for name in picks),
        f"{export} --pick knee --format yaml -o sglang.yaml" if picks else "",
        f"{export} --pick knee --format systemd -o sglang.service" if picks else "",
        f"{export} --format adaptive -o adaptive.json" if ladder else "",
        f"autospec dashboard {study_args}".rstrip(),
    ]
    return [("h2", "Commands"), ("pre", "\n".join(line for line in lines if line) + "\n")]


def _markdown(title: str, blocks: Sequence[Block]) -> str:
    out = [f"# {title}", ""]
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            out += [f"## {block[1]}", ""]
        elif kind == "p":
            out += [block[1].replace("+-", "±"), ""]
        elif kind == "pre":
            out += ["```", block[1].rstrip("\n"), "```", ""]
        elif kind == "list":
            out += [f"- {item.replace('+-', '±')}" for item in block[1]] + [""]
        elif kind == "table":
            out += [format_markdown(block[1]), ""]
        elif kind == "figure":
            out += [f"![{block[2]}]({block[1]}.png)", "", f"*{block[2]}* Vector version: [{block[1]}.html]({block[1]}.html).", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#1a1a1a}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:12.5px}figure{margin:1em 0}
figure svg{max-width:100%;height:auto}figcaption{font-style:italic;color:#444}"""


def _html_table(table: ParetoTable) -> str:
    md = format_markdown(table).split("\n")
    rows = [line for line in md if line.startswith("|")]
    legend = [line[2:] for line in md if line.startswith("- ")]
    header = [c.strip() for c in rows[0].strip("|").split(" | ")]
    align = [c.strip() for c in rows[1].strip("|").split("|")]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    out = [f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>']
    for line in rows[2:]:
        cells = [c.strip().replace("\\|", "|") for c in line.strip().strip("|").split(" | ")]
        out.append(
            "<tr>"
            + "".join(f'<td class="{"n" if a.endswith(":") else ""}">{html.escape(c)}</td>' for c, a in zip(cells, align))
            + "</tr>"
        )
    out.append("</tbody></table></div>")
    out.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in legend) + "</ul>")
    return "\n".join(out)


def _inline(text: str) -> str:
    escaped = html.escape(text.replace("+-", "±"))
    parts = escaped.split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


def _html(title: str, blocks: Sequence[Block]) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            out.append(f"<h2>{html.escape(block[1])}</h2>")
        elif kind == "p":
            out.append(f"<p>{_inline(block[1])}</p>")
        elif kind == "pre":
            out.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            out.append(_html_table(block[1]))
        elif kind == "figure":
            out.append(f"<figure>{block[3]}<figcaption>{html.escape(block[2])}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _figure_page(title: str, caption: str, svg: str) -> str:
    return _html(title, [("figure", "", caption, svg)])


def write_report(
    data: StudyData,
    folder: Path,
    *,
    baseline: TrialView | None = None,
    study_args: str = "",
    host: str = "127.0.0.1",
    port: int = 30000,
) -> ReportFiles:
    """Write the report folder for `data`; `study_args` (e.g. ``--study NAME``) goes into
    the commands it lists."""
    folder.mkdir(parents=True, exist_ok=True)
    files = ReportFiles(folder)
    picks = recommend(data, baseline)
    marks: dict[int, list[str]] = {}
    for name, pick in picks.items():
        marks.setdefault(pick.trial.number, []).append(f"{name} pick")
    table = build_table(data, baseline, marks)

    svgs = {}
    for stem, fig, caption in (
        ("pareto", pareto_figure(data, baseline, picks), "Pareto front"),
        ("concurrency", concurrency_figure(data, baseline), "Tok/s against concurrency"),
    ):
        svgs[stem] = render(fig, folder / stem)
        files.files.append(folder / f"{stem}.png")
        page = folder / f"{stem}.html"
        page.write_text(_figure_page(f"{caption}: study {data.name}", caption, svgs[stem]))
        files.files.append(page)

    ladder_text = None
    try:
        ladder = build_ladder(data)
    except UsageError:
        ladder = None
    if ladder is not None:
        ladder_text = dumps(ladder, data.name)
        (folder / "adaptive.json").write_text(ladder_text)
        files.files.append(folder / "adaptive.json")
        flags = adaptive_flags(ladder, "adaptive.json")
        ladder_text += "\n# launch flags that use it:\n" + " ".join(shlex.quote(w) for w in argv_of(flags)) + "\n"

    for name, pick in picks.items():
        d = deployment_for(data, pick.trial, label=f"{name} pick", host=host, port=port, summary=pick_summary(data, pick.trial))
        path = folder / f"launch-{name}.sh"
        path.write_text("#!/bin/sh\n" + render_cmd(d))
        path.chmod(0o755)  # a launch script is meant to be run
        files.files.append(path)

    title = f"autospec report: study {data.name}"
    blocks = _blocks(data, table, picks, baseline, study_args, host, port, ladder_text, svgs)
    (folder / "report.md").write_text(_markdown(title, blocks))
    (folder / "report.html").write_text(_html(title, blocks))
    files.files[:0] = [folder / "report.md", folder / "report.html"]
    return files
