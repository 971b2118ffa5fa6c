"""tools/gpu/export_best.py: the launch command of a front trial, with the port replaced."""

from __future__ import annotations

import shlex
from pathlib import Path

import optuna

from .gpu_scripts import load

export_best = load("export_best")

ARGV = [
    "/venv/bin/python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/tmp/sgmodels/m",
    "--speculative-num-steps",
    "4",
    "--mem-fraction-static",
    "0.05",
    "--host",
    "127.0.0.1",
    "--port",
    "43751",
]


def _study(path: Path, trials: list[tuple[list[float], bool, list[str] | None]]) -> str:
    storage = f"sqlite:///{path}"
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "maximize"])
    for values, feasible, server_args in trials:
        trial = study.ask()
        trial.set_user_attr("launched", True)
        trial.set_user_attr("outcome", "ok" if feasible else "kv_pool_too_small")
        trial.set_user_attr("candidate", {"speculative_num_steps": 4})
        trial.set_user_attr("server_args", server_args)
        trial.set_constraint("feasible", 0.0 if feasible else 1.0)
        study.tell(trial, values)
    return storage


def test_with_port_replaces_every_port_word():
    assert export_best.with_port(["x", "--port", "1", "--port=2", "--host", "h"], 9) == ["x", "--host", "h", "--port", "9"]


def test_prints_the_best_trials_argv_with_the_new_port(tmp_path, capsys):
    storage = _study(tmp_path / "s.db", [([465.1, 1530.9], True, ARGV), ([999.0, 9999.0], False, ARGV)])
    assert export_best.main(["--storage", storage, "--study", "s", "--port", "30000"]) == 0
    out, err = capsys.readouterr()
    words = shlex.split(out)
    assert words[:3] == ARGV[:3]
    assert words[-2:] == ["--port", "30000"] and "43751" not in words
    assert "trial 0" in err and "465.1" in err


def test_no_feasible_trial_is_a_one_line_error(tmp_path, capsys):
    storage = _study(tmp_path / "s.db", [([0.0, 0.0], False, ARGV)])
    assert export_best.main(["--storage", storage, "--study", "s"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no feasible measured trial" in err and len(err.strip().splitlines()) == 1


def test_a_front_trial_without_server_args_is_refused(tmp_path, capsys):
    storage = _study(tmp_path / "s.db", [([1.0, 1.0], True, None)])
    assert export_best.main(["--storage", storage, "--study", "s"]) == 1
    assert "no server_args" in capsys.readouterr().err
