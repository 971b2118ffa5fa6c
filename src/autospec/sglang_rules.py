"""SGLang's argument rules: the one table of what SGLang rewrites or rejects, per version.

Both sides read it: autospec's static feasibility check (`autospec.feasibility.rules`
turns a walk into a `Verdict`) and the simulator's argument resolver
(`autospec.sim.arguments`, which words its own log lines around it). It sits at the
bottom of the package and imports nothing of autospec but `autospec.sglang_facts`, so
that the simulator may read it (docs/architecture.md, "Layers").

Contract:

- :data:`RULES` is the only table. Rows are evaluated in order, which is the order in which
  SGLang's own argument code runs them (``ServerArgs`` resolution, then
  ``check_server_args``), so the first rejection is the one SGLang would raise.
- A row applies to the SGLang versions in its ``versions`` specifier (PEP 440, e.g.
  ``">=0.5.13"``); a rule whose wording or scope changed between releases has one row per
  range, all under the same ``id``. ``checked`` names the releases whose source the row was
  read against; a boundary between two read releases is placed at the first release read
  that shows the new behaviour (``docs/feasibility.md`` lists the unread releases in
  between).
- ``effect``: ``"rewrite"`` changes the flags the way SGLang does (no rejection; a
  ``message`` is the warning SGLang logs for it); ``"reject"`` means SGLang raises
  ``error_type`` with ``message`` (origin ``"sglang"`` or ``"python"``), or, for origin
  ``"autospec"``, that SGLang accepts the arguments but the server cannot run them;
  ``"note"`` marks a verdict as hardware-dependent without rejecting it (only the GPU host
  can tell).
- Flags are SGLang ``ServerArgs`` field names. :func:`walk` is a pure function of the flags
  and the rows.

The rules assume a CUDA device and that ``SGLANG_ENABLE_PP_SPEC`` is unset; what depends
on the GPU model (default attention backend, SM90+ kernels) is a "note" row, not a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from autospec.sglang_facts import ALGORITHM as ALGO
from autospec.sglang_facts import DRAFT_TOKENS as DRAFT
from autospec.sglang_facts import STEPS, TOPK, max_draft_tokens

__all__ = [
    "EAGLE_FAMILY",
    "RULES",
    "Rule",
    "Walk",
    "applicable_rules",
    "dp_attention_enabled",
    "walk",
]

DFLASH_BLOCK = "speculative_dflash_block_size"  # 0.5.23: DFLASH's alias of the draft-token count
DSPARK_BLOCK = "speculative_dspark_block_size"  # 0.5.23: DSPARK's gamma; draft tokens = gamma + 1
PAGE = "page_size"
BACKEND = "attention_backend"

# Algorithms handled by SGLang's `_handle_eagle_family` (NEXTN is rewritten to EAGLE first).
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
SPECULATIVE = EAGLE_FAMILY | {"NGRAM"}


@dataclass(frozen=True)
class Rule:
    """One row of the table; see the module docstring for the meaning of each field."""

    id: str
    versions: str
    message: str
    check: Callable[[Mapping[str, Any]], bool]
    effect: str = "reject"  # "reject" | "rewrite" | "note"
    rewrite: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    error_type: str = "ValueError"
    origin: str = "sglang"  # "sglang" | "python" | "autospec"
    where: str = ""
    checked: tuple[str, ...] = ()
    hint: str = ""
    hardware_dependent: bool = False

    def __post_init__(self) -> None:
        if self.effect not in ("reject", "rewrite", "note"):
            raise ValueError(f"rule {self.id}: effect {self.effect!r} is not reject/rewrite/note")
        if (self.effect == "rewrite") != (self.rewrite is not None):
            raise ValueError(f"rule {self.id}: a rewrite row needs a rewrite function, others none")
        SpecifierSet(self.versions)  # raises on a malformed range

    @cached_property
    def _specifier(self) -> SpecifierSet:
        return SpecifierSet(self.versions)

    def applies_to(self, version: Version) -> bool:
        return self._specifier.contains(version, prereleases=True)

    def sglang_message(self, flags: Mapping[str, Any]) -> str:
        """``message`` with the flag values filled in, as SGLang prints it."""
        return self.message.format_map(_Fields(flags))

    def reason(self, flags: Mapping[str, Any]) -> str:
        text = self.sglang_message(flags)
        if self.hint:
            text = f"{text} ({self.hint.format_map(_Fields(flags))})" if text else self.hint.format_map(_Fields(flags))
        return text


class _Fields(dict):
    """Format fields: flag values, plus a few derived ones; unknown names read as None."""

    def __init__(self, flags: Mapping[str, Any]) -> None:
        super().__init__(flags)
        steps, topk = _int(flags, STEPS), _int(flags, TOPK)
        self["max_draft"] = max_draft_tokens(steps, topk) if steps and topk else None
        gamma = _int(flags, DSPARK_BLOCK)
        self["dspark_verify_window"] = gamma + 1 if gamma is not None else None
        self.setdefault("allowed", "('flashinfer', 'fa3', 'triton')")  # 0.5.13+ _PAGE_TREE_SPEC_BACKENDS

    def __missing__(self, key: str) -> Any:
        return None


# --- flag helpers -------------------------------------------------------------------------


def _int(flags: Mapping[str, Any], key: str) -> int | None:
    value = flags.get(key)
    return None if value is None else int(value)


def _given(flags: Mapping[str, Any], key: str) -> int:
    """The integer value of a flag the rule has already checked is set."""
    return int(flags[key])


def _algo(flags: Mapping[str, Any]) -> str | None:
    value = flags.get(ALGO)
    return None if value is None else str(value)


def _eagle(flags: Mapping[str, Any]) -> bool:
    return _algo(flags) in EAGLE_FAMILY


def _block(flags: Mapping[str, Any], algo: str, key: str) -> int | None:
    """The block size flag `key` when the algorithm is `algo` and it is set, else None."""
    return _int(flags, key) if _algo(flags) == algo else None


def _not_positive(value: int | None) -> bool:
    return value is not None and value <= 0


def _ngram(flags: Mapping[str, Any]) -> bool:
    return _algo(flags) == "NGRAM"


def _backends(flags: Mapping[str, Any]) -> set[str]:
    names = ("attention_backend", "decode_attention_backend", "prefill_attention_backend")
    return {str(flags[n]) for n in names if flags.get(n) is not None}


def _topk_gt1_paged(flags: Mapping[str, Any]) -> bool:
    topk, page = _int(flags, TOPK), _int(flags, PAGE)
    return topk is not None and topk > 1 and page is not None and page > 1


def _pp(flags: Mapping[str, Any]) -> bool:
    return (_int(flags, "pp_size") or 1) > 1


def dp_attention_enabled(flags: Mapping[str, Any]) -> bool:
    """DP attention is on. Every version checked turns ``--enable-dp-attention`` off when
    ``dp_size == 1`` (0.5.4 ``_handle_data_parallelism``; 0.5.23 maps it to
    ``attn_dp_size = dp_size``), and 0.5.22+ also takes ``--attn-dp-size N``."""
    dp = _int(flags, "dp_size") or 1
    attn_dp = _int(flags, "attn_dp_size") or 1
    return (bool(flags.get("enable_dp_attention")) and dp > 1) or attn_dp > 1


def _set(**changes: Any) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def apply(flags: Mapping[str, Any]) -> dict[str, Any]:
        return {**flags, **changes}

    return apply


def _with(fn: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    def apply(flags: Mapping[str, Any]) -> dict[str, Any]:
        return {**flags, **fn(flags)}

    return apply


_ALL = ("0.5.4", "0.5.10", "0.5.16", "0.5.23")
_SPEC_HOOK = "arg_groups/speculative_hook.py"  # 0.5.13+; earlier: server_args.py
_UNKNOWN_BACKEND_HINT = (
    "attention backend unset: SGLang picks it from the GPU, so whether topk > 1 with "
    "page_size > 1 is allowed is only known on the GPU host"
)

RULES: tuple[Rule, ...] = (
    # --- rewrites that run before the speculative checks --------------------------------
    Rule(
        "nextn_is_eagle",
        ">=0",
        "",
        lambda f: _algo(f) == "NEXTN",
        effect="rewrite",
        rewrite=_set(speculative_algorithm="EAGLE"),
        where="_handle_speculative_decoding / _resolve_speculative_algorithm_alias",
        checked=_ALL,
        hint="NEXTN is EAGLE",
    ),
    Rule(
        "page_size_default",
        ">=0",
        "",
        lambda f: f.get(PAGE) is None,
        effect="rewrite",
        rewrite=_set(page_size=1),
        where="_handle_page_size (0.5.4) / overrides._page_size_default (0.5.23); CUDA",
        checked=_ALL,
    ),
    Rule(
        "flashmla_page_size",
        ">=0",
        "FlashMLA only supports a page_size of 64, change page_size to 64.",
        lambda f: "flashmla" in _backends(f) and _int(f, PAGE) != 64,
        effect="rewrite",
        rewrite=_set(page_size=64),
        where="_handle_attention_backend_compatibility / overrides._mla_backend_page_constraints",
        checked=("0.5.4", "0.5.23"),
    ),
    Rule(
        "trtllm_mla_page_size",
        ">=0",
        "TensorRT-LLM MLA only supports page_size of 32 or 64, changing page_size from {page_size} to 64.",
        lambda f: "trtllm_mla" in _backends(f) and _int(f, PAGE) not in (32, 64),
        effect="rewrite",
        rewrite=_set(page_size=64),
        where="_handle_attention_backend_compatibility / overrides._mla_backend_page_constraints",
        checked=("0.5.4", "0.5.23"),
    ),
    Rule(
        "trtllm_mha_page_size",
        "<0.5.20",
        "TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size from {page_size} to 64.",
        lambda f: "trtllm_mha" in _backends(f) and _int(f, PAGE) not in (16, 32, 64),
        effect="rewrite",
        rewrite=_set(page_size=64),
        where="_handle_attention_backend_compatibility",
        checked=("0.5.4", "0.5.10", "0.5.16"),
    ),
    Rule(
        "trtllm_mha_page_size",
        ">=0.5.20",
        "TensorRT-LLM MHA only supports page_size of 16, 32, 64 or 128, changing page_size from {page_size} to 64.",
        lambda f: "trtllm_mha" in _backends(f) and _int(f, PAGE) not in (16, 32, 64, 128),
        effect="rewrite",
        rewrite=_set(page_size=64),
        where="overrides._mla_backend_page_constraints",
        checked=("0.5.20", "0.5.22", "0.5.23"),
    ),
    # --- hardware: decided by the GPU, not by the arguments ------------------------------
    Rule(
        "trtllm_mha_needs_gpu",
        "<0.5.10",
        "TRTLLM MHA backend is only supported on Blackwell GPUs (SM100). Please use a different backend.",
        lambda f: "trtllm_mha" in _backends(f),
        effect="note",
        where="_handle_attention_backend_compatibility",
        checked=("0.5.4", "0.5.5", "0.5.6", "0.5.7"),
        hardware_dependent=True,
    ),
    Rule(
        "trtllm_mha_needs_gpu",
        ">=0.5.10,<0.5.20",
        "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). Please use a different prefill backend.",
        lambda f: "trtllm_mha" in _backends(f),
        effect="note",
        where="_handle_attention_backend_compatibility",
        checked=("0.5.10", "0.5.13", "0.5.16"),
        hardware_dependent=True,
    ),
    Rule(
        "trtllm_mha_needs_gpu",
        ">=0.5.20",
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs. "
        "Please use a different prefill backend.",
        lambda f: "trtllm_mha" in _backends(f),
        effect="note",
        where="arg_groups/attention_hook.py",
        checked=("0.5.20", "0.5.22", "0.5.23"),
        hardware_dependent=True,
    ),
    # --- EAGLE / EAGLE3 / STANDALONE (SGLang's _handle_eagle_family) ----------------------
    Rule(
        "standalone_dp_attention",
        ">=0",
        "Currently standalone speculative decoding does not support dp attention.",
        lambda f: _algo(f) == "STANDALONE" and dp_attention_enabled(f),
        where=f"{_SPEC_HOOK} _handle_eagle_family",
        checked=_ALL,
    ),
    Rule(
        "spec_max_running_requests",
        "<0.5.5",
        "Max running requests is reset to 48 for speculative decoding.",
        lambda f: _algo(f) in SPECULATIVE and f.get("max_running_requests") is None,
        effect="rewrite",
        rewrite=_set(max_running_requests=48),
        where="_handle_speculative_decoding",
        checked=("0.5.4",),
    ),
    Rule(
        "spec_max_running_requests",
        ">=0.5.5",
        "Max running requests is reset to 48 for speculative decoding. "
        "You can override this by explicitly setting --max-running-requests.",
        lambda f: _algo(f) in SPECULATIVE and f.get("max_running_requests") is None,
        effect="rewrite",
        rewrite=_set(max_running_requests=48),
        where=f"{_SPEC_HOOK} _handle_eagle_family / _handle_ngram",
        checked=("0.5.5", "0.5.10", "0.5.16", "0.5.23"),
    ),
    Rule(
        "partial_spec_params",
        ">=0",
        "",
        lambda f: _eagle(f) and f.get(STEPS) is None and (f.get(TOPK) is not None or f.get(DRAFT) is not None),
        error_type="AssertionError",
        where=f"{_SPEC_HOOK} _handle_eagle_family (a bare assert)",
        checked=_ALL,
        hint="SGLang asserts that speculative_eagle_topk and speculative_num_draft_tokens are unset "
        "when speculative_num_steps is unset; set all three or none",
    ),
    Rule(
        "trtllm_mha_topk",
        ">=0",
        "trtllm_mha backend only supports topk = 1 for speculative decoding.",
        lambda f: _eagle(f) and "trtllm_mha" in _backends(f) and (_int(f, TOPK) or 0) > 1,
        where=f"{_SPEC_HOOK} _handle_eagle_family",
        checked=_ALL,
    ),
    Rule(
        "topk_unset",
        ">=0",
        "'>' not supported between instances of 'NoneType' and 'int'",
        lambda f: _eagle(f) and f.get(STEPS) is not None and f.get(TOPK) is None,
        error_type="TypeError",
        origin="python",
        where=f"{_SPEC_HOOK} _handle_eagle_family",
        checked=_ALL,
        hint="speculative_num_steps is set but speculative_eagle_topk is not; SGLang compares the unset top-k with 1 and crashes",
    ),
    Rule(
        "topk1_draft_tokens",
        ">=0",
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        lambda f: _eagle(f) and _int(f, TOPK) == 1 and f.get(STEPS) is not None and _int(f, DRAFT) != _given(f, STEPS) + 1,
        effect="rewrite",
        rewrite=_with(lambda f: {DRAFT: _given(f, STEPS) + 1}),
        where=f"{_SPEC_HOOK} _handle_eagle_family",
        checked=_ALL,
    ),
    Rule(
        "topk_gt1_page_size_backend",
        "<0.5.6",
        "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend.",
        lambda f: _eagle(f) and _topk_gt1_paged(f) and f.get(BACKEND) is not None and f[BACKEND] != "flashinfer",
        where="_handle_speculative_decoding",
        checked=("0.5.4", "0.5.5"),
    ),
    Rule(
        "topk_gt1_page_size_backend",
        ">=0.5.6,<0.5.13",
        "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend.",
        lambda f: _eagle(f) and _topk_gt1_paged(f) and f.get(BACKEND) is not None and f[BACKEND] not in ("flashinfer", "fa3"),
        where="_handle_speculative_decoding",
        checked=("0.5.6", "0.5.7", "0.5.10", "0.5.11", "0.5.12"),
        hint="this version also allows fa3",
    ),
    Rule(
        "topk_gt1_page_size_backend",
        ">=0.5.13",
        "speculative_eagle_topk > 1 with page_size > 1 is only supported on {allowed}; "
        "got attention_backend={attention_backend!r}. Use page_size == 1 or one of those backends.",
        lambda f: (
            _eagle(f) and _topk_gt1_paged(f) and f.get(BACKEND) is not None and f[BACKEND] not in ("flashinfer", "fa3", "triton")
        ),
        where=f"{_SPEC_HOOK} _handle_eagle_family (_PAGE_TREE_SPEC_BACKENDS)",
        checked=("0.5.13", "0.5.16", "0.5.20", "0.5.22", "0.5.23"),
    ),
    Rule(
        "topk_gt1_page_size_default_backend",
        ">=0",
        _UNKNOWN_BACKEND_HINT,
        lambda f: _eagle(f) and _topk_gt1_paged(f) and f.get(BACKEND) is None,
        effect="note",
        origin="autospec",
        checked=_ALL,
        hardware_dependent=True,
    ),
    # --- NGRAM (SGLang's _handle_ngram) -------------------------------------------------
    Rule(
        "ngram_topk",
        ">=0",
        "",
        lambda f: _ngram(f) and _int(f, TOPK) != int(f.get("speculative_ngram_max_bfs_breadth") or 10),
        effect="rewrite",
        rewrite=_with(lambda f: {TOPK: int(f.get("speculative_ngram_max_bfs_breadth") or 10)}),
        where=f"{_SPEC_HOOK} _handle_ngram",
        checked=_ALL,
        hint="NGRAM's top-k is speculative_ngram_max_bfs_breadth (default 10)",
    ),
    Rule(
        "ngram_draft_default",
        "<0.5.10",
        "",
        lambda f: _ngram(f) and f.get(DRAFT) is None,
        effect="rewrite",
        rewrite=_with(lambda f: {DRAFT: int(f.get("speculative_ngram_max_match_window_size") or 12)}),
        where="_handle_speculative_decoding",
        checked=("0.5.4",),
    ),
    Rule(
        "ngram_draft_default",
        ">=0.5.10",
        "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
        "You can override this by explicitly setting --speculative-num-draft-tokens.",
        lambda f: _ngram(f) and f.get(DRAFT) is None,
        effect="rewrite",
        rewrite=_set(speculative_num_draft_tokens=12),
        where=f"{_SPEC_HOOK} _handle_ngram",
        checked=("0.5.10", "0.5.16", "0.5.23"),
    ),
    Rule(
        "ngram_steps_default",
        ">=0.5.16",
        "",
        lambda f: _ngram(f) and f.get(STEPS) is None,
        effect="rewrite",
        rewrite=_with(lambda f: {STEPS: _given(f, DRAFT) // _given(f, TOPK)}),
        where=f"{_SPEC_HOOK} _handle_ngram",
        checked=("0.5.16", "0.5.20", "0.5.23"),
        hint="0.5.13 leaves it unset",
    ),
    Rule(
        "ngram_page_size_backend",
        ">=0",
        "speculative_eagle_topk({speculative_eagle_topk}) > 1 with page_size({page_size}) > 1 is unstable "
        "and produces incorrect results for paged attention backends. "
        "This combination is only supported for the 'flashinfer' backend.",
        lambda f: _ngram(f) and _topk_gt1_paged(f) and f.get(BACKEND) is not None and f[BACKEND] != "flashinfer",
        where=f"{_SPEC_HOOK} _handle_ngram",
        checked=_ALL,
    ),
    Rule(
        "ngram_page_size_default_backend",
        ">=0",
        _UNKNOWN_BACKEND_HINT.replace(
            "topk > 1 with page_size > 1 is allowed", "NGRAM with page_size > 1 is allowed (flashinfer only)"
        ),
        lambda f: _ngram(f) and _topk_gt1_paged(f) and f.get(BACKEND) is None,
        effect="note",
        origin="autospec",
        checked=_ALL,
        hardware_dependent=True,
    ),
    Rule(
        "ngram_dp_attention",
        ">=0",
        "Currently ngram speculative decoding does not support dp attention.",
        lambda f: _ngram(f) and dp_attention_enabled(f),
        where=f"{_SPEC_HOOK} _handle_ngram",
        checked=_ALL,
    ),
    # --- DFLASH / DSPARK block sizes (0.5.23: arg_groups/speculative_hook.py _handle_dflash,
    # _handle_dspark; fields in arg_groups/fields/spec.py). Checked against 0.5.23 only.
    Rule(
        "dflash_block_size_positive",
        ">=0.5.23",
        "DFLASH requires --speculative-dflash-block-size to be positive, got {speculative_dflash_block_size}.",
        lambda f: _not_positive(_block(f, "DFLASH", DFLASH_BLOCK)),
        where=f"{_SPEC_HOOK} _handle_dflash",
        checked=("0.5.23",),
    ),
    Rule(
        "dflash_block_size_mismatch",
        ">=0.5.23",
        "Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set "
        "but they differ. For DFLASH they must match. "
        "speculative_num_draft_tokens={speculative_num_draft_tokens}, "
        "speculative_dflash_block_size={speculative_dflash_block_size}.",
        lambda f: (
            (_block(f, "DFLASH", DFLASH_BLOCK) or 0) > 0 and f.get(DRAFT) is not None and _int(f, DRAFT) != _int(f, DFLASH_BLOCK)
        ),
        where=f"{_SPEC_HOOK} _handle_dflash",
        checked=("0.5.23",),
    ),
    Rule(
        "dflash_block_size_sets_draft",
        ">=0.5.23",
        "",
        lambda f: (_block(f, "DFLASH", DFLASH_BLOCK) or 0) > 0 and f.get(DRAFT) is None,
        effect="rewrite",
        rewrite=_with(lambda f: {DRAFT: _int(f, DFLASH_BLOCK)}),
        where=f"{_SPEC_HOOK} _handle_dflash",
        checked=("0.5.23",),
        hint="for DFLASH the block size is the number of draft tokens",
    ),
    Rule(
        "dspark_block_size_positive",
        ">=0.5.23",
        "DSpark requires --speculative-dspark-block-size to be positive, got {speculative_dspark_block_size}.",
        lambda f: _not_positive(_block(f, "DSPARK", DSPARK_BLOCK)),
        where=f"{_SPEC_HOOK} _handle_dspark",
        checked=("0.5.23",),
    ),
    Rule(
        "dspark_draft_is_gamma_plus_one",
        ">=0.5.23",
        "DSpark speculative_num_draft_tokens must equal gamma + 1 "
        "(= {dspark_verify_window} for gamma={speculative_dspark_block_size}), but got "
        "speculative_num_draft_tokens={speculative_num_draft_tokens}.",
        lambda f: (
            (_block(f, "DSPARK", DSPARK_BLOCK) or 0) > 0
            and f.get(DRAFT) is not None
            and _int(f, DRAFT) != (_int(f, DSPARK_BLOCK) or 0) + 1
        ),
        where=f"{_SPEC_HOOK} _handle_dspark",
        checked=("0.5.23",),
    ),
    # --- pipeline parallelism (check_server_args, after resolution) ---------------------
    # 0.5.23: entrypoints/engine.py:1165 calls check_server_args() after resolve_once()
    # (line 1153); resolve_once() accepts PP with EAGLE and only turns the overlap schedule
    # off (arg_groups/overrides.py:1623-1628). check_server_args (arg_groups/
    # validation_hook.py:196-197) then runs check_pipeline_parallel_compat: EAGLE only, not
    # multi-layer (lines 132-138), and without SGLANG_ENABLE_PP_SPEC only on a PD prefill
    # node (lines 160-164). Confirmed by running the installed 0.5.23: EAGLE/NEXTN with
    # --pp-size 2 fail with the prefill-node message, EAGLE3 with the EAGLE-only one.
    Rule(
        "pp_speculative",
        "<0.5.11",
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked prefill.",
        lambda f: _pp(f) and _algo(f) is not None,
        error_type="AssertionError",
        where="ServerArgs.check_server_args",
        checked=("0.5.4", "0.5.6", "0.5.7", "0.5.10"),
    ),
    Rule(
        "pp_speculative",
        ">=0.5.11,<0.5.21",
        "Pipeline parallelism is not compatible with overlap schedule, speculative decoding",
        lambda f: _pp(f) and _algo(f) is not None,
        error_type="AssertionError",
        where="check_server_args",
        checked=("0.5.11", "0.5.12", "0.5.13", "0.5.16", "0.5.20"),
    ),
    Rule(
        "pp_speculative",
        ">=0.5.21",
        "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding",
        lambda f: (
            _pp(f)
            and (_algo(f) not in (None, "EAGLE", "DSPARK") or (_algo(f) == "EAGLE" and bool(f.get("enable_multi_layer_eagle"))))
        ),
        error_type="AssertionError",
        where="arg_groups/validation_hook.py:132-138 check_pipeline_parallel_compat (0.5.23)",
        checked=("0.5.21", "0.5.22", "0.5.23"),
    ),
    Rule(
        "pp_speculative_prefill_only",
        ">=0.5.21",
        "PP + speculative decoding (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)",
        lambda f: _pp(f) and _algo(f) == "EAGLE" and f.get("disaggregation_mode", "null") != "prefill",
        error_type="AssertionError",
        where="arg_groups/validation_hook.py:160-164 check_pipeline_parallel_compat (0.5.23)",
        checked=("0.5.21", "0.5.22", "0.5.23"),
        hint="unless SGLANG_ENABLE_PP_SPEC is set",
    ),
    # --- accepted by SGLang's argument code, fails at runtime ---------------------------
    Rule(
        "draft_tokens_exceed_tree",
        ">=0",
        "speculative_num_draft_tokens={speculative_num_draft_tokens} is more than the {max_draft} "
        "tokens a draft tree of speculative_num_steps={speculative_num_steps} and "
        "speculative_eagle_topk={speculative_eagle_topk} holds (1 + topk + (steps - 1) * topk^2); "
        "SGLang accepts these arguments but the server fails at its first decode",
        lambda f: (
            _eagle(f)
            and None not in (f.get(STEPS), f.get(TOPK), f.get(DRAFT))
            and _given(f, TOPK) >= 1
            and _given(f, DRAFT) > max_draft_tokens(_given(f, STEPS), _given(f, TOPK))
        ),
        error_type="RuntimeError",
        origin="autospec",
        where="speculative/eagle_utils.py organize_draft_results (torch.topk of draft - 1 candidates)",
        checked=("0.5.23",),
    ),
)


@lru_cache(maxsize=128)
def applicable_rules(version: Version) -> tuple[Rule, ...]:
    """The rows of :data:`RULES` that apply to this SGLang release, in evaluation order.

    Cached: RULES is immutable, so the rows of a version never change (matching every
    row's specifier took three quarters of a static check)."""
    return tuple(rule for rule in RULES if rule.applies_to(version))


@dataclass(frozen=True)
class Walk:
    """What walking the rows did to a set of flags.

    ``resolved``: the flags after the rewrites that ran (up to the rejection, if any);
    ``rejected``: the first rejecting row, or None; ``fired``: every row that matched
    before it, rewrites and notes, in order."""

    resolved: dict[str, Any]
    rejected: Rule | None = None
    fired: tuple[Rule, ...] = field(default=())

    @property
    def notes(self) -> list[Rule]:
        """The "note" rows that matched (hardware-dependent verdicts)."""
        return [rule for rule in self.fired if rule.effect == "note"]


def walk(flags: Mapping[str, Any], rules: Iterable[Rule], *, stop_at_reject: bool = True) -> Walk:
    """Apply ``rules`` in order: rewrites change the flags, the first rejection stops the
    walk (unless ``stop_at_reject`` is false, when rejections are passed over)."""
    resolved = dict(flags)
    fired: list[Rule] = []
    for rule in rules:
        if not rule.check(resolved):
            continue
        if rule.effect == "reject":
            if stop_at_reject:
                return Walk(resolved, rule, tuple(fired))
            continue
        if rule.effect == "rewrite":
            resolved = rule.rewrite(resolved)  # type: ignore[misc]
        fired.append(rule)
    return Walk(resolved, None, tuple(fired))
