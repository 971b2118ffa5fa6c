"""The memory model against real launches: EAGLE on the 8B-shaped random-weight target at
several `mem_fraction_static` values, measured with real SGLang 0.5.16 on an H200
(tests/fixtures/real_8b_eagle_mem.json, from tools/gpu/eagle_mem_sweep.sh; the study's
launches plus one launch below SGLang's minimum; docs/real-gpu-validation.md, "The memory
model on the 8B-shaped target").

Each launch is predicted from the launches before it, in the order the study made them, as
the model sampler predicts before it launches: the KV pool and the running-request cap
within 10% of what SGLang reported, and the failure below the minimum foreseen and its
message classified. What the launches measured (pools from 0.105 to 0.6 of the GPU, growing
with the fraction) is in docs/validation/2026-12-03-h200-8b-eagle-memory-model.md."""

from __future__ import annotations

import json

import numpy as np
from replay import FIXTURES, load_grid

from autospec.launcher.classify import classify_failure
from autospec.launcher.errors import KvPoolTooSmall
from autospec.model import observation_from_record
from autospec.model.memory import MemoryModel
from autospec.model.shape import shape_of

DATA = json.loads((FIXTURES / "real_8b_eagle_mem.json").read_text())
SPACE, RECORDS = load_grid("real_8b_eagle_mem.json")
ORDER = list(RECORDS.values())  # in launch order, as the fixture lists them
MEM = "mem_fraction_static"


def _observations(records):
    return [observation_from_record(r, base_flags=SPACE.server.flags) for r in records]


def _predict(earlier, candidate):
    """(pool tokens, running-request cap, p_start) the model predicts for `candidate` from
    the `earlier` records."""
    model = MemoryModel(_observations(earlier), [""] * len(earlier))
    shape = shape_of({**SPACE.server.flags, **candidate})
    prediction = model.predict([shape], [""])
    pool = float(prediction.pool_mean[0])
    return pool, float(model.cap([shape], np.array([pool]))[0]), float(prediction.p_start[0])


def test_each_launch_is_predicted_from_the_ones_before_it_within_ten_percent():
    for i in range(1, len(ORDER)):
        pool, cap, p_start = _predict(ORDER[:i], ORDER[i].candidate)
        reported = ORDER[i].startup
        assert abs(pool - reported["max_total_num_tokens"]) <= 0.10 * reported["max_total_num_tokens"], (i, pool)
        assert abs(cap - reported["max_running_requests"]) <= 0.10 * reported["max_running_requests"], (i, cap)
        assert p_start > 0.5


def test_the_launch_below_sglangs_minimum_is_foreseen_and_its_message_classified():
    failure = DATA["failures"][0]
    pool, _, p_start = _predict(ORDER, failure["candidate"])
    assert pool < 0 and p_start < 0.05
    error = classify_failure("\n".join(failure["log"]), -9)
    assert isinstance(error, KvPoolTooSmall)
    # the one-line error names the problem and the fix, with the launch's own fraction
    message = str(error)
    assert message.startswith("no GPU memory left for the KV cache")
    assert f"--mem-fraction-static={failure['candidate'][MEM]}" in message and "raise --mem-fraction-static" in message
