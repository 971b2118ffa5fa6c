"""From a finished study to decisions: the Pareto front and its table, recommendations,
exports (launch command, SGLang --config YAML, systemd unit, adaptive ladder), plots and
the report document, and imports of earlier measurements.

`snapshot` reads a study once into a plain `StudyData`; the table, recommendations,
exports and plots are pure functions of it. `document.write_report` writes the report
folder; `importing.trials_to_add` builds the trials an import adds (`TrialStore` writes
them).
"""

from autospec.report.adaptive import Ladder, LadderSlot, adaptive_flags, build_ladder, ladder_json
from autospec.report.answer import Answer, answer, pick_lines, picks_json, verdict_lines
from autospec.report.checks import WARNING_KINDS, TrialWarning, study_warnings, trial_warnings
from autospec.report.data import Measure, Objective, StudyData, TrialView, counts_line, front_json, snapshot
from autospec.report.deploy import Deployment, deployment_for, render_cmd, render_systemd, render_yaml
from autospec.report.recommend import PICKS, Pick, recommend
from autospec.report.table import ParetoTable, build_table, format_markdown, format_text, table_json

__all__ = [
    "counts_line",
    "Answer",
    "answer",
    "pick_lines",
    "picks_json",
    "verdict_lines",
    "Deployment",
    "Ladder",
    "LadderSlot",
    "Measure",
    "Objective",
    "PICKS",
    "ParetoTable",
    "Pick",
    "StudyData",
    "TrialView",
    "TrialWarning",
    "WARNING_KINDS",
    "adaptive_flags",
    "build_ladder",
    "build_table",
    "deployment_for",
    "format_markdown",
    "format_text",
    "front_json",
    "ladder_json",
    "recommend",
    "render_cmd",
    "render_systemd",
    "render_yaml",
    "snapshot",
    "study_warnings",
    "table_json",
    "trial_warnings",
]
