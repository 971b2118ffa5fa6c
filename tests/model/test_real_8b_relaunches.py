"""Launches of two fixed configurations of `real-8b-ngram` on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_pin_{a,b}_relaunches.db.gz, each a study's own SQLite file;
docs/real-gpu-validation.md, "Launches of one configuration on the 8B-shaped target"): the
space narrowed to one configuration (tools/gpu/pin_space.py) and studied with `--remeasure
--no-references --confirm 0`, so every trial is a new launch of the same server: NGRAM with 8
draft tokens and the default trie (a) and with 2 draft tokens and a chain (b), four launches
each over two sessions (2026-12-03; a's first and third on a fresh machine).

What the records must still say without a GPU: the launches of one configuration are pooled
into one row resting on all of them (a trial measured again with `--remeasure` is a
relaunch of the first, not a configuration of its own), the between-launch spread they
show is reported and included in the pooled interval, and launches that disagree beyond
their own intervals are named."""

from __future__ import annotations

import gzip
import statistics

import optuna
import pytest
from replay import FIXTURES

from autospec.report.data import StudyData, snapshot
from autospec.report.support import disagreeing_launches


def load(tmp_path, name: str) -> optuna.Study:
    path = tmp_path / f"{name}.db"
    path.write_bytes(gzip.decompress((FIXTURES / f"real_8b_{name}_relaunches.db.gz").read_bytes()))
    return optuna.load_study(study_name=name.replace("_", "-"), storage=f"sqlite:///{path}")


def study_data(tmp_path, name: str) -> StudyData:
    return snapshot(load(tmp_path, name))


@pytest.mark.parametrize(("name", "launches"), [("pin_a", 4), ("pin_b", 4)])
def test_the_launches_of_one_configuration_pool_into_one_row(tmp_path, name, launches):
    study = load(tmp_path, name)
    measured = [t.user_attrs["values"] for t in study.trials if t.user_attrs.get("outcome") == "ok"]
    assert len(measured) == launches
    data = snapshot(study)
    [row] = data.measured
    relaunches = data.of_kind("relaunch")
    assert row.launches == launches and len(relaunches) == launches - 1
    assert all(t.confirm_of == row.number for t in relaunches)
    for i in range(len(data.objectives)):
        assert row.value(i) == pytest.approx(statistics.fmean(v[i] for v in measured))


def test_the_spread_between_launches_widens_the_pooled_interval_and_disagreeing_launches_are_named(tmp_path):
    a, b = study_data(tmp_path, "pin_a"), study_data(tmp_path, "pin_b")
    c32 = next(o.name for o in b.objectives if o.concurrency == 32)
    index = next(i for i, o in enumerate(a.objectives) if o.name == c32)
    # b's four launches (2,420 / 2,495 / 2,561 / 2,357 tok/s at C=32, sd 3.4%) lie within their
    # own intervals (+-5.5-27%): no spread beyond the measuring error
    assert b.spread[c32].cv == 0.0 and disagreeing_launches(b, b.measured[0]) == []
    # a's launches, 3,192 +-6.0% (a fresh machine's first) against 2,663 +-10.1%, 2,569 +-20.4%
    # and 2,640 +-5.3%, disagree beyond them: the spread (8.6%, 1 sd) is measured and the pooled
    # interval is wider than the measuring error of four launches alone allows
    assert 0.05 < a.spread[c32].cv < 0.12
    assert disagreeing_launches(a, a.measured[0]) == ["C=32"]
    pooled = a.measured[0].objective_measure(a.objectives[index], index)
    launches = [a.measured[0].number, *(t.number for t in a.of_kind("relaunch"))]
    study = load(tmp_path, "pin_a")
    halves = [(hi - lo) / 2 for lo, hi in (study.trials[n].user_attrs["intervals"][c32]["ci95"] for n in launches)]
    measuring_alone = 1.96 * (sum((h / 1.96) ** 2 for h in halves) / len(halves)) ** 0.5 / len(halves) ** 0.5
    assert pooled is not None and pooled.half_width > 1.5 * measuring_alone
