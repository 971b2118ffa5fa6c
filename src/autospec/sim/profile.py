"""Simulator profiles: a TOML file describing one model on one machine, loaded into a
frozen `Profile`.

A profile holds everything the performance and memory model (`autospec.sim.model`)
needs: model and GPU sizes, SGLang's defaults for the flags the user leaves unset, the
memory model's reserves, per-workload acceptance, step-cost coefficients, load timing
and noise. The format is documented for users in docs/simulator.md; every field is
checked here and a bad file raises `ProfileError` with a one-line message that names the
file, the field and the fix.

Contract: `load_profile(path_or_name)` never returns a half-valid profile. Names
without a path separator or `.toml` suffix refer to the profiles shipped in
`autospec/sim/profiles/` (see `list_profiles()`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "Profile",
    "ProfileError",
    "WORKLOADS",
    "default_profile_path",
    "list_profiles",
    "load_profile",
]

PROFILES_DIR = Path(__file__).with_name("profiles")
DEFAULT_PROFILE_NAME = "seed-qwen35-122b-4x-rtxpro6000"

#: workload kinds, from most to least predictable continuation (see `classify_prompt`)
WORKLOADS = ("synthetic", "code", "chat", "summarize")


class ProfileError(ValueError):
    """A profile file is missing or invalid; `str(err)` is one line: problem and fix."""


@dataclass(frozen=True)
class Profile:
    """One model on one machine. Memory sizes are in SGLang's "GB" (2**30 bytes, what its
    log lines print); times are seconds unless the name ends in `_ms`. Sizes marked
    "whole model" are split over the tensor-parallel (and pipeline) ranks by the model;
    the rest are per GPU."""

    name: str
    description: str
    sglang_version: str  # the SGLang release whose rules and wording the sim follows
    source: str  # file the profile was loaded from

    # [model]
    model_name: str
    params_b: float
    weights_gb: float  # whole model, target
    draft_weights_gb: float  # whole model, draft (EAGLE head / MTP layer / small model)
    context_len: int
    kv_bytes_per_token: float  # whole model (all layers, K+V); divided by tp per GPU unless kv_replicated
    kv_replicated: bool  # True for MLA (DeepSeek): every TP rank holds the whole latent KV
    moe_experts: int  # 0 = dense
    moe_topk: int

    # [gpu]
    gpu_name: str
    gpu_mem_gb: float  # per GPU, as the CUDA runtime reports total memory
    gpu_count: int

    # [defaults] SGLang's choices for unset flags on this model/machine
    tp_size: int
    attention_backend: str
    page_size: int
    cuda_graph_max_bs: int
    mem_fraction_static: float
    speculative_algorithm: str | None  # what the profile's deployment uses ("NEXTN", ...)
    auto_spec: tuple[int, int, int]  # (steps, topk, draft) when all three are unset
    chunked_prefill_size: int

    # [memory]
    runtime_overhead_gb: float  # CUDA context + NCCL buffers per GPU, outside the static pool
    fixed_state_gb: float  # per GPU, taken from the static pool before the KV cache
    spec_state_gb: float  # per GPU, per request slot and per draft position (hybrid models)
    tokens_per_running_request: float  # pool tokens per running request (0 = no cap)
    min_kv_tokens: int  # smaller pools fail with the KV message
    activation_gb: float  # per GPU headroom needed outside the static pool
    cuda_graph_base_gb: float
    cuda_graph_gb_per_token: float  # per (batch slot x token captured)
    tree_graph_factor: float  # multiplier on graph memory when topk > 1

    # [acceptance]
    accept_base: Mapping[str, float]  # per-position top-1 acceptance at depth 1, per workload
    accept_decay: float  # a_i = base * decay ** ((i - 1) ** decay_power)
    decay_power: float  # 1 = geometric; > 1 = acceptance falls faster with depth (reused MTP heads)
    temperature_penalty: float  # a(T) = a * exp(-penalty * T)
    tree_gain: float  # share of the remaining misses each extra candidate catches
    ngram_factor: float  # NGRAM acceptance relative to a draft model

    # [cost] (milliseconds)
    floor_ms: float  # fixed per verify pass (weights, launches, all-reduce)
    expert_ms: float  # extra when every expert is read (MoE only)
    verify_ms_per_token: float  # per verified token (batch x draft tokens)
    request_ms: float  # per running request per step (attention, sampling)
    draft_step_ms: float  # per draft forward pass
    draft_ms_per_token: float  # per draft token (batch x topk) per draft pass
    tree_ms_per_node: float  # tree building/masking, per draft node per request (topk > 1)
    prefill_base_ms: float
    prefill_ms_per_token: float
    prefill_ms_per_seq: float

    # [timing]
    load_seconds: float
    warmup_seconds: float

    # [noise]
    run_sigma: float
    step_sigma: float
    seed: int

    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown top-level tables kept verbatim

    def accept_base_for(self, workload: str) -> float:
        try:
            return self.accept_base[workload]
        except KeyError:
            raise ValueError(
                f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}"
            ) from None


def default_profile_path() -> Path:
    """The shipped default profile (calibrated to data/seed_speculation.csv)."""
    return PROFILES_DIR / f"{DEFAULT_PROFILE_NAME}.toml"


def list_profiles() -> list[str]:
    """Names of the shipped profiles (usable as `load_profile(name)`)."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def _resolve_path(name_or_path: str | Path | None) -> Path:
    if name_or_path is None:
        return default_profile_path()
    text = str(name_or_path)
    if "/" not in text and "\\" not in text and not text.endswith(".toml"):
        path = PROFILES_DIR / f"{text}.toml"
        if not path.is_file():
            raise ProfileError(
                f"no shipped simulator profile named {text!r}; "
                f"use one of {', '.join(list_profiles())} or a path to a .toml file"
            )
        return path
    return Path(text)


