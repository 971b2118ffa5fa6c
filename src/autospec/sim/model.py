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
   apply depends on the profile's `sglang_version` (see `_REJECTION_RULES`).

2. Memory, per GPU (`init_outcome`). With total memory M, fraction f, tensor-parallel
   size tp (x pipeline size pp):
       weights   W = weights_gb / (tp*pp),   draft  Wd = draft_weights_gb / (tp*pp)
       reserve   R = fixed_state_gb + spec_state_gb * slots * D_eff
                 slots = the requested max_running_requests (user value, or 48 under
                         speculation): SGLang sizes its per-request pools for it before
                         capping it; D_eff = draft tokens (x topk for trees), 0 without
                         speculation. This is the seed's hybrid-model (GDN) effect: the
                         speculative path keeps per-draft-position state per request slot,
                         so every extra step costs a fixed slice of the KV pool (~80k tokens).
       KV pool   K = f*M - W - Wd - R
       max_total_num_tokens T = floor(K / (kv_bytes_per_token / tp)), rounded down to
                         page_size;  T < min_kv_tokens  ->  "kv_pool_too_small"
       max_running_requests = min(requested, floor(T / tokens_per_running_request))
       headroom  H = (1-f)*M - runtime_overhead_gb must cover
                 activation_gb + G,  G = cuda_graph_base_gb + cuda_graph_gb_per_token *
                 cuda_graph_max_bs * (draft + steps*topk) (x tree_graph_factor if topk > 1)
                 else "cuda_graph_oom";  W + Wd + runtime_overhead_gb > M -> "weights_oom".
   Order of checks (as SGLang initialises): weights, KV pool, draft-tree shape, graphs.

3. Acceptance (`accept_length`). Per-position top-1 acceptance at depth i:
       a_i = base[workload] * decay^(i-1) * exp(-temperature_penalty * T)   (x ngram_factor for NGRAM)
   A chain (topk == 1, depth = steps) emits E = 1 + sum_{i=1..steps} prod_{j<=i} a_j
   tokens per verify step. A tree (topk > 1) has a budget of draft-1 nodes, at most topk
   candidates per depth and at most `steps` depths; m candidates at depth i accept with
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
from dataclasses import asdict, dataclass
from typing import Any, Mapping

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
    "init_outcome",
    "prefill_seconds",
    "resolve_args",
    "step_seconds",
    "tree_shape",
]

#: values of --speculative-algorithm (SGLang 0.5.x; DFLASH/DSPARK are newer and not modelled)
ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
#: attention backends the sim knows (a subset of SGLang's choices)
ATTENTION_BACKENDS = (
    "flashinfer", "fa3", "fa4", "triton", "torch_native", "flex_attention",
    "trtllm_mha", "trtllm_mla", "flashmla", "cutlass_mla", "aiter", "wave", "intel_amx",
)

#: SGLang resets an unset --max-running-requests to this under speculative decoding
#: ("Max running requests is reset to 48 for speculative decoding." -- 0.5.x, 0.5.16 log)
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48
#: SGLang's cap on the request-slot pool when nothing else limits it (generic default)
GENERIC_MAX_RUNNING_REQUESTS = 4096

#: SGLang's "GB" in its log lines is 2**30 bytes; the profile's sizes use the same unit
GB = float(2**30)

INIT_STATUSES = ("ok", "kv_pool_too_small", "cuda_graph_oom", "weights_oom", "invalid_draft_tree")


class ArgumentRejected(ValueError):
    """SGLang rejected the flags at argument time; str(e) is SGLang's own message."""


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

    @property
    def speculative(self) -> bool:
        return self.speculative_algorithm is not None

    def as_dict(self) -> dict[str, Any]:
        """Field name -> value, as SGLang's /server_info reports resolved arguments."""
        return asdict(self)


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


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _in_range(version: str, lo: str | None, hi: str | None) -> bool:
    v = _version_tuple(version)
    return (lo is None or v >= _version_tuple(lo)) and (hi is None or v < _version_tuple(hi))


