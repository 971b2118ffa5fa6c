"""Simulator profiles: a TOML file describing one model on one machine, loaded into a
frozen `Profile`.

A profile holds everything the performance and memory model (`autospec.sim.arguments`, `.memory`, `.acceptance`, `.timing`)
needs: model and GPU sizes, SGLang's defaults for the flags the user leaves unset, the
memory model's reserves, per-workload acceptance, step-cost coefficients, load timing
and noise. The format is documented for users in docs/simulator.md. Each table is a
pydantic model: every field is checked, an unknown table or key (a typo such as
`[cost] request_msx`) is an error, and a bad file raises `ProfileError` with a one-line
message that names the file, the table.key, the problem and the fix.

Contract: `load_profile(path_or_name)` never returns a half-valid profile. Names
without a path separator or `.toml` suffix refer to the profiles shipped in
`autospec/sim/profiles/` (see `list_profiles()`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, PlainValidator, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from autospec.sim.choices import ALGORITHMS, ATTENTION_BACKENDS
from autospec.sim.variation import RequestVariation

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
    # per request and per machine (autospec.sim.variation; docs/simulator.md section 15)
    request_sigma: float = 0.0
    ngram_climb: float = 0.0
    climb_requests: float = 8.0
    climb_window: int = 40
    machine_sigma: float = 0.0

    # optional top-level keys read by the server (architecture, model_type,
    # draft_architecture, typical_output_len), those the file sets
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def variation(self) -> RequestVariation:
        """The per-request effect on the accept length (`autospec.sim.variation`)."""
        return RequestVariation(self.request_sigma, self.ngram_climb, self.climb_requests, self.climb_window)

    def accept_base_for(self, workload: str) -> float:
        try:
            return self.accept_base[workload]
        except KeyError:
            raise ValueError(f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}") from None


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
                f"no shipped simulator profile named {text!r}; use one of {', '.join(list_profiles())} or a path to a .toml file"
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


# ------------------------------------------------------------------- value types
#
# Every error text below is "problem; fix"; `_profile_error` puts the file and the
# table.key in front of it.


def _fail(text: str) -> PydanticCustomError:
    return PydanticCustomError("value", text)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(f"must be a number, got {value!r}; write a plain number")
    return float(value)


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"must be an integer, got {value!r}; write a whole number")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(f"must be a non-empty string, got {value!r}; quote the value")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(f"must be true or false, got {value!r}; write true or false")
    return value


def _at_least(lo: float, *, open_: bool = False) -> AfterValidator:
    def check(value: float) -> float:
        if value <= lo if open_ else value < lo:
            raise _fail(f"must be {'>' if open_ else '>='} {lo}, got {value}; use a value in range")
        return value

    return AfterValidator(check)


def _at_most(hi: float) -> AfterValidator:
    def check(value: float) -> float:
        if value > hi:
            raise _fail(f"must be <= {hi}, got {value}; use a value in range")
        return value

    return AfterValidator(check)


def _probability(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise _fail(f"must be a probability in [0, 1], got {value!r}; write a number between 0 and 1")
    return float(value)


_Number = Annotated[float, PlainValidator(_number)]
_Positive = Annotated[_Number, _at_least(0, open_=True)]
_NonNegative = Annotated[_Number, _at_least(0)]
_Share = Annotated[_Number, _at_least(0), _at_most(1)]  # [0, 1]
_Integer = Annotated[int, PlainValidator(_integer)]
_Count = Annotated[_Integer, _at_least(1)]
_NonNegativeCount = Annotated[_Integer, _at_least(0)]
_Text = Annotated[str, PlainValidator(_text)]
_Bool = Annotated[bool, PlainValidator(_boolean)]


# ------------------------------------------------------------------------ tables


class _Table(BaseModel):
    """A profile table: frozen; a key that is not a field fails with the allowed keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise cls._unknown(unknown[0], data[unknown[0]])
        return data

    @classmethod
    def _unknown(cls, key: str, value: Any) -> PydanticCustomError:
        allowed = ", ".join(sorted(cls.model_fields))
        return PydanticCustomError("unknown_key", "is not a known key; use one of {allowed}", {"key": key, "allowed": allowed})


class _Model(_Table):
    name: _Text
    params_b: _Positive
    weights_gb: _Positive
    draft_weights_gb: _NonNegative = 0.0
    context_len: _Count
    kv_bytes_per_token: _Positive
    kv_replicated: _Bool = False
    moe_experts: _NonNegativeCount = 0
    moe_topk: _NonNegativeCount = 0


