"""Search-space files and command-line overrides -> frozen, validated models.

This is the only layer (with `cli`) that reads files. Everything it returns is
immutable and fully validated, so the layers below never re-check user input.

A search-space file is TOML (docs/search-spaces.md has the full reference)::

    [server]                       # how to start the server, and fixed flags
    command = ["python", "-m", "sglang.launch_server"]
    [server.flags]
    model_path = "Qwen/Qwen3.5-122B-A10B-FP8"
    speculative_algorithm = "NEXTN"

    [params.speculative_num_steps]            # tunable flags
    type = "int"                              # int | float | categorical | draft_tokens
    low = 1
    high = 8

    [workload]    kind = "synthetic", output_len = 1000, ...
    [bench]       concurrency = [1, 32], target_rel_ci = 0.02, max_share_of_launch = 0.3, ...
    [[objectives]]  metric = "output_tok_s", concurrency = 1, direction = "maximize"
                    (optional: target_rel_ci, share_of_launch override [bench]'s for it)
    [[constraints]] metric = "ttft_ms_p99", concurrency = 32, max = 2000
    [baseline]    the user's current deployment (flags), enqueued by --baseline
    [references]  measure = true | false: the reference points (no speculation, SGLang's
                  defaults, adaptive); unset: on when the budget allows (--references)
    [study]       confirm = 5 (launches of --trials that may confirm the picks; --confirm overrides)

Each table is a pydantic dataclass: unknown keys are rejected in every table, and
values keep the types the file gave them (the study fingerprint depends on it). Every
error is a `ConfigError` whose message names the file, the key, the problem and the
fix, on one line: `<file>: <where> <problem>; <fix>`, e.g.
`space.toml: [params.speculative_num_steps] low must be an integer, got 'x'; write a
whole number`. Checks that span tables (bounds SGLang needs, metrics, concurrency
levels) run on the assembled `SearchSpace`, again after command-line overrides.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass as plain_dataclass
from dataclasses import field as dataclass_field
from dataclasses import fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic.dataclasses import dataclass

from autospec.errors import ConfigError
from autospec.metric_names import METRIC_DIRECTIONS, METRICS
from autospec.sglang_facts import DRAFT_TOKENS, STEPS, TOPK
from autospec.validation import KnownKeys, Number, first_problem, invalid, invalid_table, one_of, short
from autospec.workload import Workload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ParamSpec",
    "IntParam",
    "FloatParam",
    "CategoricalParam",
    "DraftTokensParam",
    "ObjectiveSpec",
    "ConstraintSpec",
    "BenchSpec",
    "ServerSpec",
    "ReferencesSpec",
    "SearchSpace",
    "load_search_space",
    "parse_search_space",
    "parse_duration",
    "DRAFT_TOKENS",
]

_TABLE = ConfigDict(extra="forbid")
_T = TypeVar("_T")


def _flag_name(name: str) -> str:
    """Accept `--speculative-num-steps`, `speculative-num-steps` or the snake_case name."""
    return name.lstrip("-").replace("-", "_")


# ------------------------------------------------------------------- value types

_PositiveInt = Annotated[int, Strict(), Field(ge=1)]


def _positive(value: float) -> float:
    if value <= 0:
        raise invalid(f"must be a positive number, got {value}; use a value above 0")
    return value


def _when_pairs(raw: Any) -> Any:
    """`{ topk = [2, 4], steps = 3 }` -> `(("topk", (2, 4)), ("steps", (3,)))`."""
    if isinstance(raw, tuple):
        return raw
    if not isinstance(raw, dict) or not raw:
        raise invalid(
            "must be a table such as when = { speculative_eagle_topk = [2, 4] }; "
            "name the parameters and the values this one is tuned for"
        )
    return tuple((_flag_name(str(k)), tuple(v) if isinstance(v, list) else (v,)) for k, v in raw.items())


_When = Annotated[tuple[tuple[str, tuple[Any, ...]], ...], BeforeValidator(_when_pairs)]


# ------------------------------------------------------------------ parameters


class _Tunable(KnownKeys):
    """What every parameter variant has: its flag `name` (the table's name, filled in
    by the loader) and `when` conditions on other parameters' values."""

    IMPLICIT_KEYS = frozenset({"name"})
    name: str
    when: tuple[tuple[str, tuple[Any, ...]], ...]

    def applies(self, values: Mapping[str, Any]) -> bool:
        """True when every `when` condition holds for the already chosen `values`."""
        return all(values.get(k) in allowed for k, allowed in self.when)


