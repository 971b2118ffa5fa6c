"""The small search space end-to-end tests run against the simulator (shared by
tests/conftest.py, tests/study and tests/report): steps 1-4, mem-fraction 0.80-0.88,
C=1 and C=4, 24 output tokens, so a launched trial takes about a second."""

from __future__ import annotations


def sim_space_text(topk: tuple[int, ...] = (1,), baseline: bool = False) -> str:
    """With topk (1,) every candidate launches (12 configurations); adding 2 adds a region
    the simulated SGLang version rejects (tree with paged triton attention)."""
    text = f"""
[server.flags]
model_path = "sim-model"
speculative_algorithm = "NEXTN"
tp_size = 4
attention_backend = "triton"
page_size = 16

[params.speculative_num_steps]
type = "int"
low = 1
high = 4

[params.speculative_eagle_topk]
type = "categorical"
choices = {list(topk)}

[params.speculative_num_draft_tokens]
type = "draft_tokens"

[params.mem_fraction_static]
type = "float"
low = 0.80
high = 0.88
step = 0.04

[workload]
kind = "synthetic"
output_len = 24

[bench]
concurrency = [1, 4]
requests_multiplier = 1
min_requests = 2
warmup_requests = 0

[[objectives]]
metric = "output_tok_s"
concurrency = 1

[[objectives]]
metric = "agg_output_tok_s"
concurrency = 4
"""
    if baseline:
        text += """
[baseline]
speculative_num_steps = 1
speculative_eagle_topk = 1
mem_fraction_static = 0.84
"""
    return text