def load_profile(name_or_path: str | Path | None = None) -> Profile:
    """Load and validate a profile; None = the default. Raises ProfileError (one line)."""
    path = _resolve_path(name_or_path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"simulator profile {path} does not exist; pass an existing .toml file") from None
    except OSError as exc:
        raise ProfileError(f"cannot read simulator profile {path}: {exc.strerror}; check its permissions") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"simulator profile {path} is not valid TOML ({exc}); fix the syntax") from None
    return profile_from_dict(raw, source=str(path))


_KNOWN_TABLES = {"model", "gpu", "defaults", "memory", "acceptance", "cost", "timing", "noise"}


class _Reader:
    """Typed access to the TOML tables with one-line errors naming file and key."""

    def __init__(self, raw: Mapping[str, Any], source: str) -> None:
        self.raw = raw
        self.source = source

    def fail(self, key: str, problem: str, fix: str) -> ProfileError:
        return ProfileError(f"simulator profile {self.source}: {key} {problem}; {fix}")

    def table(self, name: str, required: bool = True) -> Mapping[str, Any]:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise self.fail(f"[{name}]", "is missing", f"add a [{name}] table (see docs/simulator.md)")
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(name, "must be a table", f"write it as [{name}]")
        return value

    def get(self, table: str, key: str, default: Any = ..., *, required: bool = True) -> Any:
        tab = self.table(table, required=required or default is ...)
        if key in tab:
            return tab[key]
        if default is ...:
            raise self.fail(f"{table}.{key}", "is missing", f"add `{key} = ...` under [{table}]")
        return default

    def number(self, table: str, key: str, default: Any = ..., *, lo: float | None = None,
               hi: float | None = None, lo_open: bool = False) -> float:
        value = self.get(table, key, default, required=default is ...)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(f"{table}.{key}", f"must be a number, got {value!r}", "write a plain number")
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise self.fail(f"{table}.{key}", f"must be {'>' if lo_open else '>='} {lo}, got {value}",
                            "use a value in range")
        if hi is not None and value > hi:
            raise self.fail(f"{table}.{key}", f"must be <= {hi}, got {value}", "use a value in range")
        return float(value)

    def integer(self, table: str, key: str, default: Any = ..., *, lo: int | None = None) -> int:
        value = self.get(table, key, default, required=default is ...)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{table}.{key}", f"must be an integer, got {value!r}", "write a whole number")
        if lo is not None and value < lo:
            raise self.fail(f"{table}.{key}", f"must be >= {lo}, got {value}", "use a value in range")
        return value

    def string(self, table: str | None, key: str, default: Any = ...) -> str:
        if table is None:
            value = self.raw.get(key, default)
            if value is ...:
                raise self.fail(key, "is missing", f"add `{key} = \"...\"` at the top of the file")
        else:
            value = self.get(table, key, default, required=default is ...)
        if not isinstance(value, str) or not value:
            raise self.fail(key if table is None else f"{table}.{key}", f"must be a non-empty string, got {value!r}",
                            "quote the value")
        return value


