"""The simulator's performance and memory model of an SGLang server with speculative
decoding. Pure functions of a `Profile` and a resolved `ServerConfig`; no I/O, no clock.

Pipeline:  flags --resolve_args--> ServerConfig --init_outcome--> InitOutcome
           ServerConfig --accept_length / step_seconds / prefill_seconds--> speed

1. Arguments (`resolve_args`). SGLang's rewrites: NEXTN -> EAGLE; all three of
   steps/topk/draft unset -> the profile's automatic choice (`defaults.auto_spec`);
   topk == 1 forces draft = steps + 1; max_running_requests unset under speculation ->
   48 (applied before the memory model caps it); unset attention backend, page size,
   CUDA-graph batch size and memory fraction -> the profile's defaults. What SGLang
   rejects at argument time raises `ArgumentRejected` with SGLang's message; which rules
   apply depends on the profile's `sglang_version` (see the comment above `resolve_args`).

2. Memory, per GPU (`init_outcome`). With total memory M, fraction f, tensor-parallel
   size tp (x pipeline size pp):
       weights   W = weights_gb / (tp*pp),   draft  Wd = draft_weights_gb / (tp*pp)
       pre       P = M - runtime_overhead_gb      (free memory before loading)
       reserve   R = fixed_state_gb + spec_state_gb * slots * D
                 slots = the requested max_running_requests (user value, or 48 under
                         speculation; / dp_size with DP attention), D = draft tokens (0
                         without speculation). This is the hybrid-model (GDN) effect of the hand-tuning sweep's Qwen3.5-122B:
                         SGLang keeps an intermediate recurrent state per request slot and
                         draft position (sglang 0.5.10 handle_max_mamba_cache), so every
                         extra step costs a fixed slice of the KV pool (~80k tokens).
       KV pool   K = f*P - W - Wd - R
       max_total_num_tokens T = floor(K / (kv_bytes_per_token / tp)) (no /tp for MLA, whose
                         latent KV every rank holds in full), rounded down to
                         page_size;  K <= 0 or T < min_kv_tokens  ->  "kv_pool_too_small".
                         For a hybrid model kv_bytes_per_token is effective: SGLang splits
                         what is left between recurrent state and KV at a fixed ratio, so
                         both scale with K.
       max_running_requests = min(requested, floor(T / tokens_per_running_request))
                         (SGLang: max_mamba_cache_size // ratio, proportional to T)
       headroom  H = (1-f)*P must cover
                 activation_gb + G,  G = cuda_graph_base_gb + cuda_graph_gb_per_token *
                 cuda_graph_max_bs * (draft + steps*topk) (x tree_graph_factor if topk > 1)
                 else "cuda_graph_oom";  W + Wd > P -> "weights_oom"; an EAGLE tree with
                 draft > 1 + topk + (steps-1)*topk^2 (`max_draft_tokens`, SGLang's own
                 limit) -> "invalid_draft_tree" (fails in graph capture); tp*pp above the
                 profile's GPU count -> "too_few_gpus" (a rank's set_device fails).
       draft KV  the draft's share of K (in proportion to its weights) is charged in the
                 target's dtype; with --speculative-draft-kv-cache-dtype fp8 (0.5.23
                 profiles) the draft allocates half of it, and the rest stays free: H
                 gains it, the memory used loses it (`draft_kv_freed_gb`).
   Order of checks (as SGLang initialises): GPUs, weights, KV pool, draft-tree size, graphs.

3. Acceptance (`accept_length`). Per-position top-1 acceptance at depth i:
       a_i = base[workload] * decay^((i-1)^decay_power) * exp(-temperature_penalty * T)   (x ngram_factor for NGRAM)
   A chain (topk == 1, depth = steps) emits E = 1 + sum_{i=1..steps} prod_{j<=i} a_j
   tokens per verify step. A tree (topk > 1) has a budget of draft-1 nodes, at most topk
   candidates per depth and at most `steps` depths (the accepted path's candidates: at
   each depth only the topk children of the accepted parent can match, so the nodes SGLang
   allows beyond steps*topk + 1, up to `max_draft_tokens`, hang under other parents and add
   verify cost but no acceptance); m candidates at depth i accept with
       p_i(m) = a_i + (1 - a_i) * (1 - (1 - tree_gain)^(m-1))
   (each extra candidate catches a share `tree_gain` of the remaining misses), and the
   budget is allocated greedily, one node at a time, to whichever of "one more depth" or
   "one more candidate at depth i" raises E most. E = 1 + sum_i prod_{j<=i} p_j. With
   topk == 1 this is the chain formula; more budget never lowers E.

4. Step cost (`step_seconds`), for B running requests, D draft tokens, S steps, k = topk:
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

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from packaging.version import Version

from autospec.sim.choices import ALGORITHMS, ATTENTION_BACKENDS
from autospec.sim.profile import WORKLOADS, Profile

__all__ = [
    "ALGORITHMS",
    "ATTENTION_BACKENDS",
    "ArgumentRejected",
    "InitOutcome",
    "ServerConfig",
    "accept_length",
    "accept_length_distribution",
    "acceptance_per_depth",
    "classify_prompt",
    "draft_tree_invalid",
    "gpus_needed",
    "init_outcome",
    "max_draft_tokens",
    "prefill_seconds",
    "resolve_args",
    "step_seconds",
    "tree_shape",
]

#: SGLang resets an unset --max-running-requests to this under speculative decoding
#: ("Max running requests is reset to 48 for speculative decoding." -- 0.5.x, 0.5.16 log)
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48
#: SGLang's cap on the request-slot pool when nothing else limits it (generic default)
GENERIC_MAX_RUNNING_REQUESTS = 4096

#: SGLang's "GB" in its log lines is 2**30 bytes; the profile's sizes use the same unit
GB = float(2**30)

INIT_STATUSES = ("ok", "kv_pool_too_small", "cuda_graph_oom", "weights_oom", "invalid_draft_tree", "too_few_gpus")


class ArgumentRejected(ValueError):
    """SGLang rejected the flags at argument time; str(e) is SGLang's own message.

    `exc_type` is the exception class SGLang raises ("ValueError", "AssertionError",
    "TypeError"); the last line of the real traceback is f"{exc_type}: {message}"
    (`traceback_line`). The real server exits non-zero within about a second."""

    def __init__(self, message: str, exc_type: str = "ValueError") -> None:
        super().__init__(message)
        self.exc_type = exc_type

    @property
    def traceback_line(self) -> str:
        text = str(self)
        return f"{self.exc_type}: {text}" if text else self.exc_type


@dataclass(frozen=True)
class ServerConfig:
    """Server flags after SGLang's rewrites (speculative fields are 0 without speculation)."""

    model_path: str
    tp_size: int
    speculative_algorithm: str | None  # None = no speculation; NEXTN already rewritten to EAGLE
    speculative_num_steps: int
    speculative_eagle_topk: int
    speculative_num_draft_tokens: int
    mem_fraction_static: float
    max_running_requests: int | None  # None = not set by the user
    cuda_graph_max_bs: int
    attention_backend: str
    page_size: int
    context_length: int | None
    enable_dp_attention: bool
    dp_size: int
    pp_size: int
    #: --speculative-draft-kv-cache-dtype (sglang 0.5.23): the draft pool's KV dtype; None
    #: or "auto" = the target's (the simulator's KV is bf16, as its log line says)
    speculative_draft_kv_cache_dtype: str | None = None
    #: SGLang's warning lines for the rewrites it applied, in order, worded as the profile's
    #: sglang_version logs them (e.g. "Max running requests is reset to 48 ..."); not a flag
    notes: tuple[str, ...] = ()

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None

    def as_dict(self) -> dict[str, Any]:
        """Flag name -> value, as SGLang's /server_info reports resolved arguments."""
        data = asdict(self)
        data.pop("notes")
        return data


