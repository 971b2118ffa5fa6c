"""`autospec capacity` on a simulator study: the reported concurrency holds its bound and the
next level, also measured, breaks it (read from the saved curve, not from timing); the curve is
saved as JSON and CSV and plotted; bad input is one line and exit 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from autospec.cli.main import main
from simspace import sim_space_text

SIM_ARGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture(scope="module")
def sim_study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("capacity")
    space = folder / "fast.toml"
    space.write_text(sim_space_text())
    studies = folder / "studies"
    args = ["optimize", "--space", str(space), "--study", "cap", "--studies-dir", str(studies), "--seed", "2", "--trials", "3"]
    assert main([*args, *SIM_ARGS]) == 0
    return studies


def _knee(studies: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["pareto", "--study", "cap", "--studies-dir", str(studies), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    number = out["recommendations"]["knee"]["number"]
    import optuna

    study = optuna.load_study(study_name="cap", storage=f"sqlite:///{studies / 'cap.db'}")
    return {"number": number, "bench": study.trials[number].user_attrs["bench"]}


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_the_reported_concurrency_holds_its_bound_and_the_next_level_breaks_it(sim_study, capsys):
    knee = _knee(sim_study, capsys)
    # A bound a few times the pick's own C=1 TTFT: requests beyond max_running_requests queue a
    # whole request, so the bound breaks well below --max-concurrency.
    bound = 3.0 * knee["bench"]["1"]["ttft_ms_p99"]
    argv = ["capacity", "--study", "cap", "--studies-dir", str(sim_study), "--pick", "knee"]
    assert main([*argv, "--ttft-p99-ms", f"{bound:.3f}", "--max-concurrency", "64", "--waves", "2"]) == 0
    printed = capsys.readouterr().out
    folder = sim_study / "cap-capacity" / f"trial-{knee['number']:04d}"
    curve = json.loads((folder / "capacity.json").read_text())
    assert curve["trial"] == knee["number"] and curve["pick"] == "knee"
    points = {p["concurrency"]: p for p in curve["points"]}
    capacity = curve["capacity"]
    assert capacity is not None and curve["first_broken"] == capacity + 1
    held, broke = points[capacity], points[capacity + 1]
    assert held["holds"] and held["summary"]["ttft_ms_p99"] <= bound
    assert not broke["holds"] and broke["summary"]["ttft_ms_p99"] > bound
    assert all(p["summary"]["ttft_ms_p99"] <= bound for c, p in points.items() if p["holds"])
    assert all(not p["holds"] for c, p in points.items() if c > capacity)  # the search never looked past a break
    assert f"capacity C={capacity} under ttft_ms_p99 <= " in printed
    assert curve["server"]["argv"][1:3] == ["-m", "autospec.sim"]

    with open(folder / "capacity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["concurrency"]) for r in rows] == sorted(points)
    assert {r["holds"] for r in rows if int(r["concurrency"]) == capacity} == {"True"}
    assert (folder / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (folder / "capacity.html").read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give at least one latency bound, e.g. --ttft-p99-ms 2000"),
        (["--ttft-p99-ms", "0"], "--ttft-p99-ms 0 must be a positive number of milliseconds"),
        (["--ttft-p99-ms", "100", "--start", "8", "--max-concurrency", "4"], "need 1 <= start <= max"),
    ],
)
def test_bad_bounds_are_one_line_and_exit_2(tmp_path, capsys, extra, message):
    assert main(["capacity", "--study", "none", "--studies-dir", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_pick_that_is_not_in_the_study_is_one_line(sim_study, capsys):
    assert main(["capacity", "--study", "cap", "--studies-dir", str(sim_study), "--pick", "99", "--ttft-p99-ms", "100"]) == 2
    err = capsys.readouterr().err
    assert "--pick 99: trial 99 of study 'cap' does not exist" in err and err.count("\n") == 1