# Backends that accept EAGLE topk > 1 with page_size > 1, by SGLang version range [lo, hi).
# Checked against sglang's python/sglang/srt/server_args.py (_handle_speculative_decoding):
# "!= flashinfer" up to 0.5.x; "not in [flashinfer, fa3]" later; newest adds triton.
_TREE_PAGED_BACKENDS: tuple[tuple[str | None, str | None, tuple[str, ...]], ...] = (
    (None, "0.5.5", ("flashinfer",)),
    ("0.5.5", "0.5.20", ("flashinfer", "fa3")),
    ("0.5.20", None, ("flashinfer", "fa3", "triton")),
)

_MSG_TREE_PAGED_OLD = (
    "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect results "
    "for paged attention backends. This combination is only supported for the 'flashinfer' backend."
)
_MSG_TRTLLM_TOPK = "trtllm_mha backend only supports topk = 1 for speculative decoding."
_MSG_NGRAM_PAGED = (
    "speculative_eagle_topk({topk}) > 1 with page_size({page}) > 1 is unstable and produces "
    "incorrect results for paged attention backends. This combination is only supported for "
    "the 'flashinfer' backend."
)
_MSG_DP_ATTENTION = "Currently {algo} speculative decoding does not support dp attention."
_MSG_PP_SPEC = "Pipeline parallelism is not compatible with speculative decoding."


def _flag(flags: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = flags.get(name)
        if value is not None:
            return value
    return None


def resolve_args(profile: Profile, flags: Mapping[str, Any]) -> ServerConfig:
    """Apply SGLang's rewrites and argument-time rejections to `flags` (ServerArgs field
    names, values already typed). Raises ArgumentRejected with SGLang's wording."""
    algo = _flag(flags, "speculative_algorithm")
    algo = str(algo).upper() if algo else None
    if algo == "NEXTN":  # SGLang: NEXTN is an alias of EAGLE (MTP heads)
        algo = "EAGLE"
    if algo is not None and algo not in ALGORITHMS:
        raise ArgumentRejected(
            f"argument --speculative-algorithm: invalid choice: '{algo}' "
            f"(choose from {', '.join(repr(a) for a in ALGORITHMS)})"
        )
    backend = _flag(flags, "attention_backend") or profile.attention_backend
    page_size = int(_flag(flags, "page_size") or profile.page_size)
    dp_attention = bool(flags.get("enable_dp_attention") or False)
    dp_size = int(_flag(flags, "dp_size") or 1)
    pp_size = int(_flag(flags, "pp_size") or 1)
    tp_size = int(_flag(flags, "tp_size", "tensor_parallel_size") or profile.tp_size)
    mrr = _flag(flags, "max_running_requests")
    mrr = int(mrr) if mrr is not None else None

    steps = topk = draft = 0
    if algo is not None:
        steps, topk, draft = _resolve_spec_shape(profile, algo, flags)
        if algo in ("STANDALONE", "NGRAM") and dp_attention:
            raise ArgumentRejected(_MSG_DP_ATTENTION.format(algo=algo))
        if pp_size > 1 and _in_range(profile.sglang_version, None, "0.5.20"):
            raise ArgumentRejected(_MSG_PP_SPEC)
        if algo == "NGRAM":
            if page_size > 1 and backend != "flashinfer":
                raise ArgumentRejected(_MSG_NGRAM_PAGED.format(topk=topk, page=page_size))
        else:
            if backend == "trtllm_mha" and topk > 1:
                raise ArgumentRejected(_MSG_TRTLLM_TOPK)
            if topk == 1:
                draft = steps + 1
            if topk > 1 and page_size > 1:
                allowed = _tree_paged_backends(profile.sglang_version)
                if backend not in allowed:
                    raise ArgumentRejected(_tree_paged_message(profile.sglang_version))

    context = _flag(flags, "context_length")
    return ServerConfig(
        model_path=str(_flag(flags, "model_path") or profile.model_name),
        tp_size=tp_size,
        speculative_algorithm=algo,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        mem_fraction_static=float(_flag(flags, "mem_fraction_static") or profile.mem_fraction_static),
        max_running_requests=mrr,
        cuda_graph_max_bs=int(_flag(flags, "cuda_graph_max_bs", "cuda_graph_max_bs_decode")
                              or profile.cuda_graph_max_bs),
        attention_backend=str(backend),
        page_size=page_size,
        context_length=int(context) if context is not None else None,
        enable_dp_attention=dp_attention,
        dp_size=dp_size,
        pp_size=pp_size,
    )


def _tree_paged_backends(version: str) -> tuple[str, ...]:
    for lo, hi, allowed in _TREE_PAGED_BACKENDS:
        if _in_range(version, lo, hi):
            return allowed
    return ("flashinfer",)


def _tree_paged_message(version: str) -> str:
    allowed = _tree_paged_backends(version)
    if "triton" in allowed:
        return f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {allowed}"
    return _MSG_TREE_PAGED_OLD


def _resolve_spec_shape(profile: Profile, algo: str, flags: Mapping[str, Any]) -> tuple[int, int, int]:
    steps = flags.get("speculative_num_steps")
    topk = flags.get("speculative_eagle_topk")
    draft = flags.get("speculative_num_draft_tokens")
    if algo == "NGRAM":
        # SGLang: NGRAM's topk is speculative_ngram_max_bfs_breadth (default 10) and
        # draft tokens default to 12; steps are not used (the trie depth is).
        breadth = int(flags.get("speculative_ngram_max_bfs_breadth") or 10)
        return (int(steps or 1), breadth, int(draft or 12))
    if steps is None and topk is None and draft is None:
        return profile.auto_spec
    auto_steps, auto_topk, auto_draft = profile.auto_spec
    steps = int(steps) if steps is not None else auto_steps
    topk = int(topk) if topk is not None else auto_topk
    draft = int(draft) if draft is not None else (steps + 1 if topk == 1 else auto_draft)
    for name, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk),
                        ("speculative_num_draft_tokens", draft)):
        if value < 1:
            raise ArgumentRejected(f"{name} must be a positive integer, got {value}")
    return steps, topk, draft


