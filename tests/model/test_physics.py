"""The model's physics (`autospec.model.physics`), written once for the fit and the
prediction; its parameters by name (`autospec.model.priors.LAYOUT`); and the request count
each replay uses. Expected values are derived here from the documented forms, or are
launches the physics itself generated with known parameters."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import numpy as np
import pytest

from autospec.model import LevelObservation, Observation, Target
from autospec.model.acceptance import AcceptancePrior
from autospec.model.performance import NOISE, PerformanceModel
from autospec.model.physics import Levels, Rates, ShapeArrays, replay, step_time
from autospec.model.priors import LAYOUT, STEP_PRIORS, prior_vectors
from autospec.model.shape import shape_of

DOCS = Path(__file__).resolve().parents[2] / "docs" / "model.md"
LENGTH = 256.0
#: Known parameters (natural scale): a dense model's step, mostly its floor.
TRUTH = {
    "floor": 10.0,
    "per_verified_token": 0.04,
    "per_request": 0.03,
    "per_draft_pass": 0.5,
    "per_draft_token": 0.01,
    "tree_per_token": 0.02,
    "tree_floor": 0.2,
    "expert_traffic": 0.3,
    "half_experts_tokens": 16.0,
    "prefill_floor": 12.0,
    "prefill_per_request": 0.4,
    "wave_share": 0.8,
}


def rates(**changes: float) -> Rates:
    return Rates(**{name: np.array([[value]]) for name, value in {**TRUTH, **changes}.items()})


def chain_flags(steps: int) -> dict[str, object]:
    return {"speculative_algorithm": "EAGLE", "speculative_num_steps": steps, "speculative_eagle_topk": 1}


def chain(steps: int) -> ShapeArrays:
    return ShapeArrays.of([shape_of(chain_flags(steps))])


def batch_ms(r: Rates, b: float, e: float, shapes: ShapeArrays) -> float:
    """One batch of b requests, by the documented form: prefill, then (L - 1) / E steps."""
    t = float(step_time(r, np.array([b]), shapes)[0, 0])
    return float(r.prefill_floor[0, 0] + r.prefill_per_request[0, 0] * b + (LENGTH - 1.0) / e * t)


def level(r: Rates, e: float, shapes: ShapeArrays, *, c: int, n: float, cap: float):
    return replay(r, np.array([[e]]), shapes, Levels(float(c), np.array([n]), LENGTH, np.array([cap])))


def test_the_step_is_the_sum_of_its_named_terms():
    shapes = chain(3)  # D = 4 verified tokens, S = 3 draft passes, topk 1, no tree
    b = 8.0
    bd = b * 4
    expected = 10.0 + 0.04 * bd + 0.03 * b + 0.5 * 3 + 0.01 * 3 * b * 1 + 0.3 * (1 - 2 ** (-bd / 16.0))
    assert float(step_time(rates(), np.array([b]), shapes)[0, 0]) == pytest.approx(expected)


def test_lockstep_requests_run_in_waves_the_last_one_partial():
    """n = 64, R = 21: three full waves and one of a single request (physics docstring)."""
    shapes, e = chain(3), 2.5
    r = rates(wave_share=1.0)
    waves = 3 * batch_ms(r, 21, e, shapes) + batch_ms(r, 1, e, shapes)
    assert float(level(r, e, shapes, c=32, n=64, cap=21).aggregate[0, 0]) == pytest.approx(64 * LENGTH * 1000.0 / waves)


def test_drifting_requests_keep_every_slot_busy_whatever_their_number():
    shapes, e = chain(3), 2.5
    r = rates(wave_share=0.0)
    fluid = 21 * LENGTH * 1000.0 / batch_ms(r, 21, e, shapes)
    for n in (63, 64, 200):
        assert float(level(r, e, shapes, c=32, n=n, cap=21).aggregate[0, 0]) == pytest.approx(fluid)
    # a whole number of waves is the same in both forms; a partial last wave costs the wave form
    mixed = rates()
    whole, partial = level(mixed, e, shapes, c=32, n=63, cap=21), level(mixed, e, shapes, c=32, n=64, cap=21)
    assert float(whole.aggregate[0, 0]) == pytest.approx(fluid)
    assert float(partial.aggregate[0, 0]) < float(whole.aggregate[0, 0])


def test_a_request_waits_behind_the_cap_and_reads_its_figures_off_the_batch():
    shapes, e = chain(3), 2.5
    r = rates()
    fits = level(r, e, shapes, c=16, n=32, cap=21)
    assert float(fits.per_request[0, 0]) == pytest.approx(LENGTH * 1000.0 / batch_ms(r, 16, e, shapes))
    queued = level(r, e, shapes, c=32, n=64, cap=21)
    assert float(queued.per_request[0, 0]) == pytest.approx(float(queued.aggregate[0, 0]) / 32)
    assert float(fits.ttft[0, 0]) == pytest.approx(12.0 + 0.4 * 16)
    t16 = float(step_time(r, np.array([16.0]), shapes)[0, 0])
    assert float(fits.decode[0, 0]) == pytest.approx(1000.0 * e / t16)
    assert float(fits.tpot[0, 0]) == pytest.approx(t16 / e)  # one whole wave: every request's step is t(16)


# ---------------------------------------------------------------------- fit and prediction


def launch(steps: int, requests: int, cap: int, *, truth: Rates | None = None) -> Observation:
    """A launch whose figures the physics computes from known parameters (accept length
    measured, as SGLang reports it: E * L / (L - 1))."""
    truth = truth or rates()
    flags = chain_flags(steps)
    shapes = ShapeArrays.of([shape_of(flags)])
    e = 1.0 + sum(0.7**j for j in range(1, steps + 1))
    levels = {}
    for c, n in ((1, 8), (32, requests)):
        f = level(truth, e, shapes, c=c, n=n, cap=cap)
        levels[c] = LevelObservation(
            c,
            output_tok_s=float(f.per_request[0, 0]),
            agg_output_tok_s=float(f.aggregate[0, 0]),
            accept_length=e * LENGTH / (LENGTH - 1.0),
            tpot_ms=float(f.tpot[0, 0]),
            ttft_ms=float(f.ttft[0, 0]) if c == 1 else None,
            n_requests=n,
            output_len=LENGTH,
        )
    return Observation(flags, "ok", max_running_requests=cap, levels=levels)


TARGETS = [Target("output_tok_s", 1), Target("agg_output_tok_s", 32), Target("tpot_ms_mean", 32)]
#: Launches of the adaptive benchmark: each level sent its own number of requests.
LAUNCHES = [launch(1, 64, 21), launch(2, 63, 21), launch(3, 96, 21), launch(4, 70, 21), launch(5, 64, 48)]


def test_the_fit_reproduces_launches_the_physics_made_each_at_its_own_request_count():
    model = PerformanceModel(LAUNCHES)
    shapes = [o.shape for o in LAUNCHES]
    caps = np.array([[float(o.max_running_requests or 0) for o in LAUNCHES]])
    requests = model.requests_of(LAUNCHES, TARGETS)
    assert requests[:, 1].tolist() == [64, 63, 96, 70, 64]
    predicted = model.figures(model.params, shapes, caps, TARGETS, requests)[0]
    measured = np.array([[o.value(t.metric, t.concurrency) for t in TARGETS] for o in LAUNCHES])
    within_noise = np.array([NOISE["out"], NOISE["agg"], NOISE["tpot"]])  # what the fit was told each figure is worth
    assert np.all(np.abs(np.log(predicted / measured)) <= within_noise), predicted / measured
    # one count for every launch (the first's, as before) cannot: a partial last wave is not a whole one
    first = np.full_like(requests, 64.0)
    first[:, 0] = requests[:, 0]
    wrong = model.figures(model.params, shapes, caps, TARGETS, first)[0]
    assert np.abs(np.log(wrong[:, 1] / measured[:, 1])).max() > 3 * NOISE["agg"]


def test_a_configuration_not_launched_is_replayed_with_the_studys_typical_request_count():
    model = PerformanceModel(LAUNCHES)
    assert model.typical_requests(32) == statistics.median([64, 63, 96, 70, 64])
    assert model.typical_requests(8) == 16  # no launch ran C=8: two waves
    unlaunched = launch(3, 64, 21)  # steps 3 at the typical count (64)
    predicted = model.figures(model.params, [unlaunched.shape], np.array([[21.0]]), TARGETS)[0, 0]
    measured = [unlaunched.value(t.metric, t.concurrency) for t in TARGETS]
    assert np.all(np.abs(np.log(predicted / measured)) <= [NOISE["out"], NOISE["agg"], NOISE["tpot"]]), predicted / measured


# ---------------------------------------------------------------------- parameters by name


def test_every_parameter_has_one_place_a_prior_and_a_documented_meaning():
    assert len(set(LAYOUT.names)) == len(LAYOUT.names)
    mean, sd = prior_vectors(20.0, AcceptancePrior(), ngram=False)
    assert mean.shape == sd.shape == (len(LAYOUT),) and np.all(sd > 0)
    documented = set(re.findall(r"^\| `(\w+)` \|", DOCS.read_text(), flags=re.MULTILINE))
    assert set(LAYOUT.names) <= documented, f"docs/model.md, Priors, lacks {sorted(set(LAYOUT.names) - documented)}"


def test_step_priors_scale_with_the_single_request_step_time():
    """One table serves a 1 ms and a 60 ms step: a prior stated as a share of t1 moves by
    log 60 on the log scale, an absolute one (tokens, a share) not at all."""
    slow, fast = ({p.name: p.prior(t1).mean for p in STEP_PRIORS} for t1 in (60.0, 1.0))
    for p in STEP_PRIORS:
        assert slow[p.name] - fast[p.name] == pytest.approx(np.log(60.0) if p.per_step else 0.0)
    r = Rates.of(LAYOUT, LAYOUT.vector({**slow, **dict.fromkeys(LAYOUT.names[LAYOUT.block("acceptance")], 0.0)}))
    assert float(r.floor[0, 0]) == pytest.approx(0.8 * 60.0) and float(r.wave_share[0, 0]) == pytest.approx(0.5)


def test_a_layout_refuses_a_vector_without_every_name():
    with pytest.raises(ValueError, match="floor"):
        LAYOUT.vector({name: 0.0 for name in LAYOUT.names if name != "floor"})