@dataclass(frozen=True)
class InitOutcome:
    """What server start-up ends in. Sizes are per GPU in GB."""

    status: str  # one of INIT_STATUSES
    message: str  # failures: the exact SGLang error text the real server prints; "" for ok
    max_total_num_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem_gb: float  # free after init (SGLang's available_gpu_mem)
    gpu_mem_used_gb: float  # held by the server process after init (or at the failure)
    weights_gb: float
    kv_cache_gb: float
    cuda_graph_gb: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# --------------------------------------------------------------------------- arguments
#
# Rules and wording checked against the released wheels of sglang 0.5.4, 0.5.5, 0.5.6,
# 0.5.7, 0.5.10, 0.5.12, 0.5.13, 0.5.16, 0.5.20-0.5.23 (server_args.py
# _handle_speculative_decoding up to 0.5.12; arg_groups/speculative_hook.py from 0.5.13;
# check_server_args / validation_hook.py for pipeline parallelism). Releases in between
# were not checked; each boundary below is the first checked release with the new rule
# (the pipeline-parallel rows follow autospec's static rules, which also read 0.5.11).
# tests/feasibility/test_rules_vs_sim.py holds these rules against feasibility/rules.py.


@lru_cache(maxsize=512)
def version_at_least(version: str, minimum: str) -> bool:
    """True if release `version` is `minimum` or newer (PEP 440 order: 0.5.13rc1 is older
    than 0.5.13, 0.5.16.post1 newer than 0.5.16). Cached: parsing dominated resolve_args."""
    return Version(version) >= Version(minimum)


def tree_paged_backends(version: str) -> tuple[str, ...]:
    """Attention backends on which EAGLE accepts topk > 1 with page_size > 1.

    <= 0.5.5: flashinfer only; 0.5.6-0.5.12: flashinfer, fa3; >= 0.5.13: flashinfer, fa3, triton."""
    if version_at_least(version, "0.5.13"):
        return ("flashinfer", "fa3", "triton")
    if version_at_least(version, "0.5.6"):
        return ("flashinfer", "fa3")
    return ("flashinfer",)


def _tree_paged_message(version: str, backend: str) -> str:
    if version_at_least(version, "0.5.13"):
        allowed = tree_paged_backends(version)
        return (
            f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {allowed}; "
            f"got attention_backend={backend!r}. Use page_size == 1 or one of those backends."
        )
    return (
        "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
        "for paged attention backends. This combination is only supported for the 'flashinfer' backend."
    )


