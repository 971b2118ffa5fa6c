"""The sizes in the weights-do-not-fit line: only what is known, and the smallest
power-of-two tp size whose shard fits in what the GPU had."""

from __future__ import annotations

from autospec.study.weights_fit import ModelSize, weights_fit_phrase

TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU 0 has a total capacity of "
    "95.59 GiB of which 0 bytes is free."
)
BEFORE_LOAD = {"gpu_mem_before_load_gb": 94.59}


def test_the_line_names_the_need_what_the_gpu_had_and_the_smallest_tp_size_that_fits():
    need, fix = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 1}, ModelSize(target_gb=300.0, gpus=8))
    assert need == (
        "the model's weights need about 300.0 GB per GPU at tp_size 1, GPU 0 had 94.59 GB free before loading (of 95.59 GB)"
    )
    assert fix == "use --tp-size 4, the smallest that fits them (about 75.0 GB per GPU)"


def test_a_draft_model_counts_under_speculation_but_not_for_ngram():
    size = ModelSize(target_gb=150.0, draft_gb=10.0, gpus=8)
    need, fix = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"speculative_algorithm": "EAGLE3"}, size)
    assert "(target 150.0 GB + draft 10.0 GB) need about 160.0 GB per GPU" in need
    assert "about 80.0 GB per GPU" in fix
    need, _ = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"speculative_algorithm": "NGRAM"}, size)
    assert "need about 150.0 GB per GPU" in need and "draft" not in need


def test_pipeline_stages_split_the_weights_too():
    need, fix = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 2, "pp_size": 2}, ModelSize(target_gb=600.0, gpus=16))
    assert "need about 150.0 GB per GPU at tp_size 2" in need
    assert fix.startswith("use --tp-size 4,") and "about 75.0 GB per GPU" in fix  # x 2 stages


def test_too_few_gpus_says_even_all_of_them_do_not_fit():
    _, fix = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 1}, ModelSize(target_gb=800.0, gpus=4))
    assert fix == "even --tp-size 4 (all 4 GPUs) needs about 200.0 GB per GPU; use a quantized or smaller model, or more GPUs"


def test_an_unknown_gpu_count_names_the_gpus_the_tp_size_needs():
    _, fix = weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 1}, ModelSize(target_gb=300.0))
    assert fix.endswith("(with 4 GPUs)")


def test_the_capacity_stands_in_when_the_free_memory_before_loading_is_unknown():
    need, _ = weights_fit_phrase(TORCH_OOM, None, {"tp_size": 1}, ModelSize(target_gb=300.0, gpus=8))
    assert need.endswith("GPU 0 has 95.59 GB in all")
    mib = TORCH_OOM.replace("95.59 GiB", "81920.00 MiB")
    need, _ = weights_fit_phrase(mib, None, {"tp_size": 1}, ModelSize(target_gb=300.0, gpus=8))
    assert need.endswith("GPU 0 has 80.00 GB in all")


def test_no_phrase_without_the_size_or_the_gpu_or_when_the_sizes_say_they_fit():
    assert weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 1}, ModelSize(gpus=8)) is None
    assert weights_fit_phrase("CUDA error: out of memory", None, {"tp_size": 1}, ModelSize(300.0, gpus=8)) is None
    # 80 GB fit in 94.59 GB: something else (another process, a wider dtype) failed the load
    assert weights_fit_phrase(TORCH_OOM, BEFORE_LOAD, {"tp_size": 1}, ModelSize(target_gb=80.0, gpus=8)) is None