def _boolean(r: _Reader, table: str, key: str, default: bool) -> bool:
    value = r.get(table, key, default, required=False)
    if not isinstance(value, bool):
        raise r.fail(f"{table}.{key}", f"must be true or false, got {value!r}", "write true or false")
    return value


def _parse_version(text: str, reader: _Reader) -> str:
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:3]):
        raise reader.fail("sglang_version", f"must look like 0.5.16, got {text!r}", "write a release number")
    return text


def profile_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> Profile:
    """Validate a parsed TOML document into a Profile (ProfileError on the first problem)."""
    r = _Reader(raw, source)
    for key, value in raw.items():
        if isinstance(value, Mapping) and key not in _KNOWN_TABLES:
            raise r.fail(f"[{key}]", "is not a known table",
                         f"use only {', '.join(sorted(_KNOWN_TABLES))} (see docs/simulator.md)")

    from autospec.sim.model import ALGORITHMS, ATTENTION_BACKENDS  # local: model imports profile

    name = r.string(None, "name", Path(source).stem if source != "<dict>" else "profile")
    sglang_version = _parse_version(r.string(None, "sglang_version"), r)

    gpu_count = r.integer("gpu", "count", lo=1)
    tp_size = r.integer("defaults", "tp_size", gpu_count, lo=1)
    if tp_size > gpu_count:
        raise r.fail("defaults.tp_size", f"({tp_size}) exceeds gpu.count ({gpu_count})", "lower tp_size or add GPUs")

    backend = r.string("defaults", "attention_backend", "flashinfer")
    if backend not in ATTENTION_BACKENDS:
        raise r.fail("defaults.attention_backend", f"is {backend!r}", f"use one of {', '.join(ATTENTION_BACKENDS)}")
    algo = r.get("defaults", "speculative_algorithm", None, required=False)
    if algo is not None and (not isinstance(algo, str) or algo.upper() not in ALGORITHMS):
        raise r.fail("defaults.speculative_algorithm", f"is {algo!r}", f"use one of {', '.join(ALGORITHMS)} or omit it")
    auto = r.get("defaults", "auto_spec", {"steps": 3, "topk": 1, "draft": 4}, required=False)
    if not isinstance(auto, Mapping) or set(auto) != {"steps", "topk", "draft"} or not all(
        isinstance(auto[k], int) and not isinstance(auto[k], bool) and auto[k] >= 1 for k in auto
    ):
        raise r.fail("defaults.auto_spec", f"is {auto!r}", "write auto_spec = {steps = 3, topk = 1, draft = 4}")

    acc = r.table("acceptance")
    base = acc.get("base")
    if not isinstance(base, Mapping) or set(base) != set(WORKLOADS):
        raise r.fail("acceptance.base", f"must name exactly {', '.join(WORKLOADS)}, got {base!r}",
                     "write base = {synthetic = 0.95, code = 0.8, chat = 0.7, summarize = 0.6}")
    accept_base: dict[str, float] = {}
    for kind in WORKLOADS:
        value = base[kind]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise r.fail(f"acceptance.base.{kind}", f"must be a probability in [0, 1], got {value!r}",
                         "write a number between 0 and 1")
        accept_base[kind] = float(value)

    weights_gb = r.number("model", "weights_gb", lo=0, lo_open=True)
    gpu_mem_gb = r.number("gpu", "mem_gb", lo=0, lo_open=True)
    mem_fraction = r.number("defaults", "mem_fraction_static", lo=0, hi=1, lo_open=True)

    return Profile(
        name=name,
        description=str(raw.get("description", "")),
        sglang_version=sglang_version,
        source=source,
        model_name=r.string("model", "name"),
        params_b=r.number("model", "params_b", lo=0, lo_open=True),
        weights_gb=weights_gb,
        draft_weights_gb=r.number("model", "draft_weights_gb", 0.0, lo=0),
        context_len=r.integer("model", "context_len", lo=1),
        kv_bytes_per_token=r.number("model", "kv_bytes_per_token", lo=0, lo_open=True),
        kv_replicated=_boolean(r, "model", "kv_replicated", False),
        moe_experts=r.integer("model", "moe_experts", 0, lo=0),
        moe_topk=r.integer("model", "moe_topk", 0, lo=0),
        gpu_name=r.string("gpu", "name"),
        gpu_mem_gb=gpu_mem_gb,
        gpu_count=gpu_count,
        tp_size=tp_size,
        attention_backend=backend,
        page_size=r.integer("defaults", "page_size", 1, lo=1),
        cuda_graph_max_bs=r.integer("defaults", "cuda_graph_max_bs", lo=1),
        mem_fraction_static=mem_fraction,
        speculative_algorithm=algo.upper() if isinstance(algo, str) else None,
        auto_spec=(auto["steps"], auto["topk"], auto["draft"]),
        chunked_prefill_size=r.integer("defaults", "chunked_prefill_size", 8192, lo=1),
        runtime_overhead_gb=r.number("memory", "runtime_overhead_gb", 1.0, lo=0),
        fixed_state_gb=r.number("memory", "fixed_state_gb", 0.0, lo=0),
        spec_state_gb=r.number("memory", "spec_state_gb", 0.0, lo=0),
        tokens_per_running_request=r.number("memory", "tokens_per_running_request", 0.0, lo=0),
        min_kv_tokens=r.integer("memory", "min_kv_tokens", 1, lo=1),
        activation_gb=r.number("memory", "activation_gb", lo=0),
        cuda_graph_base_gb=r.number("memory", "cuda_graph_base_gb", lo=0),
        cuda_graph_gb_per_token=r.number("memory", "cuda_graph_gb_per_token", lo=0),
        tree_graph_factor=r.number("memory", "tree_graph_factor", 1.0, lo=1),
        accept_base=accept_base,
        accept_decay=r.number("acceptance", "decay", lo=0, hi=1, lo_open=True),
        decay_power=r.number("acceptance", "decay_power", 1.0, lo=0.5, hi=4.0),
        temperature_penalty=r.number("acceptance", "temperature_penalty", lo=0),
        tree_gain=r.number("acceptance", "tree_gain", lo=0, hi=1),
        ngram_factor=r.number("acceptance", "ngram_factor", 0.6, lo=0, hi=1),
        floor_ms=r.number("cost", "floor_ms", lo=0, lo_open=True),
        expert_ms=r.number("cost", "expert_ms", 0.0, lo=0),
        verify_ms_per_token=r.number("cost", "verify_ms_per_token", lo=0),
        request_ms=r.number("cost", "request_ms", 0.0, lo=0),
        draft_step_ms=r.number("cost", "draft_step_ms", lo=0),
        draft_ms_per_token=r.number("cost", "draft_ms_per_token", lo=0),
        tree_ms_per_node=r.number("cost", "tree_ms_per_node", 0.0, lo=0),
        prefill_base_ms=r.number("cost", "prefill_base_ms", lo=0),
        prefill_ms_per_token=r.number("cost", "prefill_ms_per_token", lo=0),
        prefill_ms_per_seq=r.number("cost", "prefill_ms_per_seq", 0.0, lo=0),
        load_seconds=r.number("timing", "load_seconds", lo=0),
        warmup_seconds=r.number("timing", "warmup_seconds", lo=0),
        run_sigma=r.number("noise", "run_sigma", 0.0, lo=0),
        step_sigma=r.number("noise", "step_sigma", 0.0, lo=0),
        seed=r.integer("noise", "seed", 0),
        extra={k: v for k, v in raw.items() if not isinstance(v, Mapping) and k not in
               {"name", "description", "sglang_version"}},
    )
