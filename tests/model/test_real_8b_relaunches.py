"""Launches of two fixed configurations of `real-8b-ngram` on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_pin_{a,b}_relaunches.db.gz, each a study's own SQLite file;
docs/real-gpu-validation.md, "Launches of one configuration on the 8B-shaped target"): the
space narrowed to one configuration (tools/gpu/pin_space.py) and studied with `--remeasure
--no-references --confirm 0`, so every trial is a new launch of the same server: NGRAM with 8
draft tokens and the default trie (a) and with 2 draft tokens and a chain (b), four launches
each over two sessions (2026-12-03; a's first and third on a fresh machine).

What the report must compute from these records without a GPU: the launches of one
configuration pooled into one row resting on all of them (a trial measured again with
`--remeasure` is a relaunch of the first, not a configuration of its own), the
between-launch spread of their stored figures (`metrics.relaunch`) reported and included in
the pooled interval, and exactly the levels whose launches disagree beyond their own
intervals named. The figures themselves (a's fresh-machine first launch 20% above the
others at C=32, b's four within their intervals) are in
docs/validation/2026-12-03-h200-8b-launches-of-one-configuration.md."""

from __future__ import annotations

import gzip
import math
import statistics

import optuna
import pytest
from replay import FIXTURES

from autospec.metrics.relaunch import LaunchFigure, between_launch_spread, pool_launches
from autospec.report.data import snapshot
from autospec.report.support import disagreeing_launches


def load(tmp_path, name: str) -> optuna.Study:
    path = tmp_path / f"{name}.db"
    path.write_bytes(gzip.decompress((FIXTURES / f"real_8b_{name}_relaunches.db.gz").read_bytes()))
    return optuna.load_study(study_name=name.replace("_", "-"), storage=f"sqlite:///{path}")


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


def stored_launches(study: optuna.Study, name: str) -> list[LaunchFigure]:
    """Objective `name` of every launch of the pinned configuration, as stored: value and 95% half-width."""
    out = []
    for t in study.trials:
        if t.user_attrs.get("outcome") == "ok":
            lo, hi = t.user_attrs["intervals"][name]["ci95"]
            out.append(LaunchFigure(t.user_attrs["intervals"][name]["value"], (hi - lo) / 2))
    return out


def test_the_spread_of_the_stored_launches_widens_the_pooled_interval_and_disagreeing_levels_are_named(tmp_path):
    named = []
    for name in ("pin_a", "pin_b"):
        study = load(tmp_path, name)
        data = snapshot(study)
        [row] = data.measured
        expected_named = []
        for i, objective in enumerate(data.objectives):
            launches = stored_launches(study, objective.name)
            spread = between_launch_spread([launches])
            assert spread is not None and data.spread[objective.name].cv == pytest.approx(spread.cv)
            pooled = row.objective_measure(objective, i)
            expected = pool_launches(launches, data.spread[objective.name])
            assert pooled is not None and expected.half is not None
            assert pooled.value == pytest.approx(expected.value) and pooled.half_width == pytest.approx(expected.half)
            assert pooled.half_width >= (expected.within_half or 0.0)  # never narrower than measuring alone
            if any(
                abs(a.value - b.value) > math.hypot(a.half or 0.0, b.half or 0.0)
                for j, a in enumerate(launches)
                for b in launches[j + 1 :]
            ):
                expected_named.append(f"C={objective.concurrency}")
        assert disagreeing_launches(data, row) == expected_named, name
        named.append(bool(expected_named))
    assert any(named) and not all(named)  # the fixtures hold both cases: launches that disagree and launches that do not
