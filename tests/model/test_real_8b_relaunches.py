"""Launches of two fixed configurations of `real-8b-ngram` on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_pin_{a,b}_relaunches.db.gz, each a study's own SQLite file;
docs/real-gpu-validation.md, "Launches of one configuration on the 8B-shaped target"): the
space narrowed to one configuration (tools/gpu/pin_space.py) and studied with `--remeasure
--no-references --confirm 0`, so every trial is a new launch of the same server: NGRAM with 8
draft tokens and the default trie (a: 2 launches, a third was cut by the device's time
limit), and with 2 draft tokens and a chain (b: 3 launches).

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


@pytest.mark.parametrize(("name", "launches"), [("pin_a", 2), ("pin_b", 3)])
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
    # b's three launches (2,420 / 2,495 / 2,561 tok/s at C=32, sd 2.8%) lie within their own
    # intervals (+-12-27%): no spread beyond the measuring error
    assert b.spread[c32].cv == 0.0 and disagreeing_launches(b, b.measured[0]) == []
    # a's two launches, 3,192 +-6.0% and 2,663 +-10.1%, disagree beyond them: the spread (12%)
    # is measured and the pooled interval is wider than either launch's own
    assert a.spread[c32].cv > 0.10
    assert disagreeing_launches(a, a.measured[0]) == ["C=32"]
    pooled = a.measured[0].objective_measure(a.objectives[index], index)
    launch_halves = [m.half_width for m in (t.objective_measure(a.objectives[index], index) for t in a.of_kind("relaunch")) if m]
    assert pooled is not None and pooled.half_width > max([0.101 * 2663, *launch_halves])
