"""The study snapshot, the Pareto table (uncertainty, ratios, warnings, legend) and the
`autospec pareto` output built from them."""

from __future__ import annotations

import json
import math

import pytest

from autospec.cli.main import main
from autospec.report import build_table, format_markdown, format_text, front_json, snapshot, study_warnings, table_json
from autospec.report.data import Measure, parse_objective
from autospec.report.table import ratio


def test_snapshot_classifies_every_trial(data):
    kinds = {t.number: t.kind for t in data.trials}
    assert {n for n, k in kinds.items() if k == "front"} == {1, 2, 3, 4}
    assert {n for n, k in kinds.items() if k == "dominated"} == {0, 5, 6}
    assert {n for n, k in kinds.items() if k == "infeasible"} == {7, 8, 9, 10}
    assert kinds[11] == "duplicate" and kinds[12] == "interrupted"
    measured_infeasible = [t.number for t in data.of_kind("infeasible") if t.measured]
    assert measured_infeasible == [7]  # the SLO violation has real numbers; the others worst-case stand-ins
    assert [t.number for t in data.front] == [3, 1, 2, 4]  # best first on output_tok_s@c1
    assert data.baseline_trial().number == 0
    assert data.latency_objective == 0 and data.throughput_objective == 1


def test_front_json_is_built_from_the_snapshot(data):
    out = front_json(data)
    assert set(out) == {"study", "objectives", "front", "counts"}
    assert out["objectives"] == [
        {"name": "output_tok_s@c1", "direction": "maximize"},
        {"name": "agg_output_tok_s@c32", "direction": "maximize"},
    ]
    assert [f["number"] for f in out["front"]] == [t.number for t in data.front]
    assert set(out["front"][0]) == {"number", "params", "values", "reference"}
    assert out["counts"] == {
        "measured": 7,
        "infeasible": 4,
        "duplicate": 1,
        "relaunch": 0,
        "reference": 0,
        "failed": 0,
        "interrupted": 1,
        "running": 0,
        "launched": 9,
    }


def test_objective_names_parse_into_metric_concurrency_and_unit():
    o = parse_objective("agg_output_tok_s@c32", "maximize")
    assert (o.metric, o.concurrency, o.unit) == ("agg_output_tok_s", 32, "tok/s")
    assert o.label == "aggregate output throughput at C=32 (tok/s)"
    assert parse_objective("tpot_ms_p90@c4", "minimize").unit == "ms"
    assert parse_objective("custom", "minimize").concurrency is None


def test_ratio_propagates_both_half_widths():
    r = ratio(Measure(110.0, 2.2), Measure(100.0, 1.0))
    assert r.value == pytest.approx(1.1)
    assert r.half_width == pytest.approx(1.1 * math.hypot(0.02, 0.01))
    assert ratio(Measure(110.0, None), Measure(100.0, 1.0)).half_width is None
    assert ratio(Measure(1.0), None) is None


def test_table_rows_carry_uncertainty_tpot_accept_length_max_requests_and_ratios(data):
    table = build_table(data, data.baseline_trial())
    rows = {r.number: r for r in table.rows}
    assert list(rows) == [3, 1, 2, 4]
    r = rows[1]
    assert r.objectives[0].value == 250.0 and r.objectives[0].half_width == pytest.approx(2.5)
    assert r.objectives[1].value == 1650.0 and r.objectives[1].half_width == pytest.approx(16.5)
    assert r.tpot.value == pytest.approx(1000 / (250 * 1.05)) and table.tpot_concurrency == 1
    assert r.accept_length.value == pytest.approx(4.2)
    assert r.max_running_requests == 15
    assert r.ratios[0].value == pytest.approx(250 / 220)
    assert r.ratios[1].value == pytest.approx(1650 / 1700)
    assert table.baseline.number == 0 and table.baseline.marks == ["baseline"]  # off the front, still listed


def test_typed_warnings_name_what_is_wrong(data):
    rows = {r.number: r for r in build_table(data, data.baseline_trial()).rows}
    assert [w.kind for w in rows[3].warnings] == ["few-samples"]
    assert "n=6" in rows[3].warnings[0].detail
    assert [w.code for w in rows[4].warnings] == ["V", "E", "R"]
    assert rows[1].warnings == []


def test_text_table_has_every_column_and_a_legend_for_the_codes_used(data):
    table = build_table(data, data.baseline_trial(), {1: ["knee pick"]})
    text = format_text(table)
    header = text.splitlines()[0]
    for column in (
        "trial",
        "configuration",
        "output_tok_s@c1",
        "agg_output_tok_s@c32",
        "TPOT@c1 ms",
        "accept@c1",
        "max_req",
        "vs base output_tok_s@c1",
        "warn",
    ):
        assert column in header
    assert "250.0 +-2.5" in text and "x1.14 +-0.02" in text and "knee pick" in text
    assert "S (few-samples)" in text and "R (kv-retraction)" in text and "I (imported)" not in text
    lines = [line for line in text.splitlines() if line[:5].strip().isdigit()]
    assert [int(line.split()[0]) for line in lines] == [3, 1, 2, 4, 0]