_MSG_TRTLLM_TOPK = "trtllm_mha backend only supports topk = 1 for speculative decoding."
_MSG_NGRAM_PAGED = (
    "speculative_eagle_topk({topk}) > 1 with page_size({page}) > 1 is unstable "
    "and produces incorrect results for paged attention backends. "
    "This combination is only supported for the 'flashinfer' backend."
)
_MSG_STANDALONE_DP = "Currently standalone speculative decoding does not support dp attention."
_MSG_NGRAM_DP = "Currently ngram speculative decoding does not support dp attention."
_MSG_NONE_COMPARE = "'>' not supported between instances of 'NoneType' and 'int'"
_NOTE_MRR = "Max running requests is reset to 48 for speculative decoding."
_NOTE_MRR_OVERRIDE = " You can override this by explicitly setting --max-running-requests."
_NOTE_DRAFT = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
_NOTE_NGRAM_DRAFT = (
    "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
    "You can override this by explicitly setting --speculative-num-draft-tokens."
)


# sglang 0.5.23 arg_groups/speculative_hook.py (_maybe_disable_adaptive, _init_adaptive_speculative_params)
# and speculative/adaptive_spec_params.py (DEFAULT_ADAPTIVE_CONFIG's candidate steps, all batch sizes together)
_ADAPTIVE_STEPS = (0, 1, 3, 5, 7)
_NOTE_ADAPTIVE_OFF = "speculative_adaptive disabled: {reason}. Falling back to static speculative params."
_MSG_ADAPTIVE_STEPS = (
    "--speculative-num-steps={steps} is not in the adaptive config candidate_steps {candidates}. Pass one of those values."
)
_MSG_PP_EAGLE_ONLY = "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding"
_MSG_PP_PREFILL_ONLY = "PP + speculative decoding (MTP) is only supported on prefill nodes (disaggregation-mode=prefill)"


def _pp_message(version: str, algo: str, flags: Mapping[str, Any]) -> str | None:
    """AssertionError text of ``check_server_args`` for speculation with pipeline
    parallelism, or None if accepted.

    The check runs after resolution: 0.5.23 ``entrypoints/engine.py:1165`` calls
    ``server_args.check_server_args()`` after ``resolve_once()`` (line 1153), and
    ``arg_groups/validation_hook.py:196-197`` calls ``check_pipeline_parallel_compat``
    for pp_size > 1. ``resolve_once`` alone accepts PP with EAGLE (it only turns the overlap
    schedule off, ``arg_groups/overrides.py:1623-1628``); ``check_pipeline_parallel_compat``
    then allows EAGLE (NEXTN after its rewrite), not multi-layer, and only on a PD prefill
    node (``validation_hook.py:132-138`` and ``160-164``) unless ``SGLANG_ENABLE_PP_SPEC``
    is set, which the simulator (like autospec's static rules) takes as unset. Checked by
    running 0.5.23's ``prepare_server_args(argv).resolve_once()`` + ``check_server_args()``:
    EAGLE/NEXTN with --pp-size 2 fails with the prefill-node message, EAGLE3 with the
    EAGLE-only one, EAGLE with --disaggregation-mode prefill passes. The 0.5.21 and 0.5.22
    rows are autospec's static rules' reading (feasibility/rules.py ``pp_speculative``);
    the wording without "mixed chunked prefill" is the one of 0.5.11-0.5.20."""
    if version_at_least(version, "0.5.21"):
        if algo != "EAGLE" or flags.get("enable_multi_layer_eagle"):
            return _MSG_PP_EAGLE_ONLY
        if _flag(flags, "disaggregation_mode") != "prefill":
            return _MSG_PP_PREFILL_ONLY
        return None
    if version_at_least(version, "0.5.11"):
        return "Pipeline parallelism is not compatible with overlap schedule, speculative decoding"
    return "Pipeline parallelism is not compatible with overlap schedule, speculative decoding, mixed chunked prefill."


