"""The draft model's KV pool in a dtype of its own (``--speculative-draft-kv-cache-dtype``):
what it changes in the KV pool and in the memory left after start-up (pure).

How sglang 0.5.23 sizes the pools (``model_executor/pool_configurator.py``
``DefaultPoolConfigurator``, ``mem_cache/kv_cache_dtype.py`` ``configure_kv_cache_dtype``,
``speculative/dflash_utils.py``): the target's pool budget is divided by a per-token cost
that includes the draft's pool, which has one slot per target token, so both pools hold
``max_total_num_tokens`` T tokens.

- EAGLE, EAGLE3, STANDALONE (NEXTN is EAGLE): the draft's cost is the target's per-token
  KV bytes x draft layers / target layers, in the *target's* dtype. The draft worker then
  allocates its pool in its own dtype (the flag; unset or ``auto``: the target's). So T
  does not change with the flag; a smaller draft dtype leaves T x d x (1 - r) GB free
  (d: the draft pool's GB per token in the target's dtype, r: draft dtype bytes / target
  dtype bytes), which shows as more memory left after start-up (the flag's help text:
  "the saving shows up as free device memory, so raise --mem-fraction-static").
- DFLASH, DSPARK: the draft's cost is its own geometry in the dtype the draft resolves
  (``resolve_dflash_draft_cell_size``), summed with the target's; a smaller draft dtype
  enlarges the pool itself: T scales by (t + d) / (t + d x r) against ``auto`` (t: the
  target pool's GB per token).
- NGRAM has no draft model and no draft pool.

t and d are measured: every launch with a draft prints two ``KV Cache is allocated``
lines, target then draft, with their torch dtype and K/V sizes (`autospec.launcher.startup`).
Without such a launch, or when a dtype is unknown, nothing is corrected (r = 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from autospec.model.observation import Observation
from autospec.model.shape import Shape

__all__ = ["DraftKv", "draft_kv_of", "TORCH_DTYPE_BYTES", "FLAG_DTYPE_BYTES"]

#: bytes per element of the torch dtypes SGLang's KV log lines print
TORCH_DTYPE_BYTES = {
    "torch.float8_e4m3fn": 1,
    "torch.float8_e4m3fnuz": 1,
    "torch.float8_e5m2": 1,
    "torch.float8_e5m2fnuz": 1,
    "torch.bfloat16": 2,
    "torch.float16": 2,
    "torch.float32": 4,
}
#: bytes per element of the flag's values (sglang 0.5.23 choices: auto, fp8_e5m2, fp8_e4m3,
#: bf16, bfloat16; ``auto`` follows the target, as does an unset flag)
FLAG_DTYPE_BYTES = {"fp8_e4m3": 1, "fp8_e5m2": 1, "bf16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class DraftKv:
    """Measured per-token sizes, GB per token per GPU: the target pool's (`target`) and
    the draft pool's in the target's dtype (`draft`), and the target dtype's bytes."""

    target: float
    draft: float
    target_bytes: int

    def ratio(self, shape: Shape) -> float:
        """Draft dtype bytes / target dtype bytes for `shape` (1 for unset or ``auto``)."""
        size = FLAG_DTYPE_BYTES.get(shape.draft_kv_dtype or "auto")
        return size / self.target_bytes if size else 1.0

    def pool_scale(self, shape: Shape) -> float:
        """T(shape) / T(the same with the draft in the target's dtype): above 1 for a
        block draft (DFLASH, DSPARK) in a smaller dtype, else 1."""
        if not shape.block_draft:
            return 1.0
        return (self.target + self.draft) / (self.target + self.draft * self.ratio(shape))

    def freed_gb(self, shape: Shape, tokens: float) -> float:
        """GB per GPU an EAGLE-family draft pool of `tokens` slots leaves free against the
        budget charged for it (negative: a larger draft dtype takes more than charged)."""
        if shape.family != "eagle" or shape.block_draft:
            return 0.0
        return max(tokens, 0.0) * self.draft * (1.0 - self.ratio(shape))


def _bytes(dtype: str | None) -> int | None:
    return TORCH_DTYPE_BYTES.get(dtype or "")


def draft_kv_of(observations: Sequence[Observation]) -> DraftKv | None:
    """The medians over launches that logged both pools with known dtypes; None if none did."""
    targets, drafts, sizes = [], [], []
    for o in observations:
        tokens, t_bytes, d_bytes = o.max_total_num_tokens, _bytes(o.kv_cache_dtype), _bytes(o.draft_kv_cache_dtype)
        if not (tokens and o.kv_cache_gb and o.draft_kv_cache_gb and t_bytes and d_bytes):
            continue
        targets.append(o.kv_cache_gb / tokens)
        drafts.append(o.draft_kv_cache_gb / tokens * t_bytes / d_bytes)
        sizes.append(t_bytes)
    if not targets:
        return None
    return DraftKv(target=median(targets), draft=median(drafts), target_bytes=int(median(sizes)))
