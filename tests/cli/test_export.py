"""`autospec export`: picks, files, and bad input (one line naming problem and fix, exit 2)."""

from __future__ import annotations

import pytest

from autospec.cli.main import main
from report.factory import Config, build_study  # tests/ is on sys.path (rootdir-relative packages)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("export"))


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("autospec: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--pick", "fastest"], "--pick 'fastest' is not known; use latency, throughput, knee or a trial number"),
        (["--pick", "8"], "trial 8 of study 'made' has no measurement (outcome rejected)"),
        (["--pick", "42"], "trial 42 of study 'made' does not exist"),
        (["--format", "cmd"], "--pick is required for this format"),
        (["--pick", "knee", "--port", "0"], "--port 0 is not a TCP port"),
        (["--pick", "knee", "--flag", "model_path"], "needs NAME=VALUE"),
        (["--pick", "knee", "--baseline-trial", "9"], "--baseline-trial 9: trial 9 has no measurement"),
        (["--pick", "knee", "--env", "A B=1"], "--env 'A B=1' needs NAME=VALUE"),
    ],
)
def test_bad_input_is_one_line_with_the_fix(made, capsys, argv, expected):
    assert main(["export", *made.args, *argv]) == 2
    assert expected in _error(capsys)


@pytest.mark.parametrize(
    "pick, expected",
    [
        ("foo", "--pick 'foo' is not known; use latency, throughput, knee or a trial number"),
        ("99", "--pick 99: trial 99 of study 'made' does not exist"),
        ("-1", "--pick '-1' is not known; use latency, throughput, knee or a trial number"),
        ("8", "--pick 8: trial 8 of study 'made' has no measurement (outcome rejected)"),
    ],
)
def test_pick_is_checked_for_the_adaptive_ladder_too(made, tmp_path, capsys, pick, expected):
    target = tmp_path / "ladder.json"
    assert main(["export", *made.args, "--format", "adaptive", "--pick", pick, "-o", str(target)]) == 2
    assert expected in _error(capsys)
    assert not target.exists()


def test_the_adaptive_ladder_takes_a_valid_pick_or_none(made, capsys):
    assert main(["export", *made.args, "--format", "adaptive"]) == 0
    ladder = capsys.readouterr().out
    for pick in ("knee", "2"):
        assert main(["export", *made.args, "--format", "adaptive", "--pick", pick]) == 0
        assert capsys.readouterr().out == ladder


def test_a_missing_study_names_the_absolute_folder_it_looked_in(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    assert main(["export", "--study", "nope", "--studies-dir", "elsewhere", "--pick", "knee"]) == 2
    err = _error(capsys)
    assert f"no study 'nope' in {tmp_path / 'elsewhere'} (nope.db does not exist there)" in err
    assert "point --studies-dir at the folder that holds nope.db, or pass --storage" in err
    assert not (tmp_path / "elsewhere" / "nope.db").exists()


def test_output_file_is_written_and_announced(made, tmp_path, capsys):
    target = tmp_path / "sglang.service"
    assert main(["export", *made.args, "--pick", "latency", "--format", "systemd", "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and f"wrote {target}: systemd for trial 2 (latency pick)" in captured.err
    assert target.read_text().startswith("# systemd unit exported by autospec from study 'made', trial 2")


def test_yaml_needs_a_yaml_suffix_because_sglang_checks_it(made, tmp_path, capsys):
    assert main(["export", *made.args, "--pick", "knee", "--format", "yaml", "-o", str(tmp_path / "x.txt")]) == 2
    assert "only with a .yaml or .yml suffix" in _error(capsys)
    assert not (tmp_path / "x.txt").exists()


def test_unwritable_output_is_a_usage_error(made, tmp_path, capsys):
    assert main(["export", *made.args, "--pick", "knee", "-o", str(tmp_path / "no" / "dir" / "x.sh")]) == 2
    assert "cannot write" in _error(capsys)


def test_adaptive_needs_topk1_eagle_measurements(tmp_path, capsys):
    trees = build_study(tmp_path, [Config(steps=3, topk=4, draft=8, c1=200.0, c32=1000.0)], name="trees")
    assert main(["export", *trees.args, "--format", "adaptive"]) == 2
    assert "no measured EAGLE/EAGLE3/MTP configuration with speculative_eagle_topk=1" in _error(capsys)
    assert main(["export", *trees.args, "--pick", "0", "--adaptive-config", "/x.json"]) == 2
    capsys.readouterr()
    assert main(["export", *trees.args, "--pick", "0"]) == 0
    assert "--speculative-eagle-topk 4" in capsys.readouterr().out


def test_numbers_picks_and_baseline_change_the_latency_pick(made, capsys):
    assert main(["export", *made.args, "--pick", "latency"]) == 0
    assert "trial 2 (latency pick)" in capsys.readouterr().out
    # against trial 5 (1370 tok/s at C=32) every front configuration qualifies: the fastest at C=1 wins
    assert main(["export", *made.args, "--pick", "latency", "--baseline-trial", "5"]) == 0
    assert "trial 3 (latency pick)" in capsys.readouterr().out