def _check_range(low: float, high: float, step: float | None, log: bool) -> None:
    if low > high:
        raise invalid_table(f"is an empty range: low = {low} > high = {high}; swap or widen them")
    if log and (low <= 0 or step is not None):
        raise invalid_table("log = true needs low > 0 and no step; drop step or raise low")


@dataclass(frozen=True, config=_TABLE)
class IntParam(_Tunable):
    """An integer flag in [low, high], on a `step` grid or log-uniform."""

    name: str
    low: StrictInt
    high: StrictInt
    step: _PositiveInt | None = None
    log: StrictBool = False
    when: _When = ()
    type: Literal["int"] = "int"

    @model_validator(mode="after")
    def _valid_range(self) -> IntParam:
        _check_range(self.low, self.high, self.step, self.log)
        return self


@dataclass(frozen=True, config=_TABLE)
class FloatParam(_Tunable):
    """A real flag in [low, high], on a `step` grid, log-uniform, or continuous."""

    name: str
    low: Number
    high: Number
    step: Annotated[Number, AfterValidator(_positive)] | None = None
    log: StrictBool = False
    when: _When = ()
    type: Literal["float"] = "float"

    @model_validator(mode="after")
    def _valid_range(self) -> FloatParam:
        _check_range(self.low, self.high, self.step, self.log)
        return self


def _distinct_choices(choices: tuple[Any, ...]) -> tuple[Any, ...]:
    if not choices:
        raise invalid("must not be empty; list the values to try, e.g. choices = [1, 2, 4]")
    if len(set(map(repr, choices))) != len(choices):
        raise invalid(f"contain duplicates ({short(list(choices))}); list each value once")
    return choices


@dataclass(frozen=True, config=_TABLE)
class CategoricalParam(_Tunable):
    """A flag that takes one of `choices` (numbers, strings or booleans)."""

    name: str
    choices: Annotated[tuple[Any, ...], AfterValidator(_distinct_choices)]
    when: _When = ()
    type: Literal["categorical"] = "categorical"


def _fraction_step(value: float) -> float:
    if not 0 < value <= 1:
        raise invalid(f"is the fraction grid of the allowed range and must be in (0, 1], got {value}; use e.g. 0.25")
    return float(value)


@dataclass(frozen=True, config=_TABLE)
class DraftTokensParam(_Tunable):
    """`speculative_num_draft_tokens`, sampled only when top-k > 1, as a fraction (on a
    `step` grid) of the range SGLang can run for the trial's steps and top-k, capped at
    `high` (`sglang_facts.draft_token_range`); every value is valid by construction.
    With top-k == 1 it is steps + 1, as SGLang forces."""

    name: str
    high: Annotated[int, Strict(), Field(ge=2)] | None = None
    step: Annotated[Number, AfterValidator(_fraction_step)] = 0.25
    when: _When = ()
    type: Literal["draft_tokens"] = "draft_tokens"

    @model_validator(mode="after")
    def _only_for_draft_tokens(self) -> DraftTokensParam:
        if self.name != DRAFT_TOKENS:
            raise invalid_table(f"type draft_tokens is only for {DRAFT_TOKENS}; use int for {self.name}")
        return self


#: one tunable flag; `type` says which variant
ParamSpec = Annotated[IntParam | FloatParam | CategoricalParam | DraftTokensParam, Field(discriminator="type")]
_PARAM = TypeAdapter(ParamSpec)
_PARAM_TYPES = ("int", "float", "categorical", "draft_tokens")


# ---------------------------------------------------------- objectives, constraints


def _relative_target(value: float) -> float:
    if not 0 < value < 1:
        raise invalid(f"must be in (0, 1), got {value}; e.g. 0.02 keeps measuring until the 95% interval is within +-2%")
    return value


def _share(value: float) -> float:
    if value < 0:
        raise invalid(f"must be >= 0, got {value}; e.g. 0.3 lets measuring take up to 30% of the launch time")
    return value


_RelativeTarget = Annotated[Number, AfterValidator(_relative_target)]
_Share = Annotated[Number, AfterValidator(_share)]


