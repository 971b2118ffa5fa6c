"""`pareto --json`, `pareto`, `report` and optuna-dashboard show the same Pareto front.

Checked on studies as autospec writes them today: a study run through the simulator
(proposals SGLang rejects and duplicates never become trials, so the dashboard, which
draws every COMPLETE trial, has nothing extra to draw), with and without reference points
(told their real values: configurations of every front, the dashboard's included) and the
hand-made standard study
without its legacy duplicate trial. The dashboard is asked through its own API
(`/api/studies/<id>`, optuna-dashboard 0.21.0), in process.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pytest

from autospec.cli.main import main
from autospec.report import snapshot
from autospec.report.data import dominates

from .factory import STANDARD, build_study

pytestmark = pytest.mark.usefixtures("no_leftover_sims")


def _json_front(args: list[str], capsys) -> tuple[set[int], int | None]:
    assert main(["pareto", *args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return {row["number"] for row in out["front"]}, out["baseline"]


def _table_numbers(text: str) -> set[int]:
    """Trial numbers of the rows of a `pareto` / report table (first column)."""
    return {int(m.group(1)) for m in re.finditer(r"^\|?\s*(\d+)\s*\|?\s+\S", text, re.M)}


def _text_front(args: list[str], capsys, baseline: int | None, front: set[int]) -> set[int]:
    assert main(["pareto", *args]) == 0
    text = capsys.readouterr().out
    table = text[text.index("\ntrial ") :].split("\n\n")[0]  # after the verdict and the counts: the table
    rows = _table_numbers(table)
    return rows - ({baseline} if baseline is not None and baseline not in front else set())


def _report_front(args: list[str], folder: Path, capsys, baseline: int | None, front: set[int]) -> set[int]:
    assert main(["report", *args, "-o", str(folder)]) == 0
    capsys.readouterr()
    markdown = (folder / "report.md").read_text()
    table = markdown[markdown.index("| trial |") :].split("\n\n")[0]
    rows = _table_numbers("\n".join(table.splitlines()[2:]))
    return rows - ({baseline} if baseline is not None and baseline not in front else set())


def _dashboard_front(storage: str, study_name: str) -> set[int]:
    import optuna
    import optuna_dashboard

    study = optuna.load_study(study_name=study_name, storage=storage)
    app = optuna_dashboard.wsgi(storage)
    status: list[str] = []
    environ: dict = {"PATH_INFO": f"/api/studies/{study._study_id}", "wsgi.errors": io.StringIO()}
    setup_testing_defaults(environ)
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status and status[0].startswith("200"), status
    return {t["number"] for t in json.loads(body)["best_trials"]}


def _check_agreement(args: list[str], storage: str, name: str, tmp_path: Path, capsys) -> set[int]:
    front, baseline = _json_front(args, capsys)
    assert front, "a study with measurements has a front"
    assert _text_front(args, capsys, baseline, front) == front
    assert _report_front(args, tmp_path / "report", capsys, baseline, front) == front
    assert _dashboard_front(storage, name) == front
    return front


@pytest.mark.parametrize("references", ["--no-references", "--references"])
def test_the_four_fronts_agree_on_a_simulator_study(tmp_path, capsys, references):
    from simspace import sim_space_text

    space = tmp_path / "space.toml"
    # trees are rejected with paged triton: never trials. optuna-dashboard sees each launch as a
    # point of its own: it cannot pool the figures of configurations that differ only in the KV
    # pool's size either (the same server at a level the pool did not limit), so the memory
    # fraction is fixed here and the steps alone vary
    text = sim_space_text(topk=(1, 2))
    mem = text[text.index("[params.mem_fraction_static]") : text.index("[workload]")]
    text = text.replace(mem, "").replace("page_size = 16\n", "page_size = 16\nmem_fraction_static = 0.84\n")
    # steps 4-7: none of the search resolves to SGLang's own choice for the simulated model (steps 3,
    # mem 0.85), whose C=1 figure would pool with it (the same server there, only the pool differs)
    steps = text[text.index("[params.speculative_num_steps]") :]
    space.write_text(text.replace(steps, steps.replace("low = 1\nhigh = 4", "low = 4\nhigh = 7", 1)))
    studies = tmp_path / "studies"
    args = ["--study", "agree", "--studies-dir", str(studies)]
    assert (
        main(
            [
                "optimize",
                "--space",
                str(space),
                *args,
                "--trials",
                str(4 + (3 if references == "--references" else 0)),  # the four configurations, and the references
                "--seed",
                "4",
                "--sim",
                "--sim-load-seconds",
                "0.1",
                "--sim-time-scale",
                "0.2",
                "--quiet",
                references,
                # optuna-dashboard sees each launch as a point of its own: it cannot pool a
                # confirmation relaunch into the trial it confirms, so the four fronts agree
                # on studies without confirmation launches
                "--confirm",
                "0",
            ]
        )
        == 0
    )
    capsys.readouterr()
    import optuna

    study = optuna.load_study(study_name="agree", storage=f"sqlite:///{studies / 'agree.db'}")
    assert all(t.user_attrs["launched"] for t in study.trials)  # no rejected proposal became a trial
    front = _check_agreement(args, f"sqlite:///{studies / 'agree.db'}", "agree", tmp_path, capsys)
    refs = {t.number for t in study.trials if t.user_attrs.get("reference")}
    assert len(refs) == (3 if references == "--references" else 0)
    assert all(t.values and min(t.values) > 0 for t in study.trials if t.number in refs)  # never a feasible 0
    # a reference is on every front (the dashboard's included) exactly where nothing dominates it
    data = snapshot(study)
    for t in data.references:
        beaten = any(dominates(o.values, t.values, data.objectives) for o in data.measured if o is not t)
        assert (t.number in front) == (not beaten), t.reference


def test_the_four_fronts_agree_on_the_standard_study(tmp_path, capsys):
    configs = [c for c in STANDARD if c.outcome != "duplicate"]  # duplicates are not recorded as trials any more
    made = build_study(tmp_path, configs)
    front = _check_agreement(made.args, made.storage, made.name, tmp_path, capsys)
    assert front == {1, 2, 3, 4}