def test_without_a_baseline_there_are_no_ratio_columns(data):
    text = format_text(build_table(data, None))
    assert "vs base" not in text and "ratio to the baseline" not in text


def test_markdown_and_json_forms(data):
    table = build_table(data, data.baseline_trial())
    md = format_markdown(table)
    assert md.startswith("| trial | configuration |") and "250.0 ±2.5" in md
    rows = table_json(table)
    assert rows[-1]["number"] == 0 and rows[-1]["on_front"] is False
    assert rows[1]["objectives"]["output_tok_s@c1"] == {
        "value": 250.0,
        "half_width": pytest.approx(2.5),
        "n": 40,
        "launches": 1,
        "pooled_with": [],
    }
    json.dumps(rows)


def test_pareto_cli_prints_table_recommendations_and_json(made, capsys):
    assert main(["pareto", *made.args]) == 0
    out = capsys.readouterr().out
    assert "(4 on the Pareto front)" in out and "recommendations:" in out
    assert "latency    trial 2" in out and "throughput trial 4" in out and "knee       trial 1" in out
    assert main(["pareto", *made.args, "--baseline-trial", "5"]) == 0
    assert "ratio to the baseline, trial 5" in capsys.readouterr().out
    assert main(["pareto", *made.args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"] == 0 and doc["recommendations"]["knee"]["number"] == 1
    assert {"study", "objectives", "front", "counts", "table", "notes"} <= set(doc)


def test_pareto_cli_rejects_a_baseline_that_was_not_measured(made, capsys):
    assert main(["pareto", *made.args, "--baseline-trial", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "trial 8 has no measurement" in err
    assert main(["pareto", *made.args, "--baseline-trial", "99"]) == 2
    assert "has no trial 99" in capsys.readouterr().err


def test_snapshot_of_an_empty_study(tmp_path):
    import optuna

    study = optuna.create_study(directions=["maximize", "maximize"])
    data = snapshot(study)
    assert data.front == [] and data.baseline_trial() is None
    assert build_table(data).rows == []


def test_the_notes_name_the_figures_that_left_out_a_one_off_stall(tmp_path, capsys):
    from .factory import Config, build_study

    made = build_study(tmp_path, [Config(steps=3, c1=220.0, c32=1700.0), Config(steps=4, c1=250.0, c32=1650.0, stall_s=3.25)])
    notes = study_warnings(snapshot(made.load()), None)
    stalls = [n for n in notes if n.startswith("one-off stalls")]
    assert stalls == [
        "one-off stalls left out of steady windows (a pause that did not come back, as when a server "
        "meets a batch shape for the first time; docs/figures.md): "
        f"trial {made.numbers[1]} agg_output_tok_s@c32 (3.2 s)"
    ]
    assert main(["pareto", *made.args]) == 0
    assert f"trial {made.numbers[1]} agg_output_tok_s@c32 (3.2 s)" in capsys.readouterr().out


def test_short_window_intervals_are_flagged_and_named_and_contradicted_race_stops_noted(tmp_path):
    """Every figure shows its interval; one from a window under 3 waves carries F, and
    JSON names the method; a race stop the drained level did not confirm is a note."""
    import optuna

    from .factory import Config, build_study

    configs = [
        Config(steps=2, c1=180.0, c32=2100.0, c32_method="short-window", rel_hw=0.08, c32_race="contradicted"),
        Config(steps=4, c1=250.0, c32=1500.0, c32_method="batch-means"),
        Config(steps=5, c1=240.0, c32=1400.0, c32_method="batch-means", c32_race="confirmed"),
    ]
    made = build_study(tmp_path, configs)
    data = snapshot(optuna.load_study(study_name=made.name, storage=made.storage))
    table = build_table(data, None)
    flagged = {row.number: [w.code for w in row.warnings] for row in table.rows}
    assert "F" in flagged[0] and "F" not in flagged[1]
    text = format_text(table)
    assert "2100.0 +-168.0" in text and "F (few-waves)" in text
    rows = {r["number"]: r for r in table_json(table)}
    assert rows[0]["objectives"]["agg_output_tok_s@c32"]["interval_method"] == "short-window"
    assert rows[1]["objectives"]["agg_output_tok_s@c32"]["interval_method"] == "batch-means"
    assert all(m["half_width"] is not None for r in rows.values() for m in r["objectives"].values())
    notes = [n for n in study_warnings(data, None) if n.startswith("race stops")]
    assert len(notes) == 1 and "trial 0 C=32 (contradicted)" in notes[0] and "trial 2" not in notes[0]
    assert {t.number for t in data.front} == {0, 1}  # a contradicted stop does not keep a trial off the front
