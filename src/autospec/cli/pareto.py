"""`autospec pareto`: the Pareto front of a study as a table with uncertainty, ratios to a
baseline, typed warnings, a legend and three recommendations; or JSON.

Also home of `open_existing`, which the other read-only subcommands (export, report,
dashboard) use to open a study without creating anything.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from autospec.cli.common import add_study_command, open_existing_study, renamed_option
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna

    from autospec.report import Answer, ParetoTable, StudyData, TrialView
    from autospec.study.storage import StorageHandle

__all__ = ["register", "run", "text_lines", "open_existing", "open_existing_handle", "add_baseline_arg", "baseline_of"]


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "pareto",
        help="show the Pareto front of a study, with recommendations",
        description="Print the study's Pareto front (feasible, measured configurations no other beats on every "
        "objective) with 95% intervals, ratios to a baseline, warnings and three recommendations.",
    )
    add_baseline_arg(p)
    p.add_argument("--json", action="store_true", help="print the front, table and recommendations as JSON")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also print the model's predictions beside the measurements and why it left configurations unlaunched",
    )
    p.set_defaults(handler=run)


def add_baseline_arg(p: argparse.ArgumentParser) -> None:
    """``--baseline-trial N`` (the old spelling ``--baseline N`` is kept, hidden, for one release)."""
    p.add_argument(
        "--baseline-trial",
        type=int,
        metavar="N",
        help="trial number to compare against (default: the trial measured by optimize --baseline)",
    )
    renamed_option(p, "--baseline", "--baseline-trial", type=int, metavar="N")


def open_existing_handle(args: argparse.Namespace) -> tuple[StorageHandle, optuna.Study]:
    """(StorageHandle, optuna.Study) of an existing study; UsageError when there is none."""
    return open_existing_study(args.study, args.storage, Path(args.studies_dir))


def open_existing(args: argparse.Namespace) -> optuna.Study:
    return open_existing_handle(args)[1]


def baseline_of(data: StudyData, number: int | None) -> TrialView | None:
    """The baseline TrialView: `number` (checked) or the trial marked as baseline, or None."""
    if number is None:
        return data.baseline_trial()
    t = data.trial(number)
    if t is None:
        raise UsageError(f"--baseline-trial {number}: study {data.name!r} has no trial {number}; see autospec pareto")
    if not t.measured:
        raise UsageError(
            f"--baseline-trial {number}: trial {number} has no measurement (outcome {t.outcome}); pick a measured trial"
        )
    return t


def _section(out: list[str], title: str, lines: list[str], bullet: str) -> None:
    """`title` and `lines` after a blank line, onto `out`; nothing when there are no lines."""
    if lines:
        out += ["", title, *(f"{bullet}{line}" for line in lines)]


def run(args: argparse.Namespace) -> int:
    from autospec.report import answer, build_table, front_json, picks_json, snapshot, study_warnings, table_json
    from autospec.report.model_notes import model_json
    from autospec.report.placement import machines_json, placement_json
    from autospec.report.references import gains_json

    study = open_existing(args)
    data = snapshot(study)
    baseline = baseline_of(data, args.baseline_trial)
    found = answer(data, baseline)
    picks = found.picks
    marks: dict[int, list[str]] = {}
    for name, pick in picks.items():
        marks.setdefault(pick.trial.number, []).append(f"{name} pick")
    table = build_table(data, baseline, marks)
    if args.json:
        out = front_json(data)
        out["baseline"] = None if baseline is None else baseline.number
        out["table"] = table_json(table)
        out["recommendations"] = picks_json(data, picks)
        out["verdict"] = found.verdict
        out["notes"] = study_warnings(data, baseline)
        out["model"] = model_json(data, picks)
        out["placement"] = placement_json(data)
        out["machines"] = machines_json(data)
        out.update(gains_json(data, picks))
        print(json.dumps(out, indent=2, default=str))
        return 0
    print("\n".join(text_lines(found, table, verbose=args.verbose)))
    return 0


def text_lines(found: Answer, table: ParetoTable, verbose: bool = False) -> list[str]:
    """pareto's text: the verdict first (`headline_lines`), then the study's counts, the
    table, the picks' reasons, the references, placement and notes, every line at most
    `WIDTH` characters; the model's predictions and unlaunched candidates with `verbose`."""
    from autospec.report import counts_line, format_text, study_warnings
    from autospec.report.headline import headline_lines
    from autospec.report.model_notes import model_lines
    from autospec.report.placement import machine_lines, placement_lines
    from autospec.report.references import GAINS_LEGEND, gains_lines
    from autospec.report.wrapping import WIDTH, wrap_lines

    data, picks = found.data, found.picks
    out = ["verdict:", *(f"  {line}" for line in headline_lines(found)), "", f"study {data.name}: {counts_line(data)}"]
    if not table.rows:
        out.append("no feasible measured trial yet; run autospec optimize")
        return wrap_lines(out)
    out += ["", *format_text(table, WIDTH).splitlines(), "", "recommendations:"]
    out += [f"  {name:<10} {pick.why}" for name, pick in picks.items()]
    title = f"references measured in this study (configurations of the front like any other); {GAINS_LEGEND}:"
    _section(out, title, gains_lines(data, picks), "  ")
    if verbose:
        _section(out, "the model (--sampler model), before each launch and after the last:", model_lines(data, picks), "  ")
    _section(out, "where the launches ran (hardware class, hosts, slots):", placement_lines(data), "  ")
    _section(out, "machines compared through a control relaunch:", machine_lines(data), "  ")
    _section(out, "notes:", study_warnings(data, found.baseline), "  - ")
    if not verbose and model_lines(data, picks):
        out += ["", "the model's predictions and the configurations it left unlaunched: autospec pareto --verbose"]
    picks_and_formats = "--pick latency|throughput|knee|N --format cmd|yaml|systemd|adaptive"
    out += ["", f"deploy one: autospec export --study {data.name} {picks_and_formats}"]
    return wrap_lines(out, WIDTH)
