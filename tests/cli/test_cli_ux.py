"""A CLI that fits in the head: grouped help without the simulator's timing knobs, one
meaning per option name, "did you mean" with the existing names, the only study as the
default, "nothing to do" on a finished study, and an off-grid [baseline] refused. Every
refusal is one line, exit 2, and creates nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import optuna
import pytest

from autospec.cli.main import main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors and --help
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


def one_line_error(code: int, err: str) -> str:
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("autospec: error: "), err
    return err


def test_optimize_help_is_grouped_and_hides_the_simulator_timing_knobs(capsys):
    code, out, _ = run(["optimize", "--help"], capsys)
    assert code == 0
    for group in ("study:", "budget:", "what is measured:", "server:", "GPUs:", "simulator (no GPU needed):"):
        assert f"\n{group}\n" in out, group
    assert "--sim-load-seconds" not in out and "--sim-warmup-seconds" not in out and "--sim-time-scale" not in out
    assert "--sim-profile" in out and "--trials" in out


def test_the_hidden_timing_knobs_still_work_and_are_checked(tmp_path, capsys):
    argv = ["optimize", "--sim", "--sim-time-scale", "0", "--studies-dir", str(tmp_path / "s")]
    assert "--sim-time-scale 0 must be > 0" in one_line_error(*run(argv, capsys)[::2])
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("value", ["0", "nan", "-5", "1..5h", "inf", "-1h", "8x"])
@pytest.mark.parametrize("command", ["optimize", "worker"])
def test_every_bad_timeout_is_one_line_and_exit_2(tmp_path, capsys, value, command):
    argv = [command, "--study", "s", "--studies-dir", str(tmp_path / "s"), f"--timeout={value}"]
    argv += ["--storage", str(tmp_path / "j.log")] if command == "worker" else ["--sim"]
    code, _, err = run(argv, capsys)
    err = one_line_error(code, err)
    assert f"argument --timeout: {value!r}" in err or f"bad duration {value!r}" in err
    assert "e.g. --timeout 8h, 90m, 1h30m or 600 (seconds), or leave --timeout out for no limit" in err
    assert not (tmp_path / "s").exists() and not (tmp_path / "j.log").exists()


def test_a_misspelled_option_suggests_the_right_one(tmp_path, capsys):
    code, _, err = run(["optimize", "--trails", "20", "--sim", "--studies-dir", str(tmp_path / "s")], capsys)
    err = one_line_error(code, err)
    assert "unrecognized arguments: --trails 20; did you mean --trials?" in err
    code, _, err = run(["optimise", "--trials", "3"], capsys)
    assert "invalid choice: 'optimise' (did you mean optimize?)" in one_line_error(code, err)
    assert not (tmp_path / "s").exists()


def test_an_unknown_space_suggests_a_bundled_one(tmp_path, capsys):
    code, _, err = run(["optimize", "--space", "defualt", "--sim", "--studies-dir", str(tmp_path / "s")], capsys)
    err = one_line_error(code, err)
    assert "no bundled space of that name (did you mean default?); pass a .toml path or one of: default, " in err


GOOD = textwrap.dedent("""
    [server.flags]
    model_path = "m"
    [params.speculative_num_steps]
    type = "int"
    low = 1
    high = 10
    [params.mem_fraction_static]
    type = "float"
    low = 0.70
    high = 0.94
    step = 0.02
""")


def make_study(studies: Path, name: str, launched: int) -> None:
    """A study of `GOOD` holding `launched` launched trials, through the study's own storage code."""
    import tomllib

    from autospec.config import parse_search_space
    from autospec.study.storage import open_storage, open_study

    space = parse_search_space(tomllib.loads(GOOD), source="good.toml")
    handle = open_storage(None, name, studies)
    study = open_study(handle, name, space, optuna.samplers.RandomSampler(seed=0))
    for steps in range(1, launched + 1):
        study.add_trial(
            optuna.trial.create_trial(
                params={"speculative_num_steps": steps},
                distributions={"speculative_num_steps": optuna.distributions.IntDistribution(1, 10)},
                values=[100.0, 900.0],
                user_attrs={"launched": True, "outcome": "ok"},
            )
        )


def test_the_only_study_is_the_default_and_several_are_listed(tmp_path, capsys):
    studies = tmp_path / "studies"
    code, _, err = run(["pareto", "--studies-dir", str(studies)], capsys)
    assert f"no study in {studies.absolute()}; run autospec optimize first" in one_line_error(code, err)
    make_study(studies, "alpha", 1)
    code, out, err = run(["pareto", "--studies-dir", str(studies)], capsys)
    assert code == 0 and out.startswith("verdict:") and "\nstudy alpha: 1 trials: 1 launched, 1 measured" in out, err
    make_study(studies, "beta", 1)
    code, _, err = run(["pareto", "--studies-dir", str(studies)], capsys)
    assert f"{studies.absolute()} holds 2 studies (alpha, beta); pick one with --study NAME" in one_line_error(code, err)


