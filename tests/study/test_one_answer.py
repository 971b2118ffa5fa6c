"""Every output names the same picks (`autospec.report.answer`): optimize's closing lines,
`autospec pareto`, `pareto --json`, the adaptive export and optuna-dashboard's study note
and figure, on one small simulated study with its reference points."""

from __future__ import annotations

import itertools
import json
import re

import optuna
import optuna_dashboard
import pytest

from autospec.cli.main import main
from autospec.report import snapshot

from .conftest import SIM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]

PICK_LINE = re.compile(r"^\s*(latency|throughput|knee)\s+trial (\d+) ")


def _section(text: str, title: str) -> list[str]:
    """The indented lines under `title` (up to the next line that is not indented), each
    line folded by pareto (`wrapping.wrap_lines`: continued deeper) joined back into one."""
    lines = text.splitlines()
    start = lines.index(title) + 1
    out: list[str] = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        if out and line.startswith("      ") and not line.startswith("       "):
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return out


def _picks(lines: list[str]) -> dict[str, int]:
    return {m[1]: int(m[2]) for line in lines if (m := PICK_LINE.match(line))}


def test_closing_lines_pareto_json_export_and_dashboard_note_name_the_same_picks(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    where = ["--study", "one", "--studies-dir", studies]
    assert main(["optimize", "--space", str(fast_space), *where, "--seed", "2", "--trials", "7", "--references", *SIM_ARGS]) == 0
    printed = capsys.readouterr().out
    closing = _section(printed, "verdict:")
    folded = itertools.takewhile(lambda line: line.startswith("  "), printed.split("verdict:\n", 1)[1].splitlines())
    assert all(len(line) <= 120 for line in folded)  # folded as pareto folds
    closing_picks = _picks(closing)
    assert set(closing_picks) == {"latency", "throughput", "knee"}

    assert main(["pareto", *where]) == 0
    text = capsys.readouterr().out
    assert text.startswith("verdict:\n")  # pareto opens with its verdict
    first = _section(text, "verdict:")
    assert _picks(_section(text, "recommendations:")) == closing_picks

    assert main(["pareto", *where, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    verdict = out["verdict"]
    assert verdict and first[: len(verdict)] == verdict == closing[: len(verdict)]  # the same verdict lines, then the picks
    assert {name: pick["number"] for name, pick in out["recommendations"].items()} == closing_picks
    front = {row["number"] for row in out["front"]}
    for name, pick in out["recommendations"].items():
        assert pick["number"] in front
        assert set(pick) >= {"tied_with", "separated", "launches", "value", "runner_up", "objective"}
        if name != "knee":
            lo, hi = pick["value"]["ci95"] or (pick["value"]["value"],) * 2
            assert lo <= pick["value"]["value"] <= hi and pick["launches"] >= 1
            assert pick["number"] not in pick["tied_with"] and pick["separated"] in (True, False, None)

    storage = f"sqlite:///{tmp_path / 'studies' / 'one.db'}"
    study = optuna.load_study(study_name="one", storage=storage)
    data = snapshot(study)
    for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):  # no feasible point with value 0
        assert any(v > 0 for v in t.constraints.values()) or min(t.values) > 0, t.number
    assert {t.reference for t in data.references} == {"no_speculation", "sglang_defaults", "adaptive"}
    ladder_file = tmp_path / "ladder.json"
    assert main(["export", *where, "--format", "adaptive", "-o", str(ladder_file)]) == 0
    capsys.readouterr()
    meta = json.loads(ladder_file.read_text())["_autospec"]
    slots = meta["measured"]
    assert slots, meta
    for c, slot in slots.items():
        t = data.trial(int(slot["best_trial"]))
        m = t.level_figure(data.objectives, "agg_output_tok_s", int(c))
        assert slot["value"] == pytest.approx(round(m.value, 1))  # the table's pooled figure, not one launch

    note = optuna_dashboard.get_note(study)
    for line in [*verdict, *closing[len(verdict) :]]:
        assert line in note
    from optuna_dashboard._custom_plot_data import get_plotly_graph_objects  # how 0.21.0 reads it back

    figure = json.loads(get_plotly_graph_objects(study._storage.get_study_system_attrs(study._study_id))["autospec-front"])
    texts = {trace["name"]: trace["text"] for trace in figure["data"]}
    front_texts = " ".join(texts["pooled front"])
    assert all(f"trial {n} (" in front_texts for n in front)
    assert all(f"trial {n} (" in " ".join(texts[f"{name} pick"]) for name, n in closing_picks.items())
