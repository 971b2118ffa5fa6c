"""`autospec import`: bench_speculative.py JSONL and other studies become completed trials."""

from __future__ import annotations

import json

import optuna
import pytest

from autospec.cli.main import main
from autospec.config import load_search_space
from autospec.report import snapshot
from autospec.report.importing import plan_from_bench_speculative, read_bench_speculative

# The shape bench_speculative.py appends per run (sgl-project/sglang scripts/playground).
RUNS = [
    {
        "batch_size": 1,
        "steps": 0,
        "topk": 0,
        "num_draft_tokens": 0,
        "acc_length": 1.0,
        "step_time": 0.008,
        "speed": 125.0,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 1,
        "steps": 3,
        "topk": 1,
        "num_draft_tokens": 4,
        "acc_length": 3.2,
        "step_time": 0.012,
        "speed": 266.667,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 32,
        "steps": 3,
        "topk": 1,
        "num_draft_tokens": 4,
        "acc_length": 3.1,
        "step_time": 0.05,
        "speed": 62.0,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 1,
        "steps": 5,
        "topk": 4,
        "num_draft_tokens": 8,
        "acc_length": 4.1,
        "step_time": 0.015,
        "speed": 273.333,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 32,
        "steps": 5,
        "topk": 4,
        "num_draft_tokens": 8,
        "acc_length": 4.0,
        "step_time": 0.09,
        "speed": 44.4,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 1,
        "steps": 2,
        "topk": 2,
        "num_draft_tokens": 4,
        "acc_length": 2.5,
        "step_time": 0.011,
        "speed": 227.2,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 1,
        "steps": 7,
        "topk": 1,
        "num_draft_tokens": 8,
        "acc_length": 5.0,
        "step_time": 0.02,
        "speed": 250.0,
        "completion_tokens": 512.0,
    },
    {
        "batch_size": 32,
        "steps": 7,
        "topk": 1,
        "num_draft_tokens": 8,
        "acc_length": 5.0,
        "step_time": 0.2,
        "speed": 25.0,
        "completion_tokens": 512.0,
    },
]


@pytest.fixture
def runs_file(tmp_path):
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RUNS))
    return path


def test_records_map_onto_autospec_metrics(made):
    space = load_search_space(made.space_path)
    plan = plan_from_bench_speculative(
        read_bench_speculative([json.dumps(r) for r in RUNS], "f"), space, "f", {"mem_fraction_static": 0.8}
    )
    by_steps = {t.candidate["speculative_num_steps"]: t for t in plan.trials}
    assert sorted(by_steps) == [3, 5, 7]
    t = by_steps[3]
    assert t.record.values == [pytest.approx(266.667), pytest.approx(62.0 * 32)]  # C=1 speed; C=32 speed x batch size
    assert t.record.bench[1]["accept_length"] == 3.2
    assert t.record.bench[1]["tpot_ms_mean"] == pytest.approx(1000 * 0.012 / 3.2)
    assert t.record.feasible and t.record.constraints == {}
    assert plan.skipped == [
        "steps=0 topk=0 draft=0: no speculation (steps=0) is outside an autospec search space",
        "steps=2 topk=2 draft=4: cannot form agg_output_tok_s@c32 from batch sizes 1",
    ]


def test_import_into_a_study_once_with_the_dashboard_layout(made_copy, runs_file, capsys):
    args = ["import", "--study", made_copy.name, "--studies-dir", str(made_copy.studies_dir), "--from", str(runs_file)]
    assert main(args) == 0  # the file does not say mem_fraction_static, the space needs it
    out = capsys.readouterr().out
    assert out.startswith("imported 0 trial(s)") and "does not say mem_fraction_static; pass it with --set" in out
    assert main([*args, "--set", "mem_fraction_static=0.84"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("imported 2 trial(s)") and "numbers 13, 14" in out
    study = made_copy.load()
    new = study.trials[13:]
    assert [t.user_attrs["candidate"]["speculative_num_steps"] for t in new] == [3, 5]
    for t in new:
        assert t.state == optuna.trial.TrialState.COMPLETE
        assert t.user_attrs["launched"] is False and t.user_attrs["imported"]["source"] == "bench_speculative.py"
        assert t.system_attrs["constraints"] == [0.0] and t.constraints["feasible"] == 0.0
    assert main([*args, "--set", "mem_fraction_static=0.84"]) == 0
    assert capsys.readouterr().out.startswith("imported 0 trial(s)")  # keys already present
    assert "steps=7 draft=8 is outside the search space" in out  # the space allows 1-6 steps
    data = snapshot(study)
    assert data.trial(13).kind == data.trial(14).kind == "front"  # imported numbers compete on the front
    assert data.trial(3).kind == "dominated"  # 261 / 1400 tok/s: beaten by trial 14's 273 / 1421


def test_values_outside_the_space_are_skipped_with_the_reason(made_copy, runs_file, capsys):
    assert (
        main(
            [
                "import",
                "--study",
                made_copy.name,
                "--studies-dir",
                str(made_copy.studies_dir),
                "--from",
                str(runs_file),
                "--set",
                "mem_fraction_static=0.99",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "steps=3 topk=1 draft=4 mem=0.99: mem=0.99 is outside the search space" in out


def test_a_new_study_is_created_from_the_space(made, runs_file, tmp_path, capsys):
    studies = tmp_path / "fresh"
    assert (
        main(
            [
                "import",
                "--study",
                "fresh",
                "--studies-dir",
                str(studies),
                "--space",
                str(made.space_path),
                "--from",
                str(runs_file),
                "--set",
                "mem_fraction_static=0.8",
            ]
        )
        == 0
    )
    study = optuna.load_study(study_name="fresh", storage=f"sqlite:///{studies / 'fresh.db'}")
    assert study.metric_names == ["output_tok_s@c1", "agg_output_tok_s@c32"]
    assert len(study.trials) == 2
    assert main(["pareto", "--study", "fresh", "--studies-dir", str(studies)]) == 0
    assert "I (imported)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, expected",
    [
        ("not json\n", "output.jsonl:1 is not JSON"),
        ('{"batch_size": 1}\n', "output.jsonl:1 lacks steps, topk"),
        ("\n", "holds no measurement"),
    ],
)
def test_bad_files_are_one_line_errors(made_copy, tmp_path, capsys, content, expected):
    path = tmp_path / "output.jsonl"
    path.write_text(content)
    assert main(["import", "--study", made_copy.name, "--studies-dir", str(made_copy.studies_dir), "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_a_study_with_other_objectives_cannot_be_imported(made, tmp_path, capsys):
    other = tmp_path / "other.toml"
    other.write_text(made.space_path.read_text().replace("concurrency = 32\n", "concurrency = 4\n"))
    assert (
        main(
            [
                "import",
                "--study",
                "x",
                "--studies-dir",
                str(tmp_path / "s"),
                "--space",
                str(other),
                "--from-study",
                made.name,
                "--from-storage",
                made.storage,
            ]
        )
        == 2
    )
    assert "only a study with the same objectives can be imported" in capsys.readouterr().err