@dataclass(frozen=True, config=_TABLE)
class ObjectiveSpec(KnownKeys):
    """One objective: a metric at one concurrency, maximised or minimised. `target_rel_ci`
    and `share_of_launch`, when set, replace [bench]'s `target_rel_ci` and
    `max_share_of_launch` for this objective's level (the precision loop)."""

    metric: StrictStr
    concurrency: _PositiveInt
    direction: Annotated[str, one_of(("maximize", "minimize"))] = "maximize"
    target_rel_ci: _RelativeTarget | None = None
    share_of_launch: _Share | None = None

    @model_validator(mode="before")
    @classmethod
    def _natural_direction(cls, data: Any) -> Any:
        """Without `direction`, the metric's natural one (latencies down, speeds up)."""
        if isinstance(data, dict) and "direction" not in data and isinstance(data.get("metric"), str):
            return {**data, "direction": METRIC_DIRECTIONS.get(data["metric"], "maximize")}
        return data

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"


@dataclass(frozen=True, config=_TABLE)
class ConstraintSpec(KnownKeys):
    """A bound on a measured metric at one concurrency; violated => trial infeasible."""

    metric: StrictStr
    concurrency: _PositiveInt
    max: Number | None = None
    min: Number | None = None

    @model_validator(mode="after")
    def _bounded(self) -> ConstraintSpec:
        if self.min is None and self.max is None:
            raise invalid_table("needs max = ... and/or min = ...; add the bound")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise invalid_table(f"is empty: min = {self.min} > max = {self.max}; swap or widen them")
        return self

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"

    def violation(self, value: float) -> float:
        """<= 0 when satisfied (Optuna's convention); the amount of violation otherwise."""
        over = value - self.max if self.max is not None else -math.inf
        under = self.min - value if self.min is not None else -math.inf
        return float(max(over, under))


# --------------------------------------------------------------- bench, server


def _levels(raw: Any) -> tuple[int, ...]:
    levels = tuple(raw) if isinstance(raw, (list, tuple)) else ()
    if not levels or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in levels):
        raise invalid(f"must be a list of positive integers, got {short(raw)}; e.g. concurrency = [1, 32]")
    if len(set(levels)) != len(levels):
        raise invalid(f"lists a level twice ({list(levels)}); list each level once")
    return levels


def _error_rate(value: float) -> float:
    if not 0 <= value < 1:
        raise invalid(f"must be in [0, 1), got {value}; e.g. 0.1 fails a level when more than 10% of requests fail")
    return value


#: default ceiling of the precision loop: this many waves of C requests per level
DEFAULT_MAX_WAVES = 128


