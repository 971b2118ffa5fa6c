"""``python -m autospec.sim``: a stand-in SGLang server (see ``autospec.sim.server``).

Order of events, as ``python -m sglang.launch_server`` does them:

1. argparse (unknown flag -> ``usage: ...`` + ``launch_server.py: error: ...``, exit 2);
2. SGLang's argument rewrites/rejections (``resolve_args``; a rejection prints the
   traceback tail ending in ``ValueError: <SGLang's message>`` and exits 1 at once);
3. ``server_args=ServerArgs(...)``, a ``sglang::scheduler`` child, then the server: the port
   is bound at once (readiness endpoints answer 503), load/KV/CUDA-graph lines follow at the
   profile's pace (scaled by ``--sim-time-scale``), an init failure prints SGLang's failure
   chain and the process dies; otherwise warmup, then ``The server is fired up and ready to
   roll!``.

Simulator-only problems (unreadable profile, malformed ``--sim-fault``) print one line
``autospec.sim: error: ...`` and exit 2.
"""

from __future__ import annotations

import asyncio
import atexit
import random
import sys
from typing import Any, Sequence

from autospec.sim import logs
from autospec.sim.args import CommandLine, parse_command_line
from autospec.sim.faults import FaultSpecError, parse_faults, spawn_scheduler_child
from autospec.sim.model import (
    ArgumentRejected,
    accept_length,
    accept_length_distribution,
    classify_prompt,
    init_outcome,
    prefill_seconds,
    resolve_args,
    step_seconds,
)
from autospec.sim.profile import ProfileError, load_profile
from autospec.sim.server import ModelFunctions, ServerSetup, SimServer

# ServerArgs fields in SGLang's order (sglang 0.5.16 server_args line), for the subset the
# sim knows; user flags not listed here are appended after them.
_SERVER_ARGS_ORDER = (
    "model_path", "tokenizer_path", "tokenizer_mode", "skip_tokenizer_init", "load_format",
    "trust_remote_code", "context_length", "dtype", "quantization", "kv_cache_dtype",
    "mem_fraction_static", "max_running_requests", "max_total_tokens", "chunked_prefill_size",
    "max_prefill_tokens", "schedule_policy", "schedule_conservativeness", "page_size",
    "disable_radix_cache", "disable_overlap_schedule", "enable_mixed_chunk", "tp_size", "pp_size",
    "dp_size", "ep_size", "enable_dp_attention", "random_seed", "watchdog_timeout", "host", "port",
    "skip_server_warmup", "api_key", "served_model_name", "weight_version", "log_level",
    "enable_metrics", "decode_log_interval", "attention_backend", "sampling_backend",
    "grammar_backend", "cuda_graph_max_bs", "disable_cuda_graph", "disable_cuda_graph_padding",
    "enable_torch_compile", "torch_compile_max_bs", "speculative_algorithm",
    "speculative_draft_model_path", "speculative_draft_model_revision", "speculative_num_steps",
    "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_accept_threshold_single",
    "speculative_accept_threshold_acc", "speculative_attention_mode", "speculative_adaptive_config",
)

_SGLANG_DEFAULTS: dict[str, Any] = {
    "tokenizer_mode": "auto", "skip_tokenizer_init": False, "load_format": "auto",
    "trust_remote_code": False, "context_length": None, "dtype": "auto", "quantization": None,
    "kv_cache_dtype": "auto", "max_total_tokens": None, "max_prefill_tokens": 16384,
    "schedule_policy": "fcfs", "schedule_conservativeness": 1.0, "disable_radix_cache": False,
    "disable_overlap_schedule": False, "enable_mixed_chunk": False, "dp_size": 1, "pp_size": 1,
    "ep_size": 1, "enable_dp_attention": False, "watchdog_timeout": 300, "skip_server_warmup": False,
    "api_key": None, "weight_version": "default", "log_level": "info", "enable_metrics": False,
    "decode_log_interval": 40, "sampling_backend": "flashinfer", "grammar_backend": "xgrammar",
    "disable_cuda_graph": False, "disable_cuda_graph_padding": False, "enable_torch_compile": False,
    "torch_compile_max_bs": 32, "speculative_draft_model_path": None,
    "speculative_draft_model_revision": None, "speculative_accept_threshold_single": 1.0,
    "speculative_accept_threshold_acc": 1.0, "speculative_attention_mode": "prefill",
    "speculative_adaptive_config": None,
}


