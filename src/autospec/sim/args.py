"""Command-line parsing for ``python -m autospec.sim``: SGLang's flag names plus ``--sim-*``.

Contract:

- :func:`parse_command_line` turns argv (+ the environment) into a :class:`CommandLine`:
  ``flags`` holds the SGLang flags the user *set*, keyed by SGLang's ``ServerArgs`` field
  names (snake_case) with parsed types; flags left unset are absent (so the model can tell
  "unset" from "set to the default"). ``sim`` holds the simulator's own options.
- Unknown flags, bad types and invalid choices are rejected by :mod:`argparse` itself, which
  prints ``usage: launch_server.py ...`` and ``launch_server.py: error: ...`` and exits 2,
  the way ``python -m sglang.launch_server`` does (its parser is a plain
  ``argparse.ArgumentParser`` and ``prog`` is the script name; checked against sglang
  0.5.16 / 0.5.23 ``launch_server.py`` and ``server_args.py``).

Flag types and choices follow sglang 0.5.23's ``ServerArgs.add_cli_args`` for the flags
listed here; flags autospec never tunes are accepted as pass-through strings only where a
search space or launcher may plausibly send them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: argparse's program name when SGLang runs as ``python -m sglang.launch_server``.
PROG = "launch_server.py"

#: Environment variables the simulator reads (documented in docs/simulator.md).
ENV_GPU_STATE_DIR = "AUTOSPEC_SIM_GPU_STATE_DIR"
ENV_FAULTS = "AUTOSPEC_SIM_FAULTS"
#: the simulated machine's name, when --sim-machine does not give it (its speed factor: variation.machine_factor)
ENV_MACHINE = "AUTOSPEC_SIM_MACHINE"

# Choices as in sglang 0.5.23 server_args.py (subset that matters on CUDA hosts).
ATTENTION_BACKENDS = [
    "triton",
    "torch_native",
    "flex_attention",
    "nsa",
    "cutlass_mla",
    "fa3",
    "fa4",
    "flashinfer",
    "flashmla",
    "trtllm_mla",
    "trtllm_mha",
    "dual_chunk_flash_attn",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
    "intel_xpu",
]
SPECULATIVE_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK"]
LOAD_FORMATS = [
    "auto",
    "pt",
    "safetensors",
    "npcache",
    "dummy",
    "sharded_state",
    "gguf",
    "bitsandbytes",
    "layered",
    "remote",
    "remote_instance",
]
DTYPES = ["auto", "half", "float16", "bfloat16", "float", "float32"]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]


@dataclass(frozen=True)
class SimOptions:
    """The simulator's own options (``--sim-*``); everything else is SGLang's."""

    profile_path: str | None = None
    seed: int | None = None
    noise: bool = True
    load_seconds: float | None = None
    warmup_seconds: float | None = None
    time_scale: float = 1.0
    gpu_state_dir: str | None = None
    faults: tuple[str, ...] = ()
    machine: str | None = None  # the simulated machine's name; None: the reference machine (factor 1)


@dataclass(frozen=True)
class CommandLine:
    """Parsed command line: SGLang flags the user set (snake_case) and the sim's options."""

    flags: dict[str, Any]
    sim: SimOptions
    host: str = "127.0.0.1"
    port: int = 30000
    argv: tuple[str, ...] = field(default_factory=tuple)


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _on_off(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("on", "true", "1", "yes"):
        return True
    if lowered in ("off", "false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")


def _add_model_and_parallelism_flags(parser: argparse.ArgumentParser) -> None:
    """The model, the server's address and the parallelism layout."""
    add = parser.add_argument
    add("--model-path", "--model", dest="model_path", type=str, required=True)
    add("--tokenizer-path", type=str)
    add("--host", type=str)
    add("--port", type=int)
    add("--nccl-port", type=int)
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int)
    add("--dp-size", "--data-parallel-size", dest="dp_size", type=int)
    add("--pp-size", "--pipeline-parallel-size", dest="pp_size", type=int)
    add("--ep-size", "--expert-parallel-size", dest="ep_size", type=int)
    add("--enable-dp-attention", action="store_true", default=None)