def _request_ceiling(raw: Any) -> int | tuple[tuple[int, int], ...] | None:
    """`max_requests = 2000` (every level) or `max_requests = { 1 = 200, 32 = 4096 }`
    (per level) -> an int or ((level, count), ...)."""

    def count(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise invalid(
                f"must be a positive integer or a table of them per level, got {short(raw)}; "
                "e.g. max_requests = 2000 or max_requests = { 1 = 200, 32 = 4096 }"
            )
        return value

    if raw is None:
        return None
    if isinstance(raw, tuple):
        return raw
    if isinstance(raw, dict):
        pairs = []
        for key, value in raw.items():
            if isinstance(key, int) and not isinstance(key, bool):
                level = key
            elif isinstance(key, str) and key.isdigit():
                level = int(key)
            else:
                raise invalid(
                    f"has the key {short(key)}, which is not a concurrency level; "
                    "key the table by level, e.g. max_requests = { 1 = 200, 32 = 4096 }"
                )
            pairs.append((level, count(value)))
        return tuple(sorted(pairs))
    return count(raw)


@dataclass(frozen=True, config=_TABLE)
class BenchSpec(KnownKeys):
    """How each trial is measured: closed-loop concurrency levels and request counts.

    A level sends `num_requests(C)` requests (the floor). With `precision` on (the
    default), a level that feeds an objective or a constraint then keeps measuring until
    the 95% interval of each of its figures is within `target_rel_ci` of the value, or
    until the trial's measuring took `max_share_of_launch` of its launch time, or until
    it sent `max_requests_at(C)` requests (the ceiling). With `freeze_gc` (the default)
    each level asks the server to freeze its garbage collectors after its warmup; see
    docs/benchmarking.md."""

    concurrency: Annotated[tuple[int, ...], PlainValidator(_levels)] = (1, 32)
    requests_multiplier: _PositiveInt = 2
    min_requests: _PositiveInt = 4
    warmup_requests: Annotated[int, Strict(), Field(ge=0)] = 1
    max_error_rate: Annotated[Number, AfterValidator(_error_rate)] = 0.1
    request_timeout_s: Annotated[Number, AfterValidator(_positive)] = 600.0
    precision: StrictBool = True
    target_rel_ci: _RelativeTarget = 0.02
    max_share_of_launch: _Share = 0.3
    max_requests: Annotated[int | tuple[tuple[int, int], ...] | None, PlainValidator(_request_ceiling)] = None
    freeze_gc: StrictBool = True
    warmup_output_len: Annotated[int, Strict(), Field(ge=0)] = 0  # 0: the workload's output_len
    #: warm a level up past `warmup_requests` waves while its per-request rate still trends, up to
    #: this many warm-up requests (never fewer than those waves); 0 (the default): a fixed warm-up.
    #: NGRAM spaces set it: the n-gram cache's climb makes a fixed count too short
    warmup_cap: Annotated[int, Strict(), Field(ge=0)] = 0

    def num_requests(self, concurrency: int) -> int:
        """Measured requests at one level: `multiplier` waves, at least `min_requests`."""
        return max(self.min_requests, self.requests_multiplier * concurrency)

    def max_requests_at(self, concurrency: int) -> int:
        """The precision loop's ceiling at one level: `max_requests` (for that level, where
        it is a table), else DEFAULT_MAX_WAVES waves; never below the floor."""
        explicit = dict(self.max_requests).get(concurrency) if isinstance(self.max_requests, tuple) else self.max_requests
        return explicit if explicit is not None else max(DEFAULT_MAX_WAVES * concurrency, self.num_requests(concurrency))


@dataclass(frozen=True, config=_TABLE)
class StudySpec(KnownKeys):
    """How the study spends its launches: `confirm` is the most launches of ``--trials``
    that may confirm the picks (0: none; None: a quarter of the budget, the default).
    ``autospec optimize --confirm K`` overrides it. Not part of the fingerprint: it
    changes what is launched, not what the measurements mean."""

    confirm: Annotated[int, Strict(), Field(ge=0)] | None = None


def _command(raw: Any) -> tuple[str, ...]:
    words = raw.split() if isinstance(raw, str) else raw
    if not isinstance(words, (list, tuple)) or not words or not all(isinstance(w, str) for w in words):
        raise invalid(f'must be a non-empty list of strings, got {short(raw)}; e.g. ["python", "-m", "sglang.launch_server"]')
    return tuple(words)


def _snake_case_flags(flags: dict[str, Any]) -> dict[str, Any]:
    return {_flag_name(name): value for name, value in flags.items()}


def _seconds(value: float) -> float:
    return float(_positive(value))


def _version_text(value: Any) -> Any:
    return None if value is None else str(value)


@dataclass(frozen=True, config=_TABLE)
class ServerSpec(KnownKeys):
    """How to start the server: command, fixed flags (SGLang's snake_case names), extra
    environment, the SGLang version when preflight cannot detect it, readiness timeout."""

    command: Annotated[tuple[str, ...], PlainValidator(_command)] = ("python", "-m", "sglang.launch_server")
    flags: Annotated[dict[str, Any], AfterValidator(_snake_case_flags)] = Field(default_factory=dict)
    env: dict[str, StrictStr] = Field(default_factory=dict)
    sglang_version: Annotated[str | None, BeforeValidator(_version_text)] = None
    ready_timeout_s: Annotated[Number, AfterValidator(_seconds)] = 1800.0


@dataclass(frozen=True, config=_TABLE)
class ReferencesSpec(KnownKeys):
    """Whether the study measures its reference points (`autospec.study.proposing.references`):
    `measure` true or false; unset, the budget decides. ``--references`` overrides it."""

    measure: StrictBool | None = None


# ------------------------------------------------------------------ the space


@plain_dataclass(frozen=True)
class SearchSpace:
    """A validated search-space file (plus CLI overrides)."""

    source: str
    params: tuple[ParamSpec, ...]
    server: ServerSpec
    workload: Workload
    bench: BenchSpec
    objectives: tuple[ObjectiveSpec, ...]
    constraints: tuple[ConstraintSpec, ...] = ()
    baseline: Mapping[str, Any] | None = None
    #: ``[references] measure``: measure the reference points (None: the budget decides); not fingerprinted
    references: bool | None = None
    study: StudySpec = dataclass_field(default_factory=StudySpec)
    #: fixed flags set on the command line, as the user wrote them (``{"tp_size": "--tp-size 2"}``),
    #: so that an error about one names the command line, not the file; not part of the fingerprint
    flag_origins: Mapping[str, str] = dataclass_field(default_factory=dict)

    @property
    def measured_specs(self) -> tuple[ObjectiveSpec | ConstraintSpec, ...]:
        """Every figure a trial must measure: the objectives, then the SLO constraints."""
        return (*self.objectives, *self.constraints)

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def fingerprint(self) -> str:
        """Hash of what makes two studies comparable: parameters, objectives, workload,
        concurrency levels and fixed flags. Stored with the study to catch clashes, so its
        value for a given file must never change."""
        payload = {
            "params": [_param_dict(p) for p in self.params],
            "objectives": [(o.metric, o.concurrency, o.direction) for o in self.objectives],
            "constraints": [(c.metric, c.concurrency, c.max, c.min) for c in self.constraints],
            "workload": _workload_dict(self.workload),
            "concurrency": list(self.bench.concurrency),
            "flags": dict(sorted(self.server.flags.items())),
        }
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_overrides(
        self,
        *,
        flags: Mapping[str, Any] | None = None,
        command: tuple[str, ...] | None = None,
        concurrency: tuple[int, ...] | None = None,
        output_len: int | None = None,
        flag_origins: Mapping[str, str] | None = None,
    ) -> SearchSpace:
        """Apply command-line overrides; the result is validated again (ConfigError).

        `flags` are fixed flags from the command line; `flag_origins` says how each was
        written (``{"mem_fraction_static": "--flag mem_fraction_static=1.5"}``; default
        ``--flag NAME=VALUE``), and an error about one of them names that instead of the
        file. The result must name a model (``model_path``): no server starts without one."""
        server, bench, workload = self.server, self.bench, self.workload
        origins = dict(self.flag_origins)
        if flags:
            flags = {_flag_name(name): value for name, value in flags.items()}
            given = {_flag_name(name): text for name, text in (flag_origins or {}).items()}
            origins.update({name: given.get(name) or f"--flag {name}={value}" for name, value in flags.items()})
            _check_overrides(self, flags, origins)
            server = _rebuilt(self.source, ("server",), lambda: replace(server, flags={**server.flags, **flags}))
        if command:
            server = _rebuilt(self.source, ("server",), lambda: replace(server, command=tuple(command)))
        if concurrency:
            bench = _rebuilt(self.source, ("bench",), lambda: replace(bench, concurrency=tuple(concurrency)))
        if output_len:
            workload = _workload_table(self.source, lambda: replace(workload, output_len=output_len))
        space = replace(self, server=server, bench=bench, workload=workload, flag_origins=origins)
        _validate_space(space)
        if not space.server.flags.get("model_path"):
            raise ConfigError(
                f"{self.source}: [server.flags] has no model_path, so no server can start; "
                'add model_path = "ORG/MODEL" under [server.flags] or pass --model-path'
            )
        return space


def _field_dict(table: Any) -> dict[str, Any]:
    return {f.name: getattr(table, f.name) for f in fields(table)}


def _workload_dict(workload: Workload) -> dict[str, Any]:
    """The workload's fields as the fingerprint hashes them: `top_k` and `sampling_seed` came
    later, so each is hashed only when set (unset, every earlier space's fingerprint stays as it was)."""
    hashed = _field_dict(workload)
    if hashed["top_k"] is None:
        del hashed["top_k"]
    if not hashed["sampling_seed"]:
        del hashed["sampling_seed"]
    return hashed


def _param_dict(p: ParamSpec) -> dict[str, Any]:
    """The parameter's fields that differ from the defaults of the single ParamSpec class
    that came before the variants (None, (), False), as that class hashed them."""
    return {k: v for k, v in _field_dict(p).items() if v not in (None, (), False)}


# ---------------------------------------------------------------------- parsing


@dataclass(frozen=True, config=_TABLE)
class _SpaceFile(KnownKeys):
    """The tables of a search-space file. Parameters and the workload are validated one
    by one afterwards (a parameter's name is its table's name)."""

    server: ServerSpec = Field(default_factory=ServerSpec)
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    bench: BenchSpec = Field(default_factory=BenchSpec)
    objectives: tuple[ObjectiveSpec, ...] = ()
    constraints: tuple[ConstraintSpec, ...] = ()
    baseline: dict[str, Any] | None = None
    references: ReferencesSpec = Field(default_factory=ReferencesSpec)
    study: StudySpec = Field(default_factory=StudySpec)


_SPACE_FILE = TypeAdapter(_SpaceFile)

_DEFAULT_OBJECTIVES = (
    ObjectiveSpec("output_tok_s", 1, "maximize"),
    ObjectiveSpec("agg_output_tok_s", 32, "maximize"),
)


def load_search_space(path: str | Path) -> SearchSpace:
    """Read and validate a search-space TOML file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"search-space file {str(p)!r} does not exist; pass an existing file with --space (see search_spaces/ for examples)"
        )
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc}); fix the syntax at that position") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a UTF-8 text file; pass a TOML search-space file") from None
    return parse_search_space(data, source=str(p))


def parse_search_space(data: Mapping[str, Any], *, source: str = "<search space>") -> SearchSpace:
    """Validate an already parsed TOML document (ConfigError on the first problem)."""
    try:
        tables = _SPACE_FILE.validate_python(dict(data))
    except ValidationError as exc:
        raise _config_error(exc, source) from None
    space = SearchSpace(
        source=source,
        params=tuple(_parse_param(name, table, source) for name, table in tables.params.items()),
        server=tables.server,
        workload=_workload_table(source, lambda: Workload(**tables.workload)),
        bench=tables.bench,
        objectives=tables.objectives or _DEFAULT_OBJECTIVES,
        constraints=tables.constraints,
        baseline=tables.baseline or None,
        references=tables.references.measure,
        study=tables.study,
    )
    _validate_space(space)
    return space


def _parse_param(key: str, table: Mapping[str, Any], source: str) -> ParamSpec:
    name = _flag_name(key)
    if "name" in table:
        raise ConfigError(f"{source}: [params.{name}] unknown key 'name'; the table's name is the flag's name, remove it")
    try:
        return _PARAM.validate_python({**table, "name": name})
    except ValidationError as exc:
        raise _config_error(exc, source, ("params", name), drop=_PARAM_TYPES) from None


def _workload_table(source: str, build: Callable[[], Workload]) -> Workload:
    """`build()`, with its one-line ConfigError located in the file's [workload]."""
    try:
        return build()
    except ConfigError as exc:
        raise ConfigError(f"{source}: [workload] {exc}") from None


def _rebuilt(source: str, table: tuple[str, ...], build: Callable[[], _T]) -> _T:
    """`build()` (a table re-validated after an override), errors as one line."""
    try:
        return build()
    except ValidationError as exc:
        raise _config_error(exc, source, table) from None


def _config_error(exc: ValidationError, source: str, prefix: tuple[str, ...] = (), drop: tuple[str, ...] = ()) -> ConfigError:
    """pydantic's first error as `<file>: <where> <problem>; <fix>`. `prefix` locates a
    table validated on its own; `drop` removes a union's tag from the location."""
    problem = first_problem(exc)
    table = problem.table[1:] if problem.table[:1] and problem.table[0] in drop else problem.table
    where = " ".join(part for part in (_table_label(prefix + table), problem.key) if part)
    return ConfigError(f"{source}: {where} {problem.text}" if where else f"{source}: {problem.text}")


def _table_label(path: tuple[str | int, ...]) -> str:
    """("params", "x") -> "[params.x]"; ("objectives", 0) -> "objectives #1"; () -> ""."""
    if not path:
        return ""
    if any(isinstance(part, int) for part in path):
        return " ".join(f"#{part + 1}" if isinstance(part, int) else part for part in path)
    return "[" + ".".join(str(part) for part in path) + "]"


# ------------------------------------------------------------------- cross-field checks

# Bounds SGLang itself needs (checked against sglang 0.5.23 server_args): steps >= 1,
# topk >= 1, draft tokens >= 2 under EAGLE, 0 < mem_fraction_static < 1. (low, high,
# integer): integer flags take whole numbers within [low, high]; the others (only
# mem_fraction_static) real numbers strictly between low and high.
_FLAG_BOUNDS: dict[str, tuple[float, float, bool]] = {
    STEPS: (1, 64, True),
    TOPK: (1, 64, True),
    DRAFT_TOKENS: (2, 1024, True),
    "mem_fraction_static": (0.0, 1.0, False),
    "max_running_requests": (1, 1 << 20, True),
    "cuda_graph_max_bs": (1, 1 << 16, True),
    "page_size": (1, 4096, True),
    "tp_size": (1, 1024, True),
}


def _bound_problem(name: str, low: float, high: float) -> str | None:
    """`<name> must stay within <range> ..., got <values>` when [low, high] leaves SGLang's
    bounds of flag `name`; None when it stays within them (or the flag has none)."""
    bounds = _FLAG_BOUNDS.get(name)
    if bounds is None:
        return None
    lo, hi, integer = bounds
    ok = (lo <= low and high <= hi) if integer else (lo < low and high < hi)
    if ok:
        return None
    rng = f"[{_text(lo)}, {_text(hi)}]" if integer else f"({_text(lo)}, {_text(hi)})"
    got = _text(low) if low == high else f"{_text(low)}..{_text(high)}"
    return f"{name} must stay within {rng} (SGLang rejects other values), got {got}"


def _text(number: float) -> str:
    """A bound as a person writes it: 1048576, not 1.04858e+06; 0.85, not 0.8500000001."""
    return str(int(number)) if float(number).is_integer() and abs(number) < 1e15 else f"{number:g}"


def _fixed_value_problem(name: str, value: Any) -> str | None:
    """What is wrong with the fixed value of a flag that has SGLang bounds, with the fix;
    None when nothing is (or autospec knows no bounds for the flag)."""
    bounds = _FLAG_BOUNDS.get(name)
    if bounds is None or value is False or value is None:  # no bounds, or not passed to the server at all
        return None
    lo, hi, integer = bounds
    number = _as_number(value, integer)
    if number is None:
        kind = "an integer" if integer else "a number"
        example = _text(lo) if integer else _text(lo + 0.85 * (hi - lo))
        return f"{name} must be {kind}, got {short(value)}; write e.g. {name}={example}"
    problem = _bound_problem(name, number, number)
    return f"{problem}; use a value within that range" if problem else None


def _as_number(value: Any, integer: bool) -> float | None:
    """The number SGLang's parser makes of a fixed flag's value (it gets the value's text:
    "4" and 4 alike; 4.0 is no integer for it), or None when it would refuse it."""
    if isinstance(value, bool):
        return None  # True becomes a bare switch, without the number
    if isinstance(value, str):
        try:
            return int(value) if integer else float(value)
        except ValueError:
            return None
    if isinstance(value, int) or (isinstance(value, float) and not integer):
        return value
    return None


def _check_overrides(space: SearchSpace, flags: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """Fixed flags from the command line: checked like [server.flags], errors named after
    the option that set them (`origins`)."""
    for name, value in flags.items():
        origin = origins[name]
        problem = _fixed_value_problem(name, value)
        if problem:
            raise ConfigError(f"{origin}: {problem}")
        if space.param(name) is not None:
            raise ConfigError(
                f"{origin}: {name} is tunable in {space.source} ([params.{name}]), so it cannot also be fixed; "
                f"drop {origin} or use a search space without [params.{name}]"
            )


def _numeric(values: tuple[Any, ...]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _validate_space(space: SearchSpace) -> None:
    """Checks across tables: names, `when` references, SGLang's bounds, metrics, levels."""
    src = space.source
    if not space.params:
        raise ConfigError(
            f"{src}: no tunable parameter, so there is nothing to tune; add a [params.NAME] table, e.g. "
            '[params.speculative_num_steps] with type = "int", low = 1, high = 5 (see docs/search-spaces.md)'
        )
    names = [p.name for p in space.params]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ConfigError(f"{src}: parameter {sorted(dupes)[0]} is declared twice; keep one [params.*] table")
    known = set(names) | set(space.server.flags)
    for name in names:
        if name in space.server.flags:
            raise ConfigError(f"{src}: {name} is both tunable ([params.{name}]) and fixed ([server.flags]); remove one of them")
    for p in space.params:
        _check_param(p, known, src)
    for name, value in space.server.flags.items():
        if name in space.flag_origins:
            continue  # checked by _check_overrides, and named after its option
        problem = _fixed_value_problem(name, value)
        if problem:
            raise ConfigError(f"{src}: [server.flags] {problem}")
    _check_measures(space)
    _check_bench(space)


def _check_bench(space: SearchSpace) -> None:
    """[bench] max_requests: levels that exist, and never below a level's floor."""
    bench, src = space.bench, space.source
    if isinstance(bench.max_requests, tuple):
        unknown = [level for level, _ in bench.max_requests if level not in bench.concurrency]
        if unknown:
            raise ConfigError(
                f"{src}: [bench] max_requests names level {unknown[0]}, which concurrency {list(bench.concurrency)} "
                "does not include; key it by a measured level"
            )
    for level in bench.concurrency:
        floor = bench.num_requests(level)
        if bench.max_requests_at(level) < floor:
            raise ConfigError(
                f"{src}: [bench] max_requests {bench.max_requests_at(level)} at concurrency {level} is below the "
                f"{floor} requests every level sends (max(min_requests, requests_multiplier x C)); raise it to at "
                f"least {floor}"
            )


def _check_param(p: ParamSpec, known: set[str], src: str) -> None:
    for key, _ in p.when:
        if key not in known:
            raise ConfigError(f"{src}: [params.{p.name}] when refers to {key}, which is neither a parameter nor a fixed flag")
    if isinstance(p, (IntParam, FloatParam)):
        problem = _bound_problem(p.name, p.low, p.high)
        if problem:
            raise ConfigError(f"{src}: [params.{p.name}] {problem}; keep low and high within that range")
    elif isinstance(p, CategoricalParam) and _numeric(p.choices):
        problem = _bound_problem(p.name, min(p.choices), max(p.choices))
        if problem:
            raise ConfigError(f"{src}: [params.{p.name}] {problem}; keep the choices within that range")
    elif isinstance(p, DraftTokensParam):
        for needed in (STEPS, TOPK):
            if needed not in known:
                raise ConfigError(
                    f"{src}: [params.{DRAFT_TOKENS}] needs {needed} as a parameter or a fixed flag, "
                    "because its range depends on it"
                )


def _check_measures(space: SearchSpace) -> None:
    """Objectives and constraints name known metrics at measured concurrency levels."""
    src = space.source
    levels = set(space.bench.concurrency)
    specs: list[ObjectiveSpec | ConstraintSpec] = [*space.objectives, *space.constraints]
    for spec in specs:
        if spec.concurrency not in levels:
            raise ConfigError(
                f"{src}: {spec.name} measures at concurrency {spec.concurrency}, which [bench] concurrency "
                f"{list(space.bench.concurrency)} does not include; add it there"
            )
        _check_metric(spec.metric, src)
    objective_names = [o.name for o in space.objectives]
    if len(set(objective_names)) != len(objective_names):
        raise ConfigError(f"{src}: an objective is listed twice; each metric@concurrency once")


def _check_metric(metric: str, source: str) -> None:
    if metric not in METRICS:
        known = ", ".join(sorted(METRICS))
        raise ConfigError(f"{source}: unknown metric {metric!r}; choose one of: {known}")


def parse_duration(text: str) -> float:
    """'90s', '30m', '8h', '1h30m' or plain seconds -> seconds. Plain numbers are read as
    Python floats (so 'nan', 'inf' and negatives parse): callers check the range."""
    s = text.strip().lower()
    if not s:
        raise ConfigError("empty duration; write e.g. 8h, 30m or 90s")
    try:
        return float(s)
    except ValueError:
        pass
    number = r"(?:\d+(?:\.\d*)?|\.\d+)"
    if re.fullmatch(rf"(?:{number}[smhd])+", s):
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        return sum(float(n) * units[u] for n, u in re.findall(rf"({number})([smhd])", s))
    tail = re.fullmatch(rf"(?:{number}[smhd])+({number})", s)
    if tail:
        raise ConfigError(f"bad duration {text!r}: {tail.group(1)} has no unit; add s, m or h")
    raise ConfigError(f"bad duration {text!r}; write e.g. 8h, 30m, 90s or 1h30m")
