"""What the model reads from a configuration's server flags: the draft shape, the memory
knobs and everything else as an opaque context (pure).

SGLang facts used (docs: DESIGN.md, "SGLang facts"):

- ``--speculative-algorithm`` NEXTN is rewritten to EAGLE (MTP heads are EAGLE drafts);
  EAGLE, EAGLE3, NEXTN and STANDALONE share EAGLE's worker: ``steps`` sequential draft
  passes, each expanding ``topk`` candidates per kept path, and one verify pass of the
  target over ``num_draft_tokens`` tokens per request.
- topk == 1 forces ``num_draft_tokens = steps + 1`` (a chain).
- NGRAM has no draft model: the n-gram matcher proposes a trie of up to
  ``num_draft_tokens`` tokens (12 when unset), at most ``speculative_ngram_max_bfs_breadth``
  (10) wide, which SGLang stores as its topk; its depth is bounded by the draft tokens,
  not by steps.
- ``--max-running-requests`` unset under speculation is reset to 48: the slots SGLang
  sizes per-request state for.
- DFLASH and DSPARK (sglang 0.5.23): one draft pass proposes a whole block, verified as
  ``num_draft_tokens`` tokens (DFLASH: the block size; DSPARK: gamma + 1; the static rules
  resolve them, `autospec.feasibility.rules`).
- ``--speculative-draft-kv-cache-dtype`` (sglang 0.5.23) is the draft pool's KV dtype
  (unset or ``auto``: the target's). The memory model reads it (`Shape.draft_kv_dtype`);
  for speed it stays context (`context_of`), a different server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autospec.sglang_facts import DRAFT_TOKENS, MEM_FRACTION, STEPS, TOPK

__all__ = [
    "Shape",
    "shape_of",
    "context_keys",
    "context_of",
    "MAX_RUNNING",
    "SPEC_DEFAULT_SLOTS",
    "NGRAM_DEFAULT_DRAFT",
    "PERF_KNOBS",
]

MAX_RUNNING = "max_running_requests"
#: SGLang resets max_running_requests to 48 under speculation when it is unset (0.5.x).
SPEC_DEFAULT_SLOTS = 48
#: NGRAM's draft tokens and trie breadth when unset (sglang 0.5.23 server_args).
NGRAM_DEFAULT_DRAFT = 12
NGRAM_DEFAULT_BREADTH = 10
NGRAM_BREADTH = "speculative_ngram_max_bfs_breadth"
DRAFT_KV_DTYPE = "speculative_draft_kv_cache_dtype"
#: algorithms whose draft proposes a block in one pass (sglang 0.5.23 `is_dflash_family`)
BLOCK_DRAFTS = ("DFLASH", "DSPARK")
#: Flags the model reads itself; every other flag is context (configurations that differ
#: in context are different servers the model does not relate to each other).
PERF_KNOBS = (STEPS, TOPK, DRAFT_TOKENS, MEM_FRACTION, MAX_RUNNING, NGRAM_BREADTH)
#: Flags that never change memory or speed (names, addresses, logging).
_IRRELEVANT = frozenset(
    {
        "host",
        "port",
        "served_model_name",
        "log_level",
        "log_requests",
        "enable_metrics",
        "api_key",
        "trust_remote_code",
        "random_seed",
        "model_path",
        "tokenizer_path",
        "speculative_draft_model_path",
        "skip_server_warmup",
        "sim_seed",
    }
)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Shape:
    """One configuration as the model sees it.

    ``family``: "none" (no speculation), "eagle" (a draft model or MTP head, chains and
    trees) or "ngram". ``depth``: how many draft positions can be accepted (EAGLE: steps;
    NGRAM: draft tokens - 1). ``draft_passes``: sequential draft forward passes per step
    (EAGLE: steps; NGRAM and none: 0). ``width``: candidates kept per depth (EAGLE topk;
    NGRAM: the trie's breadth). ``draft``: tokens per request
    in one verify pass (1 without speculation). ``mem``: --mem-fraction-static (None when
    unset and unknown). ``slots``: the running-request slots SGLang sizes its state for
    (the flag, or 48 under speculation; None without speculation and without the flag).
    ``mrr_flag``: the flag itself. ``graph_tokens``: per-request tokens the captured CUDA
    graphs hold buffers for (verify: draft tokens; draft passes: steps x topk). Other
    flags are not part of the shape: the model groups configurations by the other flags
    that vary (`context_of`). ``draft_kv_dtype``: ``--speculative-draft-kv-cache-dtype``
    (None: unset); ``block_draft``: DFLASH / DSPARK, whose pool budget counts the draft's
    KV at its own dtype (`autospec.model.memory`)."""

    family: str
    depth: int
    draft_passes: int
    width: int
    draft: int
    mem: float | None
    slots: int | None
    mrr_flag: int | None
    draft_kv_dtype: str | None = None
    block_draft: bool = False

    @property
    def speculative(self) -> bool:
        return self.family != "none"

    @property
    def tree(self) -> bool:
        return self.family != "none" and self.width > 1

    @property
    def graph_tokens(self) -> int:
        return self.draft + self.draft_passes * self.width

    @property
    def key(self) -> tuple[str, int, int, int, int]:
        """What decides acceptance and step cost (for fixed other flags): the draft shape."""
        return (self.family, self.depth, self.draft_passes, self.width, self.draft)

    def describe(self) -> str:
        if self.family == "none":
            head = "no speculation"
        elif self.family == "ngram":
            head = f"ngram draft={self.draft} breadth={self.width}"
        else:
            head = f"steps={self.draft_passes} topk={self.width} draft={self.draft}"
        if self.mem is not None:
            head += f" mem={self.mem:g}"
        if self.mrr_flag is not None:
            head += f" mrr={self.mrr_flag}"
        return head


def _block(algorithm: str, flags: Mapping[str, Any]) -> int | None:
    """A block draft's verify length: the draft tokens, else DFLASH's block size, else
    DSPARK's gamma + 1 (sglang 0.5.23 `_handle_dflash` / `_handle_dspark`); None when unset."""
    if algorithm not in BLOCK_DRAFTS:
        return None
    gamma = _int(flags.get("speculative_dspark_block_size"))
    return (
        _int(flags.get(DRAFT_TOKENS))
        or _int(flags.get("speculative_dflash_block_size"))
        or (gamma + 1 if gamma and gamma > 0 else None)
    )


def shape_of(flags: Mapping[str, Any]) -> Shape:
    """The `Shape` of full server flags (snake_case ServerArgs names, resolved or as
    launched: topk 1 forces draft = steps + 1 here as in SGLang)."""
    algorithm = str(flags.get("speculative_algorithm") or "").upper()
    mem = _float(flags.get(MEM_FRACTION))
    mrr = _int(flags.get(MAX_RUNNING))
    if not algorithm:
        return Shape("none", 0, 0, 1, 1, mem, mrr, mrr)
    slots = mrr if mrr is not None else SPEC_DEFAULT_SLOTS
    if algorithm == "NGRAM":
        draft = _int(flags.get(DRAFT_TOKENS)) or NGRAM_DEFAULT_DRAFT
        breadth = _int(flags.get(NGRAM_BREADTH)) or _int(flags.get(TOPK)) or NGRAM_DEFAULT_BREADTH
        return Shape("ngram", max(draft - 1, 0), 0, max(breadth, 1), max(draft, 1), mem, slots, mrr)
    dtype = flags.get(DRAFT_KV_DTYPE)
    dtype = str(dtype) if dtype is not None else None
    block = _block(algorithm, flags)
    if block:  # one pass drafts the block; the target verifies all of it
        return Shape("eagle", block - 1, 1, 1, block, mem, slots, mrr, dtype, True)
    steps = _int(flags.get(STEPS)) or 1
    topk = _int(flags.get(TOPK)) or 1
    draft = steps + 1 if topk <= 1 else (_int(flags.get(DRAFT_TOKENS)) or steps + 1)
    # EAGLE, EAGLE3, NEXTN/MTP, STANDALONE (and newer draft-model algorithms) share the
    # EAGLE worker's step structure.
    return Shape("eagle", steps, steps, max(topk, 1), draft, mem, slots, mrr, dtype, algorithm in BLOCK_DRAFTS)


def _relevant(name: str) -> bool:
    return name not in PERF_KNOBS and name not in _IRRELEVANT and not name.startswith("sim_")


def context_keys(flag_sets: list[Mapping[str, Any]]) -> tuple[str, ...]:
    """The flags besides the model's own knobs whose values differ between these flag
    sets (other tuned flags): configurations are related to each other only within one
    combination of them."""
    keys = sorted({k for flags in flag_sets for k in flags if _relevant(k)})
    varying = []
    for k in keys:
        values = {repr(flags.get(k)) for flags in flag_sets}
        if len(values) > 1:
            varying.append(k)
    return tuple(varying)


def context_of(flags: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """The values of `keys` in `flags`, as one comparable string."""
    return repr(tuple(flags.get(k) for k in keys))
