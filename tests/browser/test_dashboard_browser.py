"""`autospec dashboard` in a real headless Chromium: the study page draws the Pareto front
with the study's feasible and infeasible trials, and trial artifacts are served.

Chromium is Debian's package (/usr/bin/chromium; .ci/run installs it). The dashboard runs
as a subprocess on a port the OS picks; Chromium is driven over the DevTools protocol
(cdp.py). A screenshot of the plot goes to test-artifacts/dashboard-pareto.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from autospec.cli.main import main
from report.factory import STANDARD, build_study  # tests/ is on sys.path (rootdir-relative packages)

from .cdp import CHROMIUM, Chromium

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# Trace lengths of optuna-dashboard 0.21.0's Pareto-front plot (graph-pareto-front): its
# traces are told apart by their hover templates; x/y hold one entry per drawn trial.
PARETO = """(() => {
  const g = document.getElementById('graph-pareto-front');
  if (!g || !g.data || !g.querySelector('.scatterlayer')) return null;
  const box = g.closest('.MuiCard-root') || g;
  const r = box.getBoundingClientRect();
  return JSON.stringify({
    traces: g.data.map(t => [t.hovertemplate, (t.x || []).length]),
    drawn: g.querySelectorAll('.scatterlayer .trace path.point').length,
    rect: {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height},
  });
})()"""


@pytest.fixture
def dashboard(tmp_path):
    """`autospec dashboard` on the hand-made study (with artifacts) as autospec records one
    today (a duplicate proposal is not a trial); yields (url, made)."""
    made = build_study(tmp_path, [c for c in STANDARD if c.outcome != "duplicate"], artifacts=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autospec.cli.main", "dashboard", *made.args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline().strip()  # the URL, printed once the socket listens
        assert line.startswith("http://127.0.0.1:"), f"no URL from autospec dashboard: {line!r} {proc.stderr.read()}"
        yield line, made
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


@pytest.fixture
def browser(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}; apt-get install chromium (.ci/run does this)")
    chromium = Chromium(tmp_path / "profile", tmp_path / "chromium.log")
    try:
        yield chromium
    finally:
        chromium.close()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_pareto_front_on_the_dashboard_shows_feasible_and_infeasible_trials(dashboard, browser, capsys):
    url, made = dashboard
    study = made.load()
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    infeasible = [t for t in complete if any(v > 0 for v in t.constraints.values())]
    feasible = [t for t in complete if t not in infeasible]
    assert (len(feasible), len(infeasible)) == (7, 4)  # 7 measured; 1 SLO miss + 3 without numbers
    assert main(["pareto", *made.args, "--json"]) == 0
    front = json.loads(capsys.readouterr().out)["front"]

    browser.open_page(url)
    state = json.loads(browser.wait_for(PARETO, timeout=60))
    counts = {template.split("<extra>")[1].split("</extra>")[0]: n for template, n in state["traces"]}
    assert counts["Infeasible Trial"] == len(infeasible)
    assert counts["Feasible Trial"] + counts["Best Trial"] == len(feasible)
    assert counts["Best Trial"] == len(front) == 4  # the dashboard draws the front autospec pareto prints
    assert state["drawn"] == len(complete)  # every point is in the SVG, not only in the data
    assert "made" in browser.evaluate("document.title + document.body.innerText")
    assert "output_tok_s@c1" in browser.evaluate("document.body.innerText")  # objective names are set

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard-pareto.png"
    browser.screenshot(shot, state["rect"])
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trial_artifacts_are_served_from_the_studys_artifact_store(dashboard):
    url, made = dashboard
    base = url.split("/dashboard/")[0]
    study = made.load()
    trial = study.trials[1]
    metas = [json.loads(v) for k, v in trial.system_attrs.items() if k.startswith("artifacts:")]
    assert len(metas) == 1 and metas[0]["filename"] == "trial-0001.log"
    study_id = url.rstrip("/").rsplit("/", 1)[1]
    with urllib.request.urlopen(
        f"{base}/artifacts/{study_id}/{trial._trial_id}/{metas[0]['artifact_id']}", timeout=10
    ) as response:
        body = response.read().decode()
    assert body.startswith("server log of trial 1")


# The pooled front's figure autospec saves (save_plotly_graph_object, id "autospec-front"):
# optuna-dashboard 0.21.0 draws it with plotly into the div "user-defined-plot:<id>".
FIGURE = """(() => {
  const g = document.getElementById('user-defined-plot:autospec-front');
  if (!g || !g.data || !g.querySelector('.scatterlayer')) return null;
  const r = g.getBoundingClientRect();
  return JSON.stringify({
    traces: g.data.map(t => [t.name, t.text || []]),
    drawn: g.querySelectorAll('.scatterlayer .trace path.point').length,
    errorbars: g.querySelectorAll('.errorbar').length,
    rect: {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height},
  });
})()"""


# the body is null while the page loads: poll until the note is drawn
NOTE = """(() => {
  const b = document.body;
  return b && b.innerText.includes('autospec: what to deploy') ? b.innerText : null;
})()"""


def test_the_study_note_and_the_front_figure_show_what_pareto_shows(dashboard, browser, capsys):
    url, made = dashboard
    assert main(["pareto", *made.args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    front = [row["number"] for row in out["front"]]
    picks = {name: pick["number"] for name, pick in out["recommendations"].items()}

    browser.open_page(url)
    state = json.loads(browser.wait_for(FIGURE, timeout=60))
    texts = {name: " ".join(text) for name, text in state["traces"]}
    assert all(f"trial {n} (" in texts["pooled front"] for n in front)  # pareto's front, pooled
    for name, number in picks.items():
        assert f"trial {number} (" in texts[f"{name} pick"]
    assert state["drawn"] >= len(front) + len(set(picks.values()))
    assert state["errorbars"] > 0  # 95% intervals drawn
    shot = ARTIFACTS / "dashboard-autospec-front.png"
    ARTIFACTS.mkdir(exist_ok=True)
    browser.screenshot(shot, state["rect"])
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    browser.open_page(url.rstrip("/") + "/note")  # the study note's page (optuna-dashboard 0.21.0)
    body = browser.wait_for(NOTE, timeout=60)
    assert out["verdict"][0].split(" (")[0] in body  # the verdict, as pareto prints it
    for number in front:
        assert f"| {number} |" not in body  # the note's tables are rendered, not shown as Markdown
    for name, number in picks.items():
        assert f"{name} trial {number} (" in " ".join(body.split())  # the picks, as pareto names them