# --------------------------------------------------------------------------- memory


def _effective_draft(cfg: ServerConfig) -> int:
    """Draft positions that keep per-request state: draft tokens (x topk for trees)."""
    if not cfg.speculative:
        return 0
    d = cfg.speculative_num_draft_tokens
    return d * cfg.speculative_eagle_topk if cfg.speculative_eagle_topk > 1 else d


def requested_running_requests(cfg: ServerConfig) -> int:
    if cfg.max_running_requests is not None:
        return cfg.max_running_requests
    return SPEC_DEFAULT_MAX_RUNNING_REQUESTS if cfg.speculative else GENERIC_MAX_RUNNING_REQUESTS


def cuda_graph_gb(profile: Profile, cfg: ServerConfig) -> float:
    """Per-GPU memory for captured CUDA graphs (verify + draft graphs under speculation)."""
    if cfg.speculative:
        per_slot = cfg.speculative_num_draft_tokens + cfg.speculative_num_steps * cfg.speculative_eagle_topk
    else:
        per_slot = 1
    g = profile.cuda_graph_base_gb + profile.cuda_graph_gb_per_token * cfg.cuda_graph_max_bs * per_slot
    if cfg.speculative and cfg.speculative_eagle_topk > 1:
        g *= profile.tree_graph_factor
    return g


def _gb(x: float) -> float:
    return round(x, 2)