class _Gpu(_Table):
    name: _Text
    mem_gb: _Positive
    count: _Count


class _AutoSpec(_Table):
    steps: _Count
    topk: _Count
    draft: _Count


def _attention_backend(value: str) -> str:
    if value not in ATTENTION_BACKENDS:
        raise _fail(f"is {value!r}; use one of {', '.join(ATTENTION_BACKENDS)}")
    return value


def _algorithm(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or value.upper() not in ALGORITHMS):
        raise _fail(f"is {value!r}; use one of {', '.join(ALGORITHMS)} or omit it")
    return value.upper() if value is not None else None


class _Defaults(_Table):
    tp_size: _Count | None = None  # None: gpu.count
    attention_backend: Annotated[_Text, AfterValidator(_attention_backend)] = "flashinfer"
    page_size: _Count = 1
    cuda_graph_max_bs: _Count
    mem_fraction_static: Annotated[_Number, _at_least(0, open_=True), _at_most(1)]
    speculative_algorithm: Annotated[str | None, PlainValidator(_algorithm)] = None
    auto_spec: _AutoSpec = _AutoSpec(steps=3, topk=1, draft=4)
    chunked_prefill_size: _Count = 8192


class _Memory(_Table):
    runtime_overhead_gb: _NonNegative = 1.0
    fixed_state_gb: _NonNegative = 0.0
    spec_state_gb: _NonNegative = 0.0
    tokens_per_running_request: _NonNegative = 0.0
    min_kv_tokens: _Count = 1
    activation_gb: _NonNegative
    cuda_graph_base_gb: _NonNegative
    cuda_graph_gb_per_token: _NonNegative
    tree_graph_factor: Annotated[_Number, _at_least(1)] = 1.0


def _one_per_workload(value: Any) -> Any:
    if not isinstance(value, Mapping) or set(value) != set(WORKLOADS):
        raise _fail(
            f"must name exactly {', '.join(WORKLOADS)}, got {value!r}; "
            "write base = {synthetic = 0.95, code = 0.8, chat = 0.7, summarize = 0.6}"
        )
    return value


class _Acceptance(_Table):
    base: Annotated[dict[str, Annotated[float, PlainValidator(_probability)]], BeforeValidator(_one_per_workload)]
    decay: Annotated[_Number, _at_least(0, open_=True), _at_most(1)]
    decay_power: Annotated[_Number, _at_least(0.5), _at_most(4.0)] = 1.0
    temperature_penalty: _NonNegative
    tree_gain: _Share
    ngram_factor: _Share = 0.6


class _Cost(_Table):
    floor_ms: _Positive
    expert_ms: _NonNegative = 0.0
    verify_ms_per_token: _NonNegative
    request_ms: _NonNegative = 0.0
    draft_step_ms: _NonNegative
    draft_ms_per_token: _NonNegative
    tree_ms_per_node: _NonNegative = 0.0
    prefill_base_ms: _NonNegative
    prefill_ms_per_token: _NonNegative
    prefill_ms_per_seq: _NonNegative = 0.0


class _Timing(_Table):
    load_seconds: _NonNegative
    warmup_seconds: _NonNegative


class _Noise(_Table):
    run_sigma: _NonNegative = 0.0
    step_sigma: _NonNegative = 0.0
    seed: _Integer = 0
    # Defaults: calibrated to SGLang 0.5.16 on H200s (docs/simulator.md section 15).
    request_sigma: _NonNegative = 0.1
    ngram_climb: _NonNegative = 0.32
    climb_requests: _NonNegative = 8.0
    climb_window: _Count = 40
    machine_sigma: _NonNegative = 0.05


def _release(value: str) -> str:
    """A release number such as 0.5.16 (what `config.version_at_least` compares)."""
    parts = value.split(".")
    valid = len(parts) >= 2 and all(p.isdigit() for p in parts[:3])
    try:
        Version(value)
    except InvalidVersion:
        valid = False
    if not valid:
        raise _fail(f"must look like 0.5.16, got {value!r}; write a release number")
    return value


_TABLES = ("acceptance", "cost", "defaults", "gpu", "memory", "model", "noise", "timing")

#: optional top-level keys the server reads (`SimServer.extra`); kept in `Profile.extra`
_EXTRA_KEYS = ("architecture", "model_type", "draft_architecture", "typical_output_len")


