"""`autospec capacity` on a simulator study: the reported concurrency holds its bound and the
next level, also measured, breaks it (read from the saved curve, not from timing); the curve is
saved as JSON and CSV and plotted; a SIGTERM during the bisection ends the run with one line
and the files keep every finished level; --timeout ends it too; --compare measures a pick and a
reference under the same bounds side by side; bad input is one line and exit 2."""

from __future__ import annotations

import csv
import json
import signal
from pathlib import Path

import pytest

from autospec.cli.capacity_output import LEVEL_HEADER
from autospec.cli.main import main
from simspace import processes_mentioning, sim_space_text

SIM_ARGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]


@pytest.fixture(scope="module")
def sim_study(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("capacity")
    space = folder / "fast.toml"
    space.write_text(sim_space_text())
    studies = folder / "studies"
    args = ["optimize", "--space", str(space), "--study", "cap", "--studies-dir", str(studies), "--seed", "2", "--trials", "5"]
    assert main([*args, "--references", *SIM_ARGS]) == 0  # two trials of the search, three references
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
    assert LEVEL_HEADER in printed.splitlines()  # a header row above the levels
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


def _bound(studies: Path, capsys) -> float:
    """A TTFT bound a few times the knee's own C=1 TTFT: requests beyond max_running_requests
    queue a whole request, so it breaks well below the highest level."""
    return 3.0 * _knee(studies, capsys)["bench"]["1"]["ttft_ms_p99"]


def _port_of(curve: dict) -> str:
    argv = curve["server"]["argv"]
    return argv[argv.index("--port") + 1]


@pytest.mark.slow
def test_sigterm_during_the_bisection_exits_with_one_line_and_keeps_every_finished_level(sim_study, tuners, capsys):
    bound = _bound(sim_study, capsys)
    knee = _knee(sim_study, capsys)["number"]
    folder = sim_study / "cap-capacity" / f"trial-{knee:04d}"
    for old in folder.glob("capacity.*"):
        old.unlink()
    long_requests = sim_study.parent / "long.toml"  # levels long enough that the signal lands inside one
    long_requests.write_text(sim_space_text().replace("output_len = 24", "output_len = 400"))
    tuner = tuners(
        ["capacity", "--study", "cap", "--studies-dir", str(sim_study), "--pick", "knee", "--space", str(long_requests)]
        + ["--ttft-p99-ms", f"{bound:.3f}", "--max-concurrency", "64", "--sim", "--sim-time-scale", "0.3"]
    ).start()

    def bisecting() -> bool:  # a level broke, and the bisection has levels left to measure
        try:
            curve = json.loads((folder / "capacity.json").read_text())
        except (OSError, ValueError):
            return False
        broke, held = curve["first_broken"], curve["capacity"]
        return broke is not None and broke - (held or 0) > 1

    tuner.wait_until(bisecting, "the first level that broke", timeout_s=240)
    finished = len(json.loads((folder / "capacity.json").read_text())["points"])
    tuner.signal(signal.SIGTERM)
    assert tuner.wait() == 130
    err = tuner.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("autospec: SIGTERM: stopped; ") and f"{folder}/capacity.json and capacity.csv keep the " in err
    curve = json.loads((folder / "capacity.json").read_text())
    levels = [p["concurrency"] for p in curve["points"]]
    assert curve["stopped"] == "SIGTERM" and len(levels) >= finished
    printed_rows = [line.split()[0] for line in tuner.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(c) for c in printed_rows] == levels  # every level that finished is in the file
    assert f"keep the {len(levels)} finished level(s)" in err
    with open(folder / "capacity.csv", newline="") as f:
        assert [int(r["concurrency"]) for r in csv.DictReader(f)] == sorted(levels)
    assert "Traceback" not in tuner.stdout + tuner.stderr
    port = _port_of(curve)  # the server was stopped (another xdist worker's simulator may hold these digits elsewhere)
    assert not [c for c in processes_mentioning(port).values() if f" --port {port} " in f"{c} "]


@pytest.mark.slow
def test_timeout_ends_the_run_and_keeps_the_files(sim_study, capsys):
    """The simulator loads for 2 s (at time scale 1), so a 1 s budget ends before any level."""
    argv = ["capacity", "--study", "cap", "--studies-dir", str(sim_study), "--pick", "knee", "--ttft-p99-ms", "100"]
    assert main([*argv, "--timeout", "1s", "--sim"]) == 1
    out = capsys.readouterr().out
    assert "stopped at --timeout after 0 finished levels: no capacity known under ttft_ms_p99 <= 100" in out
    knee = _knee(sim_study, capsys)["number"]
    curve = json.loads((sim_study / "cap-capacity" / f"trial-{knee:04d}" / "capacity.json").read_text())
    assert curve["stopped"] == "timeout" and curve["points"] == [] and curve["capacity"] is None


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "nan", "-5", "1..5h"])
def test_a_bad_capacity_timeout_is_one_line(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as exc:
        main(["capacity", "--study", "x", "--studies-dir", str(tmp_path), "--ttft-p99-ms", "1", f"--timeout={value}"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "argument --timeout:" in err


@pytest.mark.slow
def test_compare_measures_a_pick_and_a_reference_under_the_same_bounds_side_by_side(sim_study, capsys):
    # loose enough that no speculation (a slower first token than the knee's) holds at C=1 too,
    # also on a loaded machine: this test is about the comparison, not where either breaks
    bound = 4 * _bound(sim_study, capsys)
    knee = _knee(sim_study, capsys)["number"]
    argv = ["capacity", "--study", "cap", "--studies-dir", str(sim_study), "--compare", "knee,no_speculation"]
    code = main([*argv, "--ttft-p99-ms", f"{bound:.3f}", "--max-concurrency", "32", "--waves", "2", *SIM_ARGS[:5]])
    out = capsys.readouterr().out
    assert code == 0, out
    saved = json.loads((sim_study / "cap-capacity" / "compare.json").read_text())
    knee_curve, reference_curve = saved["curves"]
    assert (knee_curve["label"], reference_curve["label"]) == ("knee pick", "reference no_speculation")
    assert knee_curve["trial"] == knee and reference_curve["trial"] != knee
    assert knee_curve["bounds"] == reference_curve["bounds"] == [{"metric": "ttft_ms_p99", "max": pytest.approx(bound, abs=1e-3)}]
    for curve in (knee_curve, reference_curve):  # each configuration's own files hold the same curve
        own = json.loads((sim_study / "cap-capacity" / f"trial-{curve['trial']:04d}" / "capacity.json").read_text())
        assert own["capacity"] == curve["capacity"] is not None and own["points"] == curve["points"]
    lines = out.splitlines()
    header = lines.index(next(line for line in lines if line.startswith("side by side, under ttft_ms_p99 <= ")))
    assert lines[header + 1].split()[:4] == ["configuration", "trial", "capacity", "C"]
    assert lines[header + 3].startswith("knee pick") and lines[header + 4].startswith("reference no_speculation")
    assert lines[header + 3].split()[3] == str(knee_curve["capacity"])
    assert lines[header + 4].split()[3] == str(reference_curve["capacity"])
