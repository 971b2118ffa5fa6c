"""The draft KV-cache dtype in the memory model (sglang 0.5.23 pool sizing,
`autospec.model.draft_kv`): an EAGLE draft in fp8 leaves its pool's saving free, a DFLASH
draft in fp8 enlarges the pool, NGRAM has no draft pool; launches in either dtype teach
the same fit.

The launches are made with the pool formula of 0.5.23 on the sizes of a real 0.5.16 H200
log (data/real-sglang-0.5.16-h200/eagle.log: 2957975 tokens, target K+V 90.28 GB, draft
5.64 GB, both bf16, 139.13 GB before loading)."""

from __future__ import annotations

import numpy as np
import pytest

from autospec.model.draft_kv import DraftKv, draft_kv_of
from autospec.model.memory import MemoryModel
from autospec.model.observation import Observation
from autospec.model.shape import shape_of

TOKENS = 2957975
T_GB = 90.28 / TOKENS  # target KV GB per token
D_GB = 5.64 / TOKENS  # draft KV GB per token, bf16
PRE, WEIGHTS, GRAPHS = 139.13, 16.0, 1.4
BF16, FP8 = "torch.bfloat16", "torch.float8_e4m3fn"
EAGLE = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 3, "speculative_eagle_topk": 1}
DFLASH = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 8}


def launch(flags: dict, mem: float) -> Observation:
    """A launch as sglang 0.5.23 sizes it: the budget over target + draft per-token cost,
    the draft charged in the target's dtype for EAGLE and in its own for DFLASH."""
    fp8 = flags.get("speculative_draft_kv_cache_dtype") == "fp8_e4m3"
    block = flags["speculative_algorithm"] == "DFLASH"
    draft = D_GB / 2 if fp8 else D_GB
    tokens = int((mem * PRE - WEIGHTS) / (T_GB + (draft if block else D_GB)))
    freed = 0.0 if block else tokens * (D_GB - draft)
    return Observation(
        flags={**flags, "mem_fraction_static": mem},
        outcome="ok",
        max_total_num_tokens=tokens,
        max_running_requests=48,
        available_gpu_mem_gb=(1 - mem) * PRE - GRAPHS + freed,
        gpu_mem_before_load_gb=PRE,
        kv_cache_gb=tokens * T_GB,
        kv_cache_dtype=BF16,
        draft_kv_cache_gb=tokens * draft,
        draft_kv_cache_dtype=FP8 if fp8 else BF16,
    )


def predict(observations: list[Observation], flags: dict) -> tuple[float, float]:
    model = MemoryModel(observations, [""] * len(observations))
    prediction = model.predict([shape_of(flags)], [""])
    return float(prediction.pool_mean[0]), float(prediction.headroom_mean[0])


def test_the_draft_pool_is_measured_per_token_in_the_targets_dtype():
    auto = [launch(EAGLE, m) for m in (0.5, 0.6)]
    fp8 = [launch({**EAGLE, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}, 0.7)]
    kv = draft_kv_of(auto + fp8)
    assert kv is not None and kv.target_bytes == 2
    assert kv.target == pytest.approx(T_GB, rel=1e-3) and kv.draft == pytest.approx(D_GB, rel=1e-3)
    assert draft_kv_of([Observation(flags=EAGLE, outcome="ok", max_total_num_tokens=10)]) is None


def test_an_fp8_eagle_draft_keeps_the_pool_and_frees_its_saving_as_headroom():
    observations = [launch(EAGLE, m) for m in (0.5, 0.6, 0.7)]
    pool_auto, head_auto = predict(observations, {**EAGLE, "mem_fraction_static": 0.65})
    pool_fp8, head_fp8 = predict(
        observations, {**EAGLE, "mem_fraction_static": 0.65, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}
    )
    assert pool_fp8 == pytest.approx(pool_auto)
    assert head_fp8 - head_auto == pytest.approx(pool_auto * D_GB / 2, rel=1e-6)  # about 2.8 GB
    truth = launch({**EAGLE, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}, 0.65)
    assert head_fp8 == pytest.approx(truth.available_gpu_mem_gb, abs=0.1)
    # bf16 is the target's dtype here: nothing changes
    assert predict(observations, {**EAGLE, "mem_fraction_static": 0.65, "speculative_draft_kv_cache_dtype": "bf16"}) == (
        pytest.approx(pool_auto),
        pytest.approx(head_auto),
    )


def test_an_fp8_dflash_draft_enlarges_the_pool_by_the_bytes_it_saves():
    observations = [launch(DFLASH, m) for m in (0.5, 0.6, 0.7)]
    pool_auto, head_auto = predict(observations, {**DFLASH, "mem_fraction_static": 0.65})
    pool_fp8, head_fp8 = predict(
        observations, {**DFLASH, "mem_fraction_static": 0.65, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}
    )
    assert pool_fp8 / pool_auto == pytest.approx((T_GB + D_GB) / (T_GB + D_GB / 2), rel=1e-6)  # +2.9%
    assert head_fp8 == pytest.approx(head_auto)
    truth = launch({**DFLASH, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}, 0.65)
    assert pool_fp8 == pytest.approx(truth.max_total_num_tokens, rel=0.005)


def test_launches_in_both_dtypes_teach_one_fit():
    fp8 = {**DFLASH, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}
    observations = [launch(DFLASH, 0.5), launch(fp8, 0.6), launch(DFLASH, 0.7), launch(fp8, 0.8)]
    for flags in (DFLASH, fp8):
        pool, _ = predict(observations, {**flags, "mem_fraction_static": 0.75})
        assert pool == pytest.approx(launch(flags, 0.75).max_total_num_tokens, rel=0.005)


def test_ngram_has_no_draft_pool_and_an_unknown_target_dtype_changes_nothing():
    kv = DraftKv(target=T_GB, draft=D_GB, target_bytes=2)
    ngram = shape_of({"speculative_algorithm": "NGRAM", "speculative_draft_kv_cache_dtype": "fp8_e4m3"})
    assert kv.freed_gb(ngram, TOKENS) == 0.0 and kv.pool_scale(ngram) == 1.0
    observations = [launch(EAGLE, m) for m in (0.5, 0.6, 0.7)]
    unknown = [Observation(**{**o.__dict__, "kv_cache_dtype": None}) for o in observations]
    fp8 = {**EAGLE, "mem_fraction_static": 0.65, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}
    assert predict(unknown, fp8) == pytest.approx(predict(unknown, {**EAGLE, "mem_fraction_static": 0.65}))
    assert np.isfinite(predict(unknown, fp8)).all()


def test_a_block_drafts_shape_is_one_pass_over_its_block():
    for flags in (DFLASH, {"speculative_algorithm": "DFLASH", "speculative_dflash_block_size": 8}):
        shape = shape_of(flags)
        assert (shape.draft, shape.depth, shape.draft_passes, shape.width, shape.block_draft) == (8, 7, 1, 1, True)
    assert shape_of({"speculative_algorithm": "DSPARK", "speculative_dspark_block_size": 4}).draft == 5
    assert shape_of({**EAGLE, "speculative_draft_kv_cache_dtype": "fp8_e4m3"}).draft_kv_dtype == "fp8_e4m3"
