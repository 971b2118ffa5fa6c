"""The first part of the `real-8b-standalone` grid, measured on the H200 with real SGLang 0.5.16
(tests/fixtures/real_8b_standalone_study.db.gz, the study's own SQLite file;
docs/validation/2026-12-04-real-8b-standalone.md): a trained Llama target embedded exactly
into Llama-3-8B's shapes and a trained draft (tools/gpu/build_pair.py), STANDALONE
speculation, held-out code prompts at temperature 0; no speculation and SGLang's defaults
as references, then configurations drawn at random (`--sampler random`).

What the records must still say without a GPU: a trained draft's speculation beats no
speculation at C=1 by more than the issue's 1.3x, beyond the interval `autospec pareto`
computes; and the performance model, fitted on the other launches, predicts the accept
length of a chain it has not seen."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from replay import FIXTURES, pareto_json, unpacked_storage

from autospec.config import load_search_space
from autospec.model import observation_from_record
from autospec.model.performance import PerformanceModel
from autospec.records import TrialRecord

STUDY = "real-8b-standalone"
SPACE = load_search_space(str(FIXTURES.parents[1] / "src" / "autospec" / "search_spaces" / f"{STUDY}.toml"))


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    return unpacked_storage(tmp_path_factory.mktemp("standalone"), "real_8b_standalone_study.db.gz")


@pytest.fixture(scope="module")
def pareto(storage) -> dict:
    return pareto_json(STUDY, storage)


def test_the_trained_draft_beats_no_speculation_at_c1_by_more_than_1_3x(pareto):
    gain = next(g for g in pareto["gains"] if g["reference"] == "no_speculation")
    c1 = gain["objectives"]["output_tok_s@c1"]
    assert c1["verdict"] == "better"
    assert c1["ratio"]["ci95"][0] > 1.3, c1


def _observations(storage: str) -> dict[int, object]:
    study = optuna.load_study(study_name=STUDY, storage=storage)
    out = {}
    for t in study.trials:
        if t.user_attrs.get("outcome") != "ok" or t.user_attrs.get("reference"):
            continue
        record = TrialRecord.from_attrs(t.user_attrs, t.values, {})
        out[t.number] = observation_from_record(record, base_flags=SPACE.server.flags)
    return out


def test_the_model_fitted_on_the_other_launches_predicts_a_chains_accept_length(storage):
    # The searched launches only: the sglang_defaults reference leaves steps, top-k and draft
    # tokens to SGLang (which ran 3/1/4 here), and its record does not say so.
    observations = _observations(storage)
    chain = next(n for n, o in observations.items() if (o.shape.depth, o.shape.width) == (3, 1))
    others = [o for n, o in observations.items() if n != chain]
    assert len(others) >= 2 and {o.shape.depth for o in others} >= {1, 5}
    model = PerformanceModel(others)
    predicted = float(np.median(model.accept_draws(model.draws(np.random.default_rng(0), 200), [observations[chain].shape])))
    measured = observations[chain].value("accept_length", 1)
    assert measured > 3  # a draft that predicts its target: 3.66 of at most 4 tokens per step
    assert predicted == pytest.approx(measured, rel=0.05)