def _flag(flags: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = flags.get(name)
        if value is not None:
            return value
    return None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


#: algorithms sglang 0.5.23 serves that the simulator does not model (no draft-block acceptance model)
UNMODELLED_ALGORITHMS = ("DFLASH", "DSPARK")


#: bytes per KV element of --speculative-draft-kv-cache-dtype's values (sglang 0.5.23
#: choices; "auto" follows the target, bf16 in the simulator)
DRAFT_KV_BYTES = {"auto": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "bf16": 2, "bfloat16": 2}
#: the first release whose draft KV dtype the simulator models (the flag is 0.5.19-0.5.23's)
DRAFT_KV_DTYPE_SINCE = "0.5.23"


def _refuse_unmodelled(version: str, algo: str | None, flags: Mapping[str, Any]) -> None:
    """Refuse, in one line that says so, what sglang 0.5.23 accepts but the simulator does not
    model: DFLASH and DSPARK (block-diffusion drafts), and a draft KV-cache dtype other than
    the target's (``--speculative-draft-kv-cache-dtype``) with a profile of an older release
    than 0.5.23 (from 0.5.23 it is modelled: `draft_kv_freed_gb`)."""
    fix = "measure it on real SGLang (--server-command), or leave it out of the search space"
    if algo in UNMODELLED_ALGORITHMS:
        raise ArgumentRejected(f"the simulator does not model --speculative-algorithm {algo} (sglang 0.5.23 serves it); {fix}")
    dtype = _flag(flags, "speculative_draft_kv_cache_dtype")
    if dtype not in (None, "auto") and not version_at_least(version, DRAFT_KV_DTYPE_SINCE):
        raise ArgumentRejected(
            f"the simulator does not model --speculative-draft-kv-cache-dtype {dtype} with a profile of sglang "
            f"{version} (sglang 0.5.23 accepts it; use a 0.5.23 profile); {fix}"
        )


def resolve_args(profile: Profile, flags: Mapping[str, Any]) -> ServerConfig:
    """Apply SGLang's rewrites and argument-time rejections to `flags` (ServerArgs field
    names, values already typed; unknown names are ignored). Raises ArgumentRejected with
    the wording of the profile's sglang_version."""
    version = profile.sglang_version
    algo = _flag(flags, "speculative_algorithm")
    algo = str(algo).upper() if algo else None
    _refuse_unmodelled(version, algo, flags)
    if algo is not None and algo not in ALGORITHMS:
        choices = ", ".join(repr(a) for a in ALGORITHMS)
        raise ArgumentRejected(
            f"argument --speculative-algorithm: invalid choice: '{algo}' (choose from {choices})", "SystemExit"
        )
    if algo == "NEXTN":  # SGLang: NEXTN (MTP heads) is an alias of EAGLE
        algo = "EAGLE"
    backend = str(_flag(flags, "attention_backend") or profile.attention_backend)
    page_size = int(_flag(flags, "page_size") or profile.page_size)
    dp_attention = bool(flags.get("enable_dp_attention") or False)
    pp_size = int(_flag(flags, "pp_size", "pipeline_parallel_size") or 1)
    mrr = _opt_int(_flag(flags, "max_running_requests"))
    notes: list[str] = []
    steps = topk = draft = 0

    if algo is not None and flags.get("speculative_adaptive"):
        flags = _adaptive_flags(algo, flags, dp_attention, notes)
    if algo is not None:
        if mrr is None:
            notes.append(_NOTE_MRR + (_NOTE_MRR_OVERRIDE if version_at_least(version, "0.5.7") else ""))
        steps, topk, draft = (
            _resolve_ngram(flags, backend, page_size, dp_attention, notes)
            if algo == "NGRAM"
            else _resolve_eagle(profile, algo, flags, backend, page_size, dp_attention, notes)
        )
        pp_problem = _pp_message(version, algo, flags) if pp_size > 1 else None
        if pp_problem:
            raise ArgumentRejected(pp_problem, "AssertionError")

    context = _flag(flags, "context_length")
    return ServerConfig(
        model_path=str(_flag(flags, "model_path") or profile.model_name),
        tp_size=int(_flag(flags, "tp_size", "tensor_parallel_size") or profile.tp_size),
        speculative_algorithm=algo,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        mem_fraction_static=float(_flag(flags, "mem_fraction_static") or profile.mem_fraction_static),
        max_running_requests=mrr,
        cuda_graph_max_bs=int(_flag(flags, "cuda_graph_max_bs", "cuda_graph_max_bs_decode") or profile.cuda_graph_max_bs),
        attention_backend=backend,
        page_size=page_size,
        context_length=int(context) if context is not None else None,
        enable_dp_attention=dp_attention,
        dp_size=int(_flag(flags, "dp_size", "data_parallel_size") or 1),
        pp_size=pp_size,
        speculative_draft_kv_cache_dtype=_flag(flags, "speculative_draft_kv_cache_dtype"),
        notes=tuple(notes),
    )


def _adaptive_flags(algo: str, flags: Mapping[str, Any], dp_attention: bool, notes: list[str]) -> Mapping[str, Any]:
    """``--speculative-adaptive`` at argument time, as sglang 0.5.23 resolves it: EAGLE and
    EAGLE3 with top-k 1 and no DP attention start at the middle candidate step (3 with the
    default config) with draft = steps + 1; others fall back to static parameters with a
    warning. The simulator then serves those static parameters: it does not model the
    runtime switching of steps per batch size."""
    topk = _opt_int(flags.get("speculative_eagle_topk"))
    reason = None
    if algo not in ("EAGLE", "EAGLE3"):
        reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    elif topk is not None and topk != 1:
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    elif dp_attention:
        reason = "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    if reason is not None:
        notes.append(_NOTE_ADAPTIVE_OFF.format(reason=reason))
        return flags
    steps = _opt_int(flags.get("speculative_num_steps"))
    steps = _ADAPTIVE_STEPS[len(_ADAPTIVE_STEPS) // 2] if steps is None else steps
    if steps not in _ADAPTIVE_STEPS:
        raise ArgumentRejected(_MSG_ADAPTIVE_STEPS.format(steps=steps, candidates=list(_ADAPTIVE_STEPS)), "ValueError")
    return {**flags, "speculative_num_steps": steps, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": steps + 1}


def _resolve_eagle(
    profile: Profile, algo: str, flags: Mapping[str, Any], backend: str, page_size: int, dp_attention: bool, notes: list[str]
) -> tuple[int, int, int]:
    """EAGLE / EAGLE3 / STANDALONE, in the order SGLang checks them."""
    if algo == "STANDALONE" and dp_attention:
        raise ArgumentRejected(_MSG_STANDALONE_DP)
    steps = _opt_int(flags.get("speculative_num_steps"))
    topk = _opt_int(flags.get("speculative_eagle_topk"))
    draft = _opt_int(flags.get("speculative_num_draft_tokens"))
    if steps is None:
        if topk is not None or draft is not None:  # SGLang: a bare `assert topk is None and draft is None`
            raise ArgumentRejected("", "AssertionError")
        steps, topk, draft = (3, 1, 4) if algo == "STANDALONE" else profile.auto_spec
    if backend == "trtllm_mha":
        if topk is None:
            raise ArgumentRejected(_MSG_NONE_COMPARE, "TypeError")
        if topk > 1:
            raise ArgumentRejected(_MSG_TRTLLM_TOPK)
    if topk == 1 and draft != steps + 1:
        notes.append(_NOTE_DRAFT)
        draft = steps + 1
    if topk is None:
        raise ArgumentRejected(_MSG_NONE_COMPARE, "TypeError")
    if topk > 1 and page_size > 1 and backend not in tree_paged_backends(profile.sglang_version):
        raise ArgumentRejected(_tree_paged_message(profile.sglang_version, backend))
    if draft is None:  # topk > 1 without draft tokens: SGLang fails on the first use of the None
        raise ArgumentRejected("unsupported operand type(s) for -: 'NoneType' and 'int'", "TypeError")
    for name, value in (
        ("speculative_num_steps", steps),
        ("speculative_eagle_topk", topk),
        ("speculative_num_draft_tokens", draft),
    ):
        if value < 1:
            raise ArgumentRejected(f"{name} must be a positive integer, got {value}", "ValueError")
    return steps, topk, draft


def _resolve_ngram(
    flags: Mapping[str, Any], backend: str, page_size: int, dp_attention: bool, notes: list[str]
) -> tuple[int, int, int]:
    """NGRAM: topk := speculative_ngram_max_bfs_breadth (default 10); draft defaults to 12."""
    topk = int(flags.get("speculative_ngram_max_bfs_breadth") or 10)
    draft = _opt_int(flags.get("speculative_num_draft_tokens"))
    if draft is None:
        notes.append(_NOTE_NGRAM_DRAFT)
        draft = 12
    steps = _opt_int(flags.get("speculative_num_steps")) or max(draft // topk, 1)
    if topk > 1 and page_size > 1 and backend != "flashinfer":
        raise ArgumentRejected(_MSG_NGRAM_PAGED.format(topk=topk, page=page_size))
    if dp_attention:
        raise ArgumentRejected(_MSG_NGRAM_DP)
    return steps, topk, draft


# --------------------------------------------------------------------------- draft tree, GPUs


def max_draft_tokens(steps: int, topk: int) -> int:
    """Most draft tokens an EAGLE tree of `steps` and `topk` can verify: 1 + topk +
    (steps - 1) * topk^2 (steps + 1 for a chain).

    SGLang's own limit, checked in sglang 0.5.23 ``speculative/eagle_utils.py``
    ``organize_draft_results`` (lines 100-129): ``torch.topk(scores, num_draft_tokens - 1)``
    over the ``topk + (steps - 1) * topk**2`` scored candidates of the draft steps; more
    fails ("selected index k out of range") while the CUDA graphs are captured. SGLang's
    argument code does not check it. The simulator cannot import autospec, so this is its
    own copy of ``autospec.sglang_facts.max_draft_tokens``; a test holds the two together.
    """
    return 1 + topk + (steps - 1) * topk * topk


def draft_tree_invalid(cfg: ServerConfig) -> bool:
    """True when an EAGLE-family config asks for more draft tokens than its tree holds
    (`max_draft_tokens`). NGRAM verifies a trie from its own worker, with no such limit."""
    if not cfg.speculative or cfg.speculative_algorithm == "NGRAM":
        return False
    return cfg.speculative_num_draft_tokens > max_draft_tokens(cfg.speculative_num_steps, cfg.speculative_eagle_topk)


def gpus_needed(cfg: ServerConfig) -> int:
    """GPUs one server uses: tp_size * pp_size (SGLang gives each TP/PP rank its own GPU id,
    base_gpu_id + (pp_rank * tp_size + tp_rank) * gpu_id_step; DP replicas without DP
    attention are not modelled)."""
    return cfg.tp_size * max(cfg.pp_size, 1)


#: What a rank whose GPU id is not below the device count dies with: sglang 0.5.23
#: ``model_executor/model_runner.py:455`` (``ModelRunner.__init__``) calls
#: ``torch.get_device_module(self.device).set_device(get_device().gpu_id)``, and CUDA
#: rejects the ordinal. Worded as captured from torch 2.11.0+cu130 on a 1-GPU H200
#: (``torch.cuda.set_device(1)``); the first line is what the launcher's classifier matches.
MSG_INVALID_DEVICE = (
    "torch.AcceleratorError: CUDA error: invalid device ordinal\n"
    "GPU device may be out of range, do you have enough GPUs?\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, "
    "so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
)


# --------------------------------------------------------------------------- memory


def _effective_draft(cfg: ServerConfig) -> int:
    """Draft positions that keep per-request state. SGLang sizes the hybrid model's
    intermediate SSM-state cache as [layers, slots, speculative_num_draft_tokens, ...]
    (sglang 0.5.10 mem_cache/memory_pool.py; the draft tokens already count every tree
    node, so trees pay for their node budget, not for topk on top of it)."""
    return cfg.speculative_num_draft_tokens if cfg.speculative else 0


def requested_running_requests(cfg: ServerConfig) -> int:
    """max_running_requests before the memory cap: the user's value, 48 under speculation."""
    if cfg.max_running_requests is not None:
        return cfg.max_running_requests
    return SPEC_DEFAULT_MAX_RUNNING_REQUESTS if cfg.speculative else GENERIC_MAX_RUNNING_REQUESTS


def spec_reserve_gb(profile: Profile, cfg: ServerConfig) -> float:
    """Per-GPU static memory taken before the KV pool: fixed state + per-draft-position state.

    sglang 0.5.10 model_runner_kv_cache_mixin.handle_max_mamba_cache reserves
    mamba_cache_per_req * max_running_requests (// dp_size under DP attention) *
    speculative_num_draft_tokens before splitting the rest between recurrent state and KV;
    max_running_requests there is the requested value (48 when unset under speculation)."""
    slots = requested_running_requests(cfg)
    if cfg.enable_dp_attention and cfg.dp_size > 1:
        slots //= cfg.dp_size
    return profile.fixed_state_gb + profile.spec_state_gb * slots * _effective_draft(cfg)


def cuda_graph_gb(profile: Profile, cfg: ServerConfig) -> float:
    """Per-GPU memory of the captured CUDA graphs (verify + draft graphs under speculation)."""
    if cfg.speculative:
        per_slot = cfg.speculative_num_draft_tokens + cfg.speculative_num_steps * cfg.speculative_eagle_topk
    else:
        per_slot = 1
    g = profile.cuda_graph_base_gb + profile.cuda_graph_gb_per_token * cfg.cuda_graph_max_bs * per_slot
    if cfg.speculative and cfg.speculative_eagle_topk > 1:
        g *= profile.tree_graph_factor
    return g


def draft_kv_gb(profile: Profile, cfg: ServerConfig, kv_gb: float) -> float:
    """The draft model's share of the KV pool, GB per GPU in the target's dtype: in
    proportion to its weights (as the start-up log splits the pool); 0 without one."""
    if not cfg.speculative or cfg.speculative_algorithm == "NGRAM" or not profile.draft_weights_gb:
        return 0.0
    return max(kv_gb, 0.0) * profile.draft_weights_gb / (profile.weights_gb + profile.draft_weights_gb)


def draft_kv_ratio(cfg: ServerConfig) -> float:
    """Draft KV dtype bytes / target KV dtype bytes (the simulator's KV is bf16)."""
    return DRAFT_KV_BYTES.get(cfg.speculative_draft_kv_cache_dtype or "auto", 2) / 2


def draft_kv_freed_gb(profile: Profile, cfg: ServerConfig, kv_gb: float) -> float:
    """GB per GPU a draft pool in a smaller dtype leaves free: sglang 0.5.23 charges an
    EAGLE-family draft's pool at the target's dtype when it sizes the pool
    (model_executor/pool_configurator.py DefaultPoolConfigurator), then the draft worker
    allocates it in its own; the rest stays free after start-up."""
    return draft_kv_gb(profile, cfg, kv_gb) * (1.0 - draft_kv_ratio(cfg))


def _gb(x: float) -> float:
    return round(x, 2)


def init_outcome(profile: Profile, cfg: ServerConfig) -> InitOutcome:
    """Server start-up under the memory model (module docstring, section 2)."""
    total = profile.gpu_mem_gb
    context_len = cfg.context_length or profile.context_len
    if gpus_needed(cfg) > profile.gpu_count:  # a rank's set_device fails before anything loads
        return InitOutcome("too_few_gpus", MSG_INVALID_DEVICE, 0, 0, context_len, _gb(total), 0.0, 0.0, 0.0, 0.0)
    pre = total - profile.runtime_overhead_gb  # free before loading (SGLang's pre_model_load_memory)
    shards = cfg.tp_size * max(cfg.pp_size, 1)
    weights = profile.weights_gb / shards
    draft = profile.draft_weights_gb / shards if cfg.speculative and cfg.speculative_algorithm != "NGRAM" else 0.0
    f = cfg.mem_fraction_static
    loaded = weights + draft

    def outcome(
        status: str, message: str, used: float, kv: float = 0.0, graph: float = 0.0, tokens: int = 0, mrr: int = 0
    ) -> InitOutcome:
        used = min(used, total)
        return InitOutcome(
            status, message, tokens, mrr, context_len, _gb(total - used), _gb(used), _gb(loaded), _gb(kv), _gb(graph)
        )

    if loaded > pre:
        return outcome("weights_oom", _weights_oom_message(profile, pre), total)

    kv_gb = f * pre - loaded - spec_reserve_gb(profile, cfg)
    kv_bytes = profile.kv_bytes_per_token if profile.kv_replicated else profile.kv_bytes_per_token / cfg.tp_size
    tokens = int(max(kv_gb, 0.0) * GB // kv_bytes)
    tokens -= tokens % max(cfg.page_size, 1)
    if kv_gb <= 0 or tokens < profile.min_kv_tokens:
        return outcome("kv_pool_too_small", _kv_message(profile, cfg, kv_gb, loaded / pre), profile.runtime_overhead_gb + loaded)

    slots = requested_running_requests(cfg)
    cap = int(tokens // profile.tokens_per_running_request) if profile.tokens_per_running_request else slots
    mrr = max(min(slots, cap), 1)
    freed = draft_kv_freed_gb(profile, cfg, kv_gb)  # a smaller draft dtype: left free in the static budget
    static_used = profile.runtime_overhead_gb + f * pre - freed
    if draft_tree_invalid(cfg):
        return outcome(
            "invalid_draft_tree",
            _graph_failure_message(profile, "selected index k out of range"),
            static_used,
            kv=kv_gb,
            tokens=tokens,
            mrr=mrr,
        )
    graph = cuda_graph_gb(profile, cfg)
    headroom = (1.0 - f) * pre + freed
    if headroom < profile.activation_gb + graph:
        free = max(headroom - profile.activation_gb, 0.0)
        torch_error = _torch_oom_text(
            profile, alloc_gb=graph - free + 0.25, free_gb=free, in_use_gb=total - free, private_pools_gb=free * 0.9
        )
        return outcome("cuda_graph_oom", _graph_failure_message(profile, torch_error), total, kv=kv_gb, tokens=tokens, mrr=mrr)
    used = static_used + graph
    return outcome("ok", "", used, kv=kv_gb, graph=graph, tokens=tokens, mrr=mrr)


def _kv_message(profile: Profile, cfg: ServerConfig, kv_gb: float, minimum: float) -> str:
    """SGLang's KV-pool failure, worded as the profile's release prints it."""
    version = profile.sglang_version
    f = cfg.mem_fraction_static
    if version_at_least(version, "0.5.16") and kv_gb <= 0:
        # mem_cache/kv_cache_configurator.py _profile_available_bytes (0.5.16; real log in
        # data/real-sglang-0.5.16-h200/kvsmall.log). It fires when the static budget minus
        # the loaded weights minus the hybrid-state pool is <= 0; "minimum" counts weights only.
        suggested = math.ceil(minimum * 1000) / 1000
        return (
            f"ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={f}. "
            f"Raise --mem-fraction-static above {suggested:.3f} "
            f"(minimum viable = 1 - available/pre = {minimum:.4f}). If using speculative "
            "decoding, draft weights are now counted."
        )
    base = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    if version_at_least(version, "0.5.12"):  # pool_configurator.MemoryPoolConfig, built without the fraction
        return base
    if version_at_least(version, "0.5.10"):  # MemoryPoolConfig(..., mem_fraction_static=...)
        return f"{base} Current value: mem_fraction_static={f}"
    return f"{base} Current value: self.server_args.mem_fraction_static={f}"  # f"{x=}" in model_runner


def _graph_failure_message(profile: Profile, error: str) -> str:
    """`Exception: Capture cuda graph failed: <error>` plus the advice block of that release."""
    if version_at_least(profile.sglang_version, "0.5.16"):
        advice = (
            "Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
            "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
            "(Not recommended. Huge performance loss)\n"
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
        )
    else:
        advice = (
            "Possible solutions:\n"
            "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
            "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
            "3. disable torch compile by not using --enable-torch-compile\n"
            "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
            "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
        )
    return f"Exception: Capture cuda graph failed: {error}\n{advice}"


def format_size(n_bytes: float) -> str:
    """PyTorch's c10 format_size: bytes / KiB / MiB / GiB with two decimals."""
    n = int(max(n_bytes, 0))
    if n <= 1024:
        return f"{n} bytes"
    if n <= 1048576:
        return f"{n / 1024:.2f} KiB"
    if n <= 1073741824:
        return f"{n / 1048576:.2f} MiB"
    return f"{n / 1073741824:.2f} GiB"


def _torch_oom_text(profile: Profile, alloc_gb: float, free_gb: float, in_use_gb: float, private_pools_gb: float = 0.0) -> str:
    """str(torch.OutOfMemoryError) as CUDACachingAllocator words it (torch 2.8-2.11)."""
    allocated = max(in_use_gb - 0.5, 0.0)
    pools = (
        f"with {format_size(private_pools_gb * GB)} allocated in private pools (e.g., CUDA Graphs), "
        if private_pools_gb > 0
        else ""
    )
    return (
        f"CUDA out of memory. Tried to allocate {format_size(max(alloc_gb, 0.02) * GB)}. GPU 0 has a total "
        f"capacity of {format_size(profile.gpu_mem_gb * GB)} of which {format_size(free_gb * GB)} is free. "
        f"Including non-PyTorch memory, this process has {format_size(in_use_gb * GB)} memory in use. "
        f"Of the allocated memory {format_size(allocated * GB)} is allocated by PyTorch, {pools}"
        f"and {format_size(0.25 * GB)} is reserved by PyTorch but unallocated. If reserved but unallocated "
        "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _weights_oom_message(profile: Profile, pre: float) -> str:
    """The last line of the weight-loading traceback when the shard does not fit."""
    return "torch.OutOfMemoryError: " + _torch_oom_text(profile, alloc_gb=1.25, free_gb=0.0, in_use_gb=pre)


# --------------------------------------------------------------------------- acceptance


def acceptance_per_depth(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    """Top-1 acceptance a_i for depths 1..steps (empty without speculation)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}")
    if not cfg.speculative:
        return []
    base = profile.accept_base_for(workload) * math.exp(-profile.temperature_penalty * max(temperature, 0.0))
    if cfg.speculative_algorithm == "NGRAM":
        base *= profile.ngram_factor
    # NGRAM drafts from a suffix trie, whose depth is bounded by the draft tokens, not by steps
    depth = cfg.speculative_num_draft_tokens - 1 if cfg.speculative_algorithm == "NGRAM" else cfg.speculative_num_steps
    return [min(base * profile.accept_decay ** (i**profile.decay_power), 1.0) for i in range(depth)]


def _tree_accept(a: float, m: int, gain: float) -> float:
    return a + (1.0 - a) * (1.0 - (1.0 - gain) ** (m - 1))


def _expected(ps: list[float]) -> float:
    e, prod = 1.0, 1.0
    for p in ps:
        prod *= p
        e += prod
    return e


def tree_shape(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[int]:
    """Candidates per depth of the draft tree (greedy allocation of draft-1 nodes)."""
    a = acceptance_per_depth(profile, cfg, workload, temperature)
    if not a:
        return []
    topk = cfg.speculative_eagle_topk
    budget = cfg.speculative_num_draft_tokens - 1
    if topk <= 1:
        return [1] * min(len(a), max(budget, 0))
    shape: list[int] = []
    gain = profile.tree_gain
    for _ in range(max(budget, 0)):
        current = _expected([_tree_accept(a[i], m, gain) for i, m in enumerate(shape)])
        best: int | None = None  # the depth that grows; len(shape) = one level deeper
        best_gain = -1.0
        if len(shape) < len(a):
            trial = shape + [1]
            best = len(shape)
            best_gain = _expected([_tree_accept(a[i], m, gain) for i, m in enumerate(trial)]) - current
        for i, m in enumerate(shape):
            if m < topk:
                trial = shape.copy()
                trial[i] += 1
                g = _expected([_tree_accept(a[j], n, gain) for j, n in enumerate(trial)]) - current
                if g > best_gain + 1e-15:
                    best, best_gain = i, g
        if best is None:
            break
        if best == len(shape):
            shape.append(1)
        else:
            shape[best] += 1
    return shape


def _path_acceptance(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    a = acceptance_per_depth(profile, cfg, workload, temperature)
    shape = tree_shape(profile, cfg, workload, temperature)
    return [_tree_accept(a[i], m, profile.tree_gain) for i, m in enumerate(shape)]


def accept_length(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> float:
    """E[tokens emitted per verify step] (>= 1; exactly 1 without speculation)."""
    return _expected(_path_acceptance(profile, cfg, workload, temperature))


def accept_length_distribution(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    """P(a verify step emits k tokens) for k = 1..max(draft, 1); its mean is accept_length."""
    ps = _path_acceptance(profile, cfg, workload, temperature)
    size = max(cfg.speculative_num_draft_tokens, len(ps) + 1, 1)
    probs = [0.0] * size
    reach = 1.0
    for k, p in enumerate(ps):
        probs[k] = reach * (1.0 - p)
        reach *= p
    probs[len(ps)] += reach
    return probs


# --------------------------------------------------------------------------- step cost


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


# --------------------------------------------------------------------------- workloads

_CODE_MARKERS = re.compile(
    r"```|\bdef \w+\(|\bclass \w+[:(]|\bimport \w+|#include\b|\bfunction\s*\w*\(|=>|;\s*$|\{\s*$|"
    r"\breturn\b|\bfn \w+\(|\bpublic (static )?\w+|\bconsole\.log\b|\bSELECT\b.+\bFROM\b",
    re.MULTILINE,
)
_SUMMARIZE_WORDS = re.compile(r"\b(summari[sz]e|summary|tl;?dr|key points|condense|abstract of)\b", re.IGNORECASE)


def classify_prompt(text: str) -> str:
    """How predictable a prompt's continuation is: "synthetic" | "code" | "summarize" | "chat".

    Heuristic, checked in this order:
    - "synthetic": empty text, or a machine-made prompt: fewer than half the words contain a
      letter (random ids such as "w267 123 w217"), or at least 8 words of which under 30%
      are distinct (a repeated phrase);
    - "code": two or more code markers (fences, `def f(`, `import x`, braces at line end, ...);
    - "summarize": asks for a summary/TL;DR/key points, or is longer than 4000 characters;
    - "chat": everything else.
    """
    words = text.split()
    if not words:
        return "synthetic"
    letters = sum(1 for w in words if any(c.isalpha() for c in w) and not re.fullmatch(r"[A-Za-z]\d+", w))
    if letters < len(words) / 2:
        return "synthetic"
    if len(words) >= 8 and len({w.lower() for w in words}) < 0.3 * len(words):
        return "synthetic"
    if len(_CODE_MARKERS.findall(text)) >= 2:
        return "code"
    if _SUMMARIZE_WORDS.search(text) or len(text) > 4000:
        return "summarize"
    return "chat"
