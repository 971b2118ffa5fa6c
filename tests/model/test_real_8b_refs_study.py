"""A default study of `real-8b-ngram` with its references, on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_ngram_refs_study.db.gz: the study's own SQLite file, and its events
log beside it; docs/validation/2026-12-03-h200-8b-references-confirmation.md, "References and confirmation on the 8B-shaped
target"): no speculation and SGLang's NGRAM defaults, four search launches and the default
confirmation (a quarter of --trials 8: two relaunches), read back through `autospec pareto`.

What the records must still say without a GPU: every launch measured within 30% of its
launch time; every figure of the front and of each reference carries a 95% interval; the
picks rest on pooled launches whose spread shows; and no speculation, which this random-
weight target's partial acceptance cannot beat, is named as unbeaten."""

from __future__ import annotations

import optuna
import pytest
from replay import pareto_json, unpacked_storage

STUDY = "real-8b-ngram"


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    return unpacked_storage(tmp_path_factory.mktemp("refs"), "real_8b_ngram_refs_study.db.gz")


@pytest.fixture(scope="module")
def pareto(storage) -> dict:
    return pareto_json(STUDY, storage)


def launched(storage: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=STUDY, storage=storage)
    return [t for t in study.trials if t.user_attrs.get("outcome") == "ok"]


def test_every_launch_measured_within_30_percent_of_its_launch_time(storage):
    trials = launched(storage)
    assert len(trials) == 8
    for t in trials:
        seconds = t.user_attrs["seconds"]
        assert seconds["bench"] <= 0.30 * seconds["launch"], (t.number, seconds)


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


def test_no_speculation_is_on_the_front_and_the_throughput_pick(pareto, storage):
    front = {row["number"]: row for row in pareto["front"]}
    none = next(ref for ref in pareto["references"] if ref["name"] == "no_speculation")
    assert front[none["number"]]["reference"] == "no_speculation"  # a deployable configuration of the front
    throughput = pareto["recommendations"]["throughput"]
    assert throughput["number"] == none["number"] and throughput["reference"] == "no_speculation"
    assert throughput["objective"] == "agg_output_tok_s@c32" and throughput["separated"] is True
    # the sentence gives the best tuned configuration's ratio to it, from the pooled figures
    from autospec.report import snapshot

    data = snapshot(optuna.load_study(study_name=STUDY, storage=storage))
    tuned = max((t for t in data.measured if t.reference is None), key=lambda t: t.value(1))
    ratio = tuned.value(1) / throughput["value"]["value"]
    assert f"trial {tuned.number} (" in throughput["why"] and f"reads x{ratio:.2f}" in throughput["why"]
    assert ratio < 1.0  # the tuned configuration loses to the pick it is compared with
    assert "It is the reference point no_speculation: the best tuned configuration, trial" in throughput["why"]
    assert any("deploy trial" in line and "no_speculation" in line for line in pareto["verdict"])


def test_the_tuned_configurations_pool_their_two_launches(storage):
    from autospec.report import snapshot

    data = snapshot(optuna.load_study(study_name=STUDY, storage=storage))
    tuned = [t for t in data.measured if t.reference is None and t.launches == 2]
    assert tuned, "the confirmation relaunches pool into tuned configurations"
    for t in tuned:
        values = [x.values[1] for x in launched(storage) if t.number in (x.number, x.user_attrs.get("confirm_of"))]
        assert len(values) == 2
        assert t.objective_measure(data.objectives[1], 1).value == pytest.approx(sum(values) / 2)  # pooled: the mean