def _add_speculative_flags(parser: argparse.ArgumentParser) -> None:
    """Speculative decoding: the algorithm, the draft model and its shape."""
    add = parser.add_argument
    add("--speculative-algorithm", type=str, choices=SPECULATIVE_ALGORITHMS)
    add("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path", type=str)
    add("--speculative-draft-model-revision", type=str)
    add("--speculative-num-steps", type=int)
    add("--speculative-eagle-topk", type=int)
    add("--speculative-num-draft-tokens", type=int)
    add("--speculative-adaptive", action="store_true", default=None)  # sglang 0.5.23; see model._adaptive_flags
    add("--speculative-adaptive-config", type=str)
    add("--speculative-attention-mode", type=str, choices=["prefill", "decode"])
    # sglang 0.5.23 (arg_groups/fields/spec.py); the simulator refuses what it does not model (model.resolve_args)
    add("--speculative-dflash-block-size", type=int)
    add("--speculative-dspark-block-size", type=int)
    add("--speculative-draft-kv-cache-dtype", type=str, choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"])
    add("--speculative-accept-threshold-single", type=float)
    add("--speculative-accept-threshold-acc", type=float)


def _add_memory_and_batch_flags(parser: argparse.ArgumentParser) -> None:
    """Memory, batch and CUDA-graph limits."""
    add = parser.add_argument
    add("--mem-fraction-static", type=float)
    add("--max-running-requests", type=int)
    add("--max-total-tokens", type=int)
    add("--max-prefill-tokens", type=int)
    add("--chunked-prefill-size", type=int)
    add("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs", type=int)
    add("--disable-cuda-graph", action="store_true", default=None)
    add("--disable-cuda-graph-padding", action="store_true", default=None)


def _add_backend_and_loading_flags(parser: argparse.ArgumentParser) -> None:
    """Kernel backends, weight loading, dtypes and logging."""
    add = parser.add_argument
    add("--attention-backend", type=str, choices=ATTENTION_BACKENDS)
    add("--sampling-backend", type=str, choices=["flashinfer", "pytorch", "ascend"])
    add("--grammar-backend", type=str, choices=["xgrammar", "outlines", "llguidance", "none"])
    add("--page-size", type=int)
    add("--load-format", type=str, choices=LOAD_FORMATS)
    add("--context-length", type=int)
    add("--served-model-name", type=str)
    add("--trust-remote-code", action="store_true", default=None)
    add("--dtype", type=str, choices=DTYPES)
    add("--kv-cache-dtype", type=str, choices=KV_CACHE_DTYPES)
    add("--quantization", type=str)
    add("--log-level", type=str, choices=LOG_LEVELS)


def _add_scheduling_and_runtime_flags(parser: argparse.ArgumentParser) -> None:
    """Scheduling policy, caching, compilation, warmup and the API surface."""
    add = parser.add_argument
    add("--random-seed", type=int)
    add("--schedule-policy", type=str, choices=["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"])
    add("--schedule-conservativeness", type=float)
    add("--enable-mixed-chunk", action="store_true", default=None)
    add("--disable-overlap-schedule", action="store_true", default=None)
    add("--disable-radix-cache", action="store_true", default=None)
    add("--enable-torch-compile", action="store_true", default=None)
    add("--torch-compile-max-bs", type=int)
    add("--skip-server-warmup", action="store_true", default=None)
    add("--watchdog-timeout", type=float)
    add("--api-key", type=str)
    add("--enable-metrics", action="store_true", default=None)


def _add_simulator_flags(parser: argparse.ArgumentParser) -> None:
    """The simulator's own ``--sim-*`` options (the names in ``_SIM_DESTS``)."""
    add = parser.add_argument
    add(
        "--sim-profile",
        dest="sim_profile",
        type=str,
        metavar="FILE",
        help="simulator profile (TOML); default: the bundled default profile",
    )
    add("--sim-seed", dest="sim_seed", type=int, metavar="N", help="noise seed, to repeat a launch (default: drawn per launch)")
    add(
        "--sim-noise",
        dest="sim_noise",
        type=_on_off,
        default=True,
        metavar="on|off",
        help="per-run and per-step speed noise and sampled acceptance (default on)",
    )
    add(
        "--sim-load-seconds",
        dest="sim_load_seconds",
        type=_non_negative_float,
        metavar="S",
        help="model load time before the KV lines (overrides the profile)",
    )
    add(
        "--sim-warmup-seconds",
        dest="sim_warmup_seconds",
        type=_non_negative_float,
        metavar="S",
        help="warmup time between the uvicorn lines and readiness (overrides the profile)",
    )
    add(
        "--sim-time-scale",
        dest="sim_time_scale",
        type=_positive_float,
        default=1.0,
        metavar="F",
        help="multiply every simulated duration (load, warmup, prefill, decode steps)",
    )
    add(
        "--sim-gpu-state-dir",
        dest="sim_gpu_state_dir",
        type=str,
        metavar="DIR",
        help=f"where to record simulated GPU memory (else ${ENV_GPU_STATE_DIR}; else nowhere)",
    )
    add(
        "--sim-machine",
        dest="sim_machine",
        type=str,
        metavar="NAME",
        help=f"name of the simulated GPU/host, which fixes its speed factor (else ${ENV_MACHINE}; else factor 1)",
    )
    add(
        "--sim-fault",
        dest="sim_fault",
        action="append",
        default=[],
        metavar="SPEC",
        help=f"inject a fault (repeatable; also ${ENV_FAULTS}, comma-separated)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser; ``prog`` and error wording are argparse's, as in SGLang.

    Every SGLang flag defaults to None so "not given" is distinguishable; the flags are
    added in a fixed order, which is the order of the usage line.
    """
    parser = argparse.ArgumentParser(prog=PROG)
    _add_model_and_parallelism_flags(parser)
    _add_speculative_flags(parser)
    _add_memory_and_batch_flags(parser)
    _add_backend_and_loading_flags(parser)
    _add_scheduling_and_runtime_flags(parser)
    _add_simulator_flags(parser)
    return parser


_SIM_DESTS = (
    "sim_profile",
    "sim_seed",
    "sim_noise",
    "sim_load_seconds",
    "sim_warmup_seconds",
    "sim_time_scale",
    "sim_gpu_state_dir",
    "sim_fault",
    "sim_machine",
)


def parse_command_line(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> CommandLine:
    """Parse argv; argparse exits 2 with SGLang's wording on unknown or malformed flags."""
    environ = os.environ if environ is None else environ
    namespace = build_parser().parse_args(list(argv))
    values = vars(namespace)
    flags = {name: value for name, value in values.items() if name not in _SIM_DESTS and value is not None}
    env_faults = [spec.strip() for spec in environ.get(ENV_FAULTS, "").split(",") if spec.strip()]
    sim = SimOptions(
        profile_path=values["sim_profile"],
        seed=values["sim_seed"],
        noise=values["sim_noise"],
        load_seconds=values["sim_load_seconds"],
        warmup_seconds=values["sim_warmup_seconds"],
        time_scale=values["sim_time_scale"],
        gpu_state_dir=values["sim_gpu_state_dir"] or environ.get(ENV_GPU_STATE_DIR) or None,
        faults=tuple(values["sim_fault"]) + tuple(env_faults),
        machine=values["sim_machine"] or environ.get(ENV_MACHINE) or None,
    )
    return CommandLine(
        flags=flags,
        sim=sim,
        host=flags.get("host", "127.0.0.1"),
        port=flags.get("port", 30000),
        argv=tuple(argv),
    )
