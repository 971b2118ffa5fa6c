"""The `real-8b-standalone` grid on four H100s with real SGLang 0.5.16
(tests/fixtures/real_8b_standalone_grid_h100.db.gz; docs/validation/2026-12-06-h100-control-and-grid.md,
2026-12-06-h100-grid-continued.md, 2026-12-07-h100-grid-and-default-study-finished.md and
2026-12-07-h100-grid-complete.md): all 30 of the space's configurations and both references, each level's records holding SGLang's
per-request `spec_correct_drafts_histogram`.

What the code must compute from these records without a GPU: the accept histogram each level
kept agrees with the accept length the level reports; the model, fitted on the mean accept
lengths of the other configurations' launches, predicts every launch's accept length (6/1/7
was launched on two builds of the pair, which accept 5.91 and 5.58); and the acceptance by
depth is graded as the issue asks (its spread between the best and the worst configuration).
The model's prediction is checked on the same pair at temperature 1 as well."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import optuna
import pytest
from tests.model.replay import pareto_json, unpacked_storage

from autospec.records import read_trials

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import accept_by_depth


@pytest.fixture(scope="module")
def trials(tmp_path_factory) -> list:
    storage = unpacked_storage(tmp_path_factory.mktemp("grid"), "real_8b_standalone_grid_h100.db.gz")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return read_trials(optuna.load_study(study_name="real-8b-standalone-grid", storage=storage))


def test_each_levels_histogram_gives_the_accept_length_it_reports(trials) -> None:
    checked = 0
    by_number = {t.number: t for t in trials}
    for launch in accept_by_depth.launches(trials):
        for level in by_number[launch.number].record.bench.values():
            histogram = level["accept_by_depth"]
            verifies = sum(histogram)
            full = 1 + sum(k * n for k, n in enumerate(histogram)) / verifies  # tokens per verify step, uncut
            # the level's figure counts the tokens each request emitted: its last verify step may be cut
            # short by the output length, by at most the drafted tokens it accepted (len - 1), and its
            # first token came from the prefill, not from a verify step
            per_request = level["n_ok"] / verifies
            low, high = full - per_request * (len(histogram) - 1), full + per_request
            assert low - 1e-9 <= level["accept_length"] <= high + 1e-9, (launch.number, histogram)
            checked += 1
    assert checked >= 20


@pytest.fixture(scope="module")
def rows(trials) -> list:
    return accept_by_depth.rows(trials)  # one model fit per launch


def test_the_model_fitted_without_a_launch_predicts_its_accept_length(rows) -> None:
    """Within 5% where the other launches of its top-k reach its depth; 10% where the launch
    is the deepest of its top-k, so that its prediction extrapolates (the model's acceptance
    falls with depth by construction, and this draft's chains keep about 0.94 per position)."""
    assert len(rows) >= 20 and {r.topk for r in rows} == {1, 2, 4}
    errors = []
    for r in rows:
        extrapolated = not any(o.topk == r.topk and o.steps >= r.steps and (o.steps, o.draft) != (r.steps, r.draft) for o in rows)
        errors.append(abs(math.log(r.predicted / r.measured)))
        assert errors[-1] <= (0.10 if extrapolated else 0.05), r
    assert statistics.median(errors) <= 0.02


def test_acceptance_is_graded_across_the_grid_and_by_depth(rows) -> None:
    lengths = [r.measured for r in rows]
    assert max(lengths) - min(lengths) >= 1.0  # the spread, here 1.96 to 5.57
    for r in rows:
        assert len(r.reached) == r.steps and all(x >= y for x, y in zip(r.reached, r.reached[1:], strict=False))


def test_sampled_the_model_fitted_without_a_launch_predicts_its_accept_length(tmp_path) -> None:
    """The same pair at temperature 1 (`real-8b-standalone-sampled`: 18 launches on four H100s and
    four builds of the pair, tests/fixtures/real_8b_standalone_sampled_h100.db.gz;
    docs/validation/2026-12-07-h100-pair-check-and-sampled.md and later runs). A drafted token is accepted
    with probability min(1, p/q), 1.4-2.6 tokens per step where greedy decoding accepted
    2.0-5.9; the model's acceptance is fitted per study, so it must find the lower curve
    from these launches alone. Read at C=32, whose levels held 64-194 requests: sampled, a C=1
    level's accept length moves with which of its 4-20 prompts it measured (5/1/6 accepted 2.09
    over 15 prompts at C=1 and 1.92 over 139 requests at C=32)."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_sampled_h100.db.gz")
    trials = read_trials(optuna.load_study(study_name="real-8b-standalone-sampled", storage=storage))
    sampled = accept_by_depth.rows(trials, level=32)
    assert len(sampled) >= 12 and {r.topk for r in sampled} == {1, 2, 4}
    errors = {r.number: abs(math.log(r.predicted / r.measured)) for r in sampled}
    assert max(errors.values()) < math.log(1.08), errors
    assert statistics.median(errors.values()) <= 0.03


def test_each_control_is_compared_with_the_machine_the_study_moved_from(trials) -> None:
    """The grid moved over four H100s, each move opened by a control relaunch of 6/1/7 (trials
    15, 30, 35): each control's factor is its machine over the one its configuration ran on
    before it, never over a machine the study reached only later (trial 30 was once read over
    trial 35's machine)."""
    from autospec.records.launches import ObjectiveRef
    from autospec.records.machines import machine_factors

    by_number = {t.number: t for t in trials}
    factors = machine_factors(trials, ObjectiveRef(0, "output_tok_s", 1), None)
    assert [f.control for f in factors] == [15, 30, 35]
    order = list(dict.fromkeys(t.machine for t in sorted(trials, key=lambda t: t.number) if t.machine))
    assert len(order) == 4
    for f in factors:
        assert f.new == by_number[f.control].machine and order.index(f.old) == order.index(f.new) - 1


def test_sampled_speculation_wins_at_c1_and_loses_at_c32_against_no_speculation(tmp_path) -> None:
    """At temperature 1 the pair accepts 1.5-2.6 tokens a step, too few to pay for drafting in a
    full batch (docs/validation/2026-12-07-h100-sampled-warm-up.md): the report must find the
    trade-off from the records, making the no-speculation reference the throughput pick and
    showing the latency pick's gain over it paired and separated in both directions."""
    storage = unpacked_storage(tmp_path, "real_8b_standalone_sampled_h100.db.gz")
    report = pareto_json("real-8b-standalone-sampled", storage)
    picks = report["recommendations"]
    assert picks["throughput"]["reference"] == "no_speculation"
    assert picks["latency"]["reference"] is None
    [gain] = [g for g in report["gains"] if "latency" in g["picks"] and g["reference"] == "no_speculation"]
    c1, c32 = (gain["objectives"][k]["paired"] for k in ("output_tok_s@c1", "agg_output_tok_s@c32"))
    assert c1["paired"] and c1["separated"] and c1["lo"] > 1.3
    assert c32["paired"] and c32["separated"] and c32["hi"] < 1.0
    # against its runner-up (5/1/6: 4 waves, 3 after the ramp) the throughput pick cannot pair, and
    # says what would make the next launches pair; the latency pick paired over requests needs no hint
    assert "unpaired: only 3 waves matched" in picks["throughput"]["why"]
    assert "and trial 11's 3 waves after the first are fewer" in picks["throughput"]["why"]
    assert "[bench] requests_multiplier = 5, where the space sets fewer" in picks["throughput"]["why"]
    assert "requests_multiplier" not in picks["latency"]["why"]