def build_server_args(profile, cfg, command: CommandLine, seed: int) -> dict[str, Any]:
    """The resolved ``ServerArgs`` fields the sim reports (log line and /server_info)."""
    flags = command.flags
    resolved = dict(_SGLANG_DEFAULTS)
    resolved.update(flags)
    speculative = cfg.speculative_algorithm is not None
    resolved.update({
        "model_path": cfg.model_path,
        "tokenizer_path": flags.get("tokenizer_path", cfg.model_path),
        "context_length": cfg.context_length,
        "mem_fraction_static": cfg.mem_fraction_static,
        # SGLang resets an unset value to 48 under speculation (0.5.x); the memory cap comes later
        "max_running_requests": cfg.max_running_requests if cfg.max_running_requests is not None
        else (48 if speculative else None),
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
    })
    ordered = {name: resolved.pop(name) for name in _SERVER_ARGS_ORDER if name in resolved}
    ordered.update(resolved)
    return ordered


def _fail_usage(message: str) -> int:
    sys.stderr.write(f"autospec.sim: error: {message}\n")
    sys.stderr.flush()
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = parse_command_line(argv)  # argparse exits 2 on bad flags, as SGLang's does
    log = logs.SglangLog(sys.stderr)
    try:
        profile = load_profile(command.sim.profile_path)
        faults = parse_faults(command.sim.faults)
    except (ProfileError, FaultSpecError) as exc:
        return _fail_usage(str(exc))
    flags = command.flags
    if flags.get("speculative_algorithm") and flags.get("max_running_requests") is None:
        log.info(logs.MAX_RUNNING_RESET)
    try:
        cfg = resolve_args(profile, flags)
    except ArgumentRejected as exc:
        log.raw(logs.argument_error_traceback(str(exc)))
        return 1
    outcome = init_outcome(profile, cfg)
    seed = command.sim.seed if command.sim.seed is not None else profile.seed
    server_args = build_server_args(profile, cfg, command, seed)
    log.info(logs.format_server_args(server_args))

    scheduler_child = spawn_scheduler_child()
    setup = ServerSetup(
        profile=profile, cfg=cfg, outcome=outcome,
        model=ModelFunctions(step_seconds=step_seconds, prefill_seconds=prefill_seconds,
                             accept_length=accept_length,
                             accept_length_distribution=accept_length_distribution,
                             classify_prompt=classify_prompt,
                             disable_cuda_graph=bool(flags.get("disable_cuda_graph"))),
        server_args=server_args, host=command.host, port=command.port,
        served_model_name=str(server_args["served_model_name"]), model_path=cfg.model_path,
        time_scale=command.sim.time_scale, noise=command.sim.noise, seed=seed,
        load_seconds=command.sim.load_seconds if command.sim.load_seconds is not None else profile.load_seconds,
        faults=faults, state_dir=command.sim.gpu_state_dir,
        cmdline=" ".join([sys.executable, "-m", "autospec.sim", *argv]),
        scheduler_child=scheduler_child,
    )
    server = SimServer(setup)
    atexit.register(server.cleanup)
    try:
        return asyncio.run(server.serve())
    except OSError as exc:  # port taken: uvicorn's wording (errno 98)
        log.info(f"ERROR:    [Errno {exc.errno}] {exc.strerror or exc}")
        server.cleanup()
        return 1
    finally:
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