def init_outcome(profile: Profile, cfg: ServerConfig) -> InitOutcome:
    """Server start-up under the memory model (module docstring, section 2)."""
    total = profile.gpu_mem_gb
    shards = cfg.tp_size * max(cfg.pp_size, 1)
    weights = profile.weights_gb / shards
    draft = profile.draft_weights_gb / shards if cfg.speculative and cfg.speculative_algorithm != "NGRAM" else 0.0
    context_len = cfg.context_length or profile.context_len
    f = cfg.mem_fraction_static

    def fail(status: str, message: str, used: float, kv: float = 0.0, graph: float = 0.0,
             tokens: int = 0, mrr: int = 0) -> InitOutcome:
        return InitOutcome(status, message, tokens, mrr, context_len, _gb(max(total - used, 0.0)),
                           _gb(min(used, total)), _gb(weights + draft), _gb(kv), _gb(graph))

    loaded = weights + draft + profile.runtime_overhead_gb
    if loaded > total:
        return fail("weights_oom", _weights_oom_message(total, loaded), total)

    slots = requested_running_requests(cfg)
    reserve = profile.fixed_state_gb + profile.spec_state_gb * min(slots, SPEC_DEFAULT_MAX_RUNNING_REQUESTS * 8) \
        * _effective_draft(cfg)
    kv_gb = f * total - weights - draft - reserve
    bytes_per_token = profile.kv_bytes_per_token / cfg.tp_size
    tokens = int(max(kv_gb, 0.0) * GB // bytes_per_token)
    tokens -= tokens % max(cfg.page_size, 1)
    if kv_gb <= 0 or tokens < profile.min_kv_tokens:
        return fail("kv_pool_too_small", _kv_message(profile, cfg, weights + draft, total), loaded)

    cap = int(tokens // profile.tokens_per_running_request) if profile.tokens_per_running_request else slots
    mrr = max(min(slots, cap), 1)
    static_used = f * total
    if cfg.speculative and cfg.speculative_num_draft_tokens > cfg.speculative_num_steps * cfg.speculative_eagle_topk + 1:
        return fail("invalid_draft_tree", _invalid_tree_message(cfg), static_used + profile.runtime_overhead_gb,
                    kv=kv_gb, tokens=tokens, mrr=mrr)
    graph = cuda_graph_gb(profile, cfg)
    headroom = (1.0 - f) * total - profile.runtime_overhead_gb
    if headroom < profile.activation_gb + graph:
        return fail("cuda_graph_oom", _graph_oom_message(profile, cfg, headroom), total, kv=kv_gb,
                    tokens=tokens, mrr=mrr)
    used = static_used + profile.runtime_overhead_gb + graph
    return InitOutcome("ok", "", tokens, mrr, context_len, _gb(total - used), _gb(used),
                       _gb(weights + draft), _gb(kv_gb), _gb(graph))


def _kv_message(profile: Profile, cfg: ServerConfig, loaded_gb: float, total: float) -> str:
    if _in_range(profile.sglang_version, "0.5.16", None):
        # sglang 0.5.16 kv_cache_configurator._profile_available_bytes (real log in
        # data/real-sglang-0.5.16-h200/kvsmall.log); minimum = 1 - available/pre
        minimum = loaded_gb / total
        return (
            f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={cfg.mem_fraction_static}. Raise --mem-fraction-static above "
            f"{math.ceil(minimum * 1000) / 1000:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). "
            f"If using speculative decoding, draft weights are now counted."
        )
    return "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


def _graph_oom_message(profile: Profile, cfg: ServerConfig, headroom: float) -> str:
    free_mib = max(headroom - profile.activation_gb, 0.0) * 1024
    return (
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. "
        f"GPU 0 has a total capacity of {profile.gpu_mem_gb:.2f} GiB of which "
        f"{free_mib:.2f} MiB is free.\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
    )


def _weights_oom_message(total: float, need: float) -> str:
    gib = 2**30 / 1e9
    return (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
        f"GPU 0 has a total capacity of {total / gib:.2f} GiB of which 0 bytes is free. "
        f"Including non-PyTorch memory, this process has {total / gib:.2f} GiB memory in use. "
        f"Of the allocated memory {(total - 1.0) / gib:.2f} GiB is allocated by PyTorch, and "
        "0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
        "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
        "See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _invalid_tree_message(cfg: ServerConfig) -> str:
    steps, topk, draft = cfg.speculative_num_steps, cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens
    return (
        f"RuntimeError: selected index k out of range (speculative_num_draft_tokens={draft} > "
        f"speculative_num_steps * speculative_eagle_topk + 1 = {steps * topk + 1})"
    )


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
    return [min(base * profile.accept_decay ** i, 1.0) for i in range(cfg.speculative_num_steps)]


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
        best, best_gain = None, -1.0
        if len(shape) < len(a):
            trial = shape + [1]
            g = _expected([_tree_accept(a[i], m, gain) for i, m in enumerate(trial)]) - current
            best, best_gain = ("deepen", None), g
        for i, m in enumerate(shape):
            if m < topk:
                trial = shape.copy()
                trial[i] += 1
                g = _expected([_tree_accept(a[j], n, gain) for j, n in enumerate(trial)]) - current
                if g > best_gain + 1e-15:
                    best, best_gain = ("widen", i), g
        if best is None:
            break
        if best[0] == "deepen":
            shape.append(1)
        else:
            shape[best[1]] += 1
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
    ms = (profile.prefill_base_ms + profile.prefill_ms_per_token * max(num_new_tokens, 0)
          + profile.prefill_ms_per_seq * max(num_new_seqs, 0))
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
