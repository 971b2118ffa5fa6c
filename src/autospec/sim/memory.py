"""The simulator's memory model: whether a resolved server starts, and with how large a
KV pool and how many running requests. Pure functions of a `Profile` and a `ServerConfig`.

Memory, per GPU (`init_outcome`). With total memory M, fraction f, tensor-parallel
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autospec.sglang_facts import max_draft_tokens
from autospec.sim.config import (
    GB,
    GENERIC_MAX_RUNNING_REQUESTS,
    SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
    ServerConfig,
    version_at_least,
)
from autospec.sim.profile import Profile

__all__ = [
    "DRAFT_KV_BYTES",
    "INIT_STATUSES",
    "MSG_INVALID_DEVICE",
    "InitOutcome",
    "cuda_graph_gb",
    "draft_kv_freed_gb",
    "draft_kv_gb",
    "draft_kv_ratio",
    "draft_tree_invalid",
    "format_size",
    "gpus_needed",
    "init_outcome",
    "requested_running_requests",
    "spec_reserve_gb",
]

INIT_STATUSES = ("ok", "kv_pool_too_small", "cuda_graph_oom", "weights_oom", "invalid_draft_tree", "too_few_gpus")


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


#: bytes per KV element of --speculative-draft-kv-cache-dtype's values (sglang 0.5.23
#: choices; "auto" follows the target, bf16 in the simulator)
DRAFT_KV_BYTES = {"auto": 2, "fp8_e4m3": 1, "fp8_e5m2": 1, "bf16": 2, "bfloat16": 2}


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