def test_an_unknown_study_lists_the_existing_ones(tmp_path, capsys):
    studies = tmp_path / "studies"
    make_study(studies, "default-sim", 1)
    make_study(studies, "other", 1)
    code, _, err = run(["pareto", "--study", "default-sin", "--studies-dir", str(studies)], capsys)
    err = one_line_error(code, err)
    assert "(default-sin.db does not exist there) (did you mean default-sim?); studies there: default-sim, other" in err
    assert not (studies / "default-sin.db").exists()


def test_a_finished_study_says_there_is_nothing_to_do(tmp_path, capsys):
    studies = tmp_path / "studies"
    make_study(studies, "done", 3)
    space = tmp_path / "good.toml"
    space.write_text(GOOD)
    before = (studies / "done.db").read_bytes()
    argv = ["optimize", "--space", str(space), "--study", "done", "--studies-dir", str(studies), "--sim", "--trials", "3"]
    code, out, err = run(argv, capsys)
    assert code == 0 and err == ""
    assert out.strip() == (
        f"study done already holds 3 launched trials (--trials 3): nothing to do; raise --trials to launch more, "
        f"or see the front with: autospec pareto --study done --studies-dir {studies}"
    )
    assert (studies / "done.db").read_bytes() == before
    assert sorted(p.name for p in studies.iterdir()) == ["done.db"]  # no log, no artifacts, no simulator state


OFF_GRID = GOOD + textwrap.dedent("""
    [baseline]
    speculative_num_steps = 12
    mem_fraction_static = 0.83
""")


def test_an_off_grid_baseline_is_refused_with_one_line(tmp_path, capsys):
    """[baseline] steps 12 (range 1..10) and mem 0.83 (grid 0.70 + k x 0.02) would run as
    steps 10 and mem 0.82: not the deployment the user compares against."""
    space = tmp_path / "off.toml"
    space.write_text(OFF_GRID)
    studies = tmp_path / "studies"
    code, _, err = run(["optimize", "--space", str(space), "--studies-dir", str(studies), "--sim", "--baseline"], capsys)
    err = one_line_error(code, err)
    assert f"{space}: [baseline] is not a point of the search space, so --baseline would launch another configuration" in err
    assert "speculative_num_steps = 12 (would run as 10), mem_fraction_static = 0.83 (would run as 0.82)" in err
    assert "set [baseline] to values within [params.*] and on their step grid, or widen those parameters" in err
    assert not studies.exists()


def test_an_on_grid_baseline_passes_the_check():
    from autospec.cli.common import load_space
    from autospec.cli.optimize import check_baseline_on_grid

    space = load_space("default")
    assert space.baseline
    check_baseline_on_grid(space)  # raises UsageError when off the grid


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [(["--baseline", "1"], ["--baseline-trial", "1"], 1)],
)
def test_pareto_baseline_trial_and_its_old_spelling(tmp_path, capsys, old, new, value):
    studies = tmp_path / "studies"
    make_study(studies, "s", 2)
    code, out_new, err = run(["pareto", "--studies-dir", str(studies), "--json", *new], capsys)
    assert code == 0 and err == ""
    code, out_old, err = run(["pareto", "--studies-dir", str(studies), "--json", *old], capsys)
    assert code == 0 and out_old == out_new
    assert err == "autospec: note: --baseline is now --baseline-trial; --baseline goes away in the next release"


def test_bench_names_its_request_timeout_and_prompt_seed_apart_from_optimize(capsys):
    from autospec.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["bench", "--url", "http://x", "--request-timeout", "30", "--prompt-seed", "7"])
    assert (args.request_timeout, args.prompt_seed) == (30.0, 7)
    old = parser.parse_args(["bench", "--url", "http://x", "--timeout", "30", "--seed", "7"])
    assert (old.request_timeout, old.prompt_seed) == (30.0, 7)
    notes = capsys.readouterr().err.splitlines()
    assert notes == [
        "autospec: note: --timeout is now --request-timeout; --timeout goes away in the next release",
        "autospec: note: --seed is now --prompt-seed; --seed goes away in the next release",
    ]
    _, out, _ = run(["bench", "--help"], capsys)
    assert "--request-timeout" in out and "--prompt-seed" in out
    assert "--timeout" not in out.replace("--request-timeout", "").replace("--ready-timeout", "")
    assert "--seed" not in out.replace("--prompt-seed", "")
