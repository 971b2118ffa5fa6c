"""A default study of `real-8b-ngram` with its references, on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_ngram_refs_study.db.gz: the study's own SQLite file, and its events
log beside it; docs/real-gpu-validation.md, "References and confirmation on the 8B-shaped
target"): no speculation and SGLang's NGRAM defaults, four search launches and the default
confirmation (a quarter of --trials 8: two relaunches), read back through `autospec pareto`.

What `autospec pareto` must compute from these records without a GPU: every figure of the
front and of each reference with a 95% interval; each gain the pick's pooled value over the
reference's, its verdict following its interval and each reference's verdict following its
gains; each row the mean of its launches, and a pick's note naming exactly the levels where
its launches disagree beyond their own intervals. What the run measured (measuring within
30% of the launch, no speculation unbeaten at C=32) is in
docs/validation/2026-12-03-h200-8b-references-confirmation.md."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import statistics

import optuna
import pytest
from replay import FIXTURES

from autospec.cli.main import main
from autospec.metrics.relaunch import LaunchFigure

STUDY = "real-8b-ngram"


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("refs") / "study.db"
    path.write_bytes(gzip.decompress((FIXTURES / "real_8b_ngram_refs_study.db.gz").read_bytes()))
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def pareto(storage) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["pareto", "--study", STUDY, "--storage", storage, "--json"]) == 0
    return json.loads(out.getvalue())


def launched(storage: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=STUDY, storage=storage)
    return [t for t in study.trials if t.user_attrs.get("outcome") == "ok"]


def launch_figures(storage: str, number: int) -> list[dict[str, LaunchFigure]]:
    """Trial `number`'s launch and its relaunches, each objective's stored value and 95% half-width."""
    out = []
    for t in launched(storage):
        if t.number == number or t.user_attrs.get("confirm_of") == number:
            intervals = t.user_attrs["intervals"]
            out.append({name: LaunchFigure(i["value"], (i["ci95"][1] - i["ci95"][0]) / 2) for name, i in intervals.items()})
    return out


def test_the_front_and_the_references_carry_intervals_and_gains(pareto):
    assert pareto["counts"]["reference"] == 2 and pareto["counts"]["relaunch"] == 2
    for row in pareto["table"]:
        for name, figure in row["objectives"].items():
            assert 0 < figure["half_width"] < figure["value"], (row["number"], name)
    for ref in pareto["references"]:
        for name, figure in ref["objectives"].items():
            assert 0 < figure["half_width"] < figure["value"], (ref["name"], name)
    for gain in pareto["gains"]:
        for name, entry in gain["objectives"].items():
            lo, hi = entry["ratio"]["ci95"]
            assert lo < entry["ratio"]["value"] < hi, (gain["reference"], name)


def test_each_gain_is_the_picks_value_over_the_references_and_the_verdicts_follow_the_intervals(pareto):
    rows = {row["number"]: row for row in pareto["table"]}
    refs = {ref["name"]: ref for ref in pareto["references"]}
    per_reference: dict[str, list[set[str]]] = {}
    for gain in pareto["gains"]:
        pick, ref = rows[gain["number"]], refs[gain["reference"]]
        for name, entry in gain["objectives"].items():
            assert entry["ratio"]["value"] == pytest.approx(pick["objectives"][name]["value"] / ref["objectives"][name]["value"])
            lo, hi = entry["ratio"]["ci95"]
            assert entry["verdict"] == ("within noise" if lo <= 1.0 <= hi else "worse" if hi < 1.0 else "better")  # maximised
        per_reference.setdefault(gain["reference"], []).append({e["verdict"] for e in gain["objectives"].values()})
    for name, verdicts in per_reference.items():  # the rule of autospec.report.references
        if all("better" in v and "worse" not in v for v in verdicts):
            expected = "beaten"
        elif not any("better" in v for v in verdicts) and any("worse" in v for v in verdicts):
            expected = "unbeaten"
        else:
            expected = "mixed"
        assert refs[name]["verdict"] == expected, name
    assert {ref["verdict"] for ref in pareto["references"]} != {"mixed"}  # the fixture decides at least one


def test_each_row_is_the_mean_of_its_launches_and_a_pick_names_where_they_disagree(pareto, storage):
    rows = {row["number"]: row for row in pareto["table"]}
    for number, row in rows.items():
        launches = launch_figures(storage, number)
        assert ("mean of 2 launches" in row["marks"]) == (len(launches) == 2)
        for name, figure in row["objectives"].items():
            assert figure["launches"] == len(launches)
            assert figure["value"] == pytest.approx(statistics.fmean(f[name].value for f in launches))
    named = 0
    for kind in ("latency", "throughput"):
        pick = pareto["recommendations"][kind]
        assert pick["number"] in rows  # on the front
        launches = launch_figures(storage, pick["number"])
        differ = [
            f"C={name.rsplit('@c', 1)[1]}"
            for name in (o["name"] for o in pareto["objectives"])
            if any(
                abs(a[name].value - b[name].value) > math.hypot(a[name].half or 0.0, b[name].half or 0.0)
                for i, a in enumerate(launches)
                for b in launches[i + 1 :]
            )
        ]
        if differ:
            assert f"its launches disagree beyond their own intervals at {', '.join(differ)}" in pick["why"]
            named += 1
        else:
            assert "disagree" not in pick["why"]
    assert named  # the fixture's relaunch disagrees with its first launch somewhere
