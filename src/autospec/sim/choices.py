"""The flag values the simulator models, shared by its profile files (`profile`) and
its argument resolution (`model`), which re-exports them."""

from __future__ import annotations

__all__ = ["ALGORITHMS", "ATTENTION_BACKENDS"]

#: values of --speculative-algorithm the simulator models (sglang 0.5.23 also serves DFLASH and DSPARK,
#: which the simulator refuses in one line: arguments.UNMODELLED_ALGORITHMS)
ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
#: attention backends the sim knows (a subset of SGLang's choices)
ATTENTION_BACKENDS = (
    "flashinfer",
    "fa3",
    "fa4",
    "triton",
    "torch_native",
    "flex_attention",
    "trtllm_mha",
    "trtllm_mla",
    "flashmla",
    "cutlass_mla",
    "aiter",
    "wave",
    "intel_amx",
)