class _ProfileFile(_Table):
    """A whole profile file: top-level keys and one model per table."""

    name: _Text | None = None  # None: the file's name
    description: Annotated[str, BeforeValidator(str)] = ""
    sglang_version: Annotated[_Text, AfterValidator(_release)]
    architecture: _Text | None = None  # hf_config.architectures[0], for /model_info
    model_type: _Text | None = None
    draft_architecture: _Text | None = None
    typical_output_len: _Count | None = None  # median EOS-terminated answer length
    model: _Model
    gpu: _Gpu
    defaults: _Defaults
    memory: _Memory
    acceptance: _Acceptance
    cost: _Cost
    timing: _Timing
    noise: _Noise = _Noise()

    @classmethod
    def _unknown(cls, key: str, value: Any) -> PydanticCustomError:
        if not isinstance(value, Mapping):
            return super()._unknown(key, value)
        return PydanticCustomError(
            "unknown_table",
            "is not a known table; use only {tables} (see docs/simulator.md)",
            {"key": key, "tables": ", ".join(_TABLES)},
        )


# ----------------------------------------------------------------------- loading


def profile_from_dict(raw: Mapping[str, Any], source: str = "<dict>") -> Profile:
    """Validate a parsed TOML document into a Profile (ProfileError on the first problem)."""
    try:
        parsed = _ProfileFile.model_validate(dict(raw))
    except ValidationError as exc:
        raise _profile_error(exc, source) from None
    return _profile(parsed, source)


def _profile(p: _ProfileFile, source: str) -> Profile:
    """The flat `Profile` of a validated file (checks across tables here)."""
    tp_size = p.defaults.tp_size if p.defaults.tp_size is not None else p.gpu.count
    if tp_size > p.gpu.count:
        raise ProfileError(
            f"simulator profile {source}: defaults.tp_size ({tp_size}) exceeds gpu.count "
            f"({p.gpu.count}); lower tp_size or add GPUs"
        )
    auto = p.defaults.auto_spec
    # The tables' keys are Profile's field names, except where spelled out.
    return Profile(
        name=p.name or (Path(source).stem if source != "<dict>" else "profile"),
        description=p.description,
        sglang_version=p.sglang_version,
        source=source,
        model_name=p.model.name,
        **{k: v for k, v in p.model if k != "name"},
        gpu_name=p.gpu.name,
        gpu_mem_gb=p.gpu.mem_gb,
        gpu_count=p.gpu.count,
        tp_size=tp_size,
        **{k: v for k, v in p.defaults if k not in ("tp_size", "auto_spec")},
        auto_spec=(auto.steps, auto.topk, auto.draft),
        **dict(p.memory),
        accept_base={kind: p.acceptance.base[kind] for kind in WORKLOADS},
        accept_decay=p.acceptance.decay,
        decay_power=p.acceptance.decay_power,
        temperature_penalty=p.acceptance.temperature_penalty,
        tree_gain=p.acceptance.tree_gain,
        ngram_factor=p.acceptance.ngram_factor,
        **dict(p.cost),
        **dict(p.timing),
        **dict(p.noise),
        extra={key: getattr(p, key) for key in _EXTRA_KEYS if getattr(p, key) is not None},
    )


def _profile_error(exc: ValidationError, source: str) -> ProfileError:
    """pydantic's first error as one line: file, table.key, problem and fix."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "unknown_table":
        where, text = f"[{ctx['key']}]", error["msg"]
    elif kind == "unknown_key":
        where, text = ".".join([*loc, str(ctx["key"])]), error["msg"]
    elif kind == "missing":
        where, text = _missing(loc)
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        where, text = ".".join(loc), f"must be a table, got {error.get('input')!r}; write it as [{'.'.join(loc)}]"
    elif kind == "value":
        where, text = ".".join(loc), error["msg"]
    else:
        where, text = ".".join(loc), f"is invalid ({error['msg']}); fix the value"
    return ProfileError(f"simulator profile {source}: {where} {text}")


def _missing(loc: list[str]) -> tuple[str, str]:
    """(where, "problem; fix") for a missing table or key."""
    if len(loc) == 1 and loc[0] in _TABLES:
        return f"[{loc[0]}]", f"is missing; add a [{loc[0]}] table (see docs/simulator.md)"
    if len(loc) == 1:
        return loc[0], f'is missing; add `{loc[0]} = "..."` at the top of the file'
    return ".".join(loc), f"is missing; add `{loc[-1]} = ...` under [{'.'.join(loc[:-1])}]"
