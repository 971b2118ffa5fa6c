"""The resolved ``ServerArgs`` the simulator reports: its ``server_args=ServerArgs(...)``
log line and the argument fields of ``/server_info`` (pure).

Field order and defaults follow the sglang 0.5.16 ``server_args`` log line for the subset
the simulator knows; flags the user set that are not listed are appended after them.
"""

from __future__ import annotations

import random
from typing import Any

from autospec.sim.args import CommandLine
from autospec.sim.config import SPEC_DEFAULT_MAX_RUNNING_REQUESTS, ServerConfig
from autospec.sim.engine import DECODE_LOG_INTERVAL
from autospec.sim.profile import Profile

__all__ = ["build_server_args"]

# ServerArgs fields in SGLang's order (sglang 0.5.16 server_args line), for the subset the
# sim knows; user flags not listed here are appended after them.
_SERVER_ARGS_ORDER = (
    "model_path",
    "tokenizer_path",
    "tokenizer_mode",
    "skip_tokenizer_init",
    "load_format",
    "trust_remote_code",
    "context_length",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "mem_fraction_static",
    "max_running_requests",
    "max_total_tokens",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "schedule_policy",
    "schedule_conservativeness",
    "page_size",
    "disable_radix_cache",
    "disable_overlap_schedule",
    "enable_mixed_chunk",
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "enable_dp_attention",
    "random_seed",
    "watchdog_timeout",
    "host",
    "port",
    "skip_server_warmup",
    "api_key",
    "served_model_name",
    "weight_version",
    "log_level",
    "enable_metrics",
    "decode_log_interval",
    "attention_backend",
    "sampling_backend",
    "grammar_backend",
    "cuda_graph_max_bs",
    "disable_cuda_graph",
    "disable_cuda_graph_padding",
    "enable_torch_compile",
    "torch_compile_max_bs",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_draft_model_revision",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_accept_threshold_single",
    "speculative_accept_threshold_acc",
    "speculative_attention_mode",
    "speculative_adaptive_config",
)

_SGLANG_DEFAULTS: dict[str, Any] = {
    "tokenizer_mode": "auto",
    "skip_tokenizer_init": False,
    "load_format": "auto",
    "trust_remote_code": False,
    "context_length": None,
    "dtype": "auto",
    "quantization": None,
    "kv_cache_dtype": "auto",
    "max_total_tokens": None,
    "max_prefill_tokens": 16384,
    "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0,
    "disable_radix_cache": False,
    "disable_overlap_schedule": False,
    "enable_mixed_chunk": False,
    "dp_size": 1,
    "pp_size": 1,
    "ep_size": 1,
    "enable_dp_attention": False,
    "watchdog_timeout": 300,
    "skip_server_warmup": False,
    "api_key": None,
    "weight_version": "default",
    "log_level": "info",
    "enable_metrics": False,
    "decode_log_interval": DECODE_LOG_INTERVAL,
    "sampling_backend": "flashinfer",
    "grammar_backend": "xgrammar",
    "disable_cuda_graph": False,
    "disable_cuda_graph_padding": False,
    "enable_torch_compile": False,
    "torch_compile_max_bs": 32,
    "speculative_draft_model_path": None,
    "speculative_draft_model_revision": None,
    "speculative_accept_threshold_single": 1.0,
    "speculative_accept_threshold_acc": 1.0,
    "speculative_attention_mode": "prefill",
    "speculative_adaptive_config": None,
}


def build_server_args(profile: Profile, cfg: ServerConfig, command: CommandLine, seed: int) -> dict[str, Any]:
    """The resolved ``ServerArgs`` fields the sim reports (log line and /server_info)."""
    flags = command.flags
    resolved = dict(_SGLANG_DEFAULTS)
    resolved.update(flags)
    speculative = cfg.speculative_algorithm is not None
    resolved.update(
        {
            "model_path": cfg.model_path,
            "tokenizer_path": flags.get("tokenizer_path", cfg.model_path),
            "context_length": cfg.context_length,
            "mem_fraction_static": cfg.mem_fraction_static,
            # SGLang resets an unset value to 48 under speculation (0.5.x); the memory cap comes later
            "max_running_requests": cfg.max_running_requests
            if cfg.max_running_requests is not None
            else (SPEC_DEFAULT_MAX_RUNNING_REQUESTS if speculative else None),
            "chunked_prefill_size": flags.get("chunked_prefill_size", profile.chunked_prefill_size),
            "page_size": cfg.page_size,
            "tp_size": cfg.tp_size,
            "pp_size": cfg.pp_size,
            "dp_size": cfg.dp_size,
            "enable_dp_attention": cfg.enable_dp_attention,
            "random_seed": flags.get("random_seed", random.Random(seed).randint(0, 1 << 30)),
            "host": command.host,
            "port": command.port,
            "served_model_name": flags.get("served_model_name", cfg.model_path),
            "attention_backend": cfg.attention_backend,
            "cuda_graph_max_bs": cfg.cuda_graph_max_bs,
            "speculative_algorithm": cfg.speculative_algorithm,
            "speculative_num_steps": cfg.speculative_num_steps if speculative else None,
            "speculative_eagle_topk": cfg.speculative_eagle_topk if speculative else None,
            "speculative_num_draft_tokens": cfg.speculative_num_draft_tokens if speculative else None,
        }
    )
    ordered = {name: resolved.pop(name) for name in _SERVER_ARGS_ORDER if name in resolved}
    ordered.update(resolved)
    return ordered
