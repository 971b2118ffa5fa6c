"""The simulator's step timing: how long one decode iteration and one prefill step take.
Pure functions of a `Profile` and a `ServerConfig`.

Step cost (`step_seconds`), for B running requests, D draft tokens, S steps, k = topk:
       verify = floor_ms + expert_ms * (1 - (1 - moe_topk/moe_experts)^(B*D))
                + verify_ms_per_token * B*D + request_ms * B
       draft  = S * (draft_step_ms + draft_ms_per_token * B*k) + tree_ms_per_node * B*D  (tree only)
   The floor is the memory-bound cost of one pass at batch 1 (weights read once, kernel
   launches, all-reduce); the expert term is the MoE weight traffic growing as the B*D
   verified tokens touch more experts; the linear terms are compute. Without speculation
   D = 1 and there is no draft cost. Prefill: prefill_base_ms + prefill_ms_per_token * n
   + prefill_ms_per_seq * seqs.
"""

from __future__ import annotations

from autospec.sim.config import ServerConfig
from autospec.sim.profile import Profile

__all__ = ["prefill_seconds", "step_seconds"]


def step_seconds(profile: Profile, cfg: ServerConfig, batch_size: int) -> float:
    """Wall time of one decode iteration (draft + verify) with `batch_size` running requests."""
    b = max(int(batch_size), 1)
    d = cfg.speculative_num_draft_tokens if cfg.speculative else 1
    tokens = b * d
    ms = profile.floor_ms + profile.verify_ms_per_token * tokens + profile.request_ms * b
    if profile.moe_experts and profile.moe_topk:
        ms += profile.expert_ms * (1.0 - (1.0 - profile.moe_topk / profile.moe_experts) ** tokens)
    if cfg.speculative and cfg.speculative_algorithm != "NGRAM":
        k = cfg.speculative_eagle_topk
        ms += cfg.speculative_num_steps * (profile.draft_step_ms + profile.draft_ms_per_token * b * k)
    if cfg.speculative and cfg.speculative_eagle_topk > 1:
        ms += profile.tree_ms_per_node * tokens
    return ms / 1000.0


def prefill_seconds(profile: Profile, cfg: ServerConfig, num_new_tokens: int, num_new_seqs: int) -> float:
    """Wall time of one prefill step admitting `num_new_seqs` sequences of `num_new_tokens` in total."""
    ms = (
        profile.prefill_base_ms
        + profile.prefill_ms_per_token * max(num_new_tokens, 0)
        + profile.prefill_ms_per_seq * max(num_new_seqs, 0)
    )
    if cfg.speculative and cfg.speculative_algorithm != "NGRAM":
        ms *= 1.1  # the draft model's extend pass over the same tokens
    return ms / 1000.0
