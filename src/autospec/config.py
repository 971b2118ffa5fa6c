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
    [bench]       concurrency = [1, 32], ...
    [[objectives]]  metric = "output_tok_s", concurrency = 1, direction = "maximize"
    [[constraints]] metric = "ttft_ms_p99", concurrency = 32, max = 2000
    [baseline]    the user's current deployment (flags), enqueued by --baseline

Every error is a `ConfigError` whose message names the file, the key, the problem
and the fix, on one line.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from autospec.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "ParamSpec",
    "ObjectiveSpec",
    "ConstraintSpec",
    "WorkloadSpec",
    "BenchSpec",
    "ServerSpec",
    "SearchSpace",
    "load_search_space",
    "parse_search_space",
    "parse_duration",
    "DRAFT_TOKENS",
]

DRAFT_TOKENS = "speculative_num_draft_tokens"
STEPS = "speculative_num_steps"
TOPK = "speculative_eagle_topk"

_PARAM_TYPES = ("int", "float", "categorical", "draft_tokens")
_WORKLOAD_KINDS = ("synthetic", "random", "file", "builtin")
_APIS = ("generate", "completions", "chat")
_DIRECTIONS = ("maximize", "minimize")


@dataclass(frozen=True)
class ParamSpec:
    """One tunable server flag.

    `draft_tokens` is special: it is only sampled when top-k > 1, as a fraction of the
    range SGLang allows, [steps + 1, min(steps * topk + 1, high)], so every sampled
    value is valid by construction (topk == 1 forces steps + 1, as SGLang does).
    `when` restricts the parameter to trials where other parameters take the listed
    values; otherwise the flag is left unset (SGLang's default).
    """

    name: str
    type: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def applies(self, values: Mapping[str, Any]) -> bool:
        """True when every `when` condition holds for the already chosen `values`."""
        return all(values.get(k) in allowed for k, allowed in self.when)


@dataclass(frozen=True)
class ObjectiveSpec:
    metric: str
    concurrency: int
    direction: str = "maximize"

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"


@dataclass(frozen=True)
class ConstraintSpec:
    """A bound on a measured metric at one concurrency; violated => trial infeasible."""

    metric: str
    concurrency: int
    max: float | None = None
    min: float | None = None

    @property
    def name(self) -> str:
        return f"{self.metric}@c{self.concurrency}"

    def violation(self, value: float) -> float:
        """<= 0 when satisfied (Optuna's convention); the amount of violation otherwise."""
        over = value - self.max if self.max is not None else -math.inf
        under = self.min - value if self.min is not None else -math.inf
        return float(max(over, under))


@dataclass(frozen=True)
class WorkloadSpec:
    kind: str = "synthetic"
    input_len: int = 32
    output_len: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    api: str = "generate"
    path: str | None = None
    name: str | None = None
    seed: int = 0


@dataclass(frozen=True)
class BenchSpec:
    concurrency: tuple[int, ...] = (1, 32)
    requests_multiplier: int = 2
    min_requests: int = 4
    warmup_requests: int = 1
    max_error_rate: float = 0.1
    request_timeout_s: float = 600.0

    def num_requests(self, concurrency: int) -> int:
        """Measured requests at one level: `multiplier` waves, at least `min_requests`."""
        return max(self.min_requests, self.requests_multiplier * concurrency)


@dataclass(frozen=True)
class ServerSpec:
    command: tuple[str, ...] = ("python", "-m", "sglang.launch_server")
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    sglang_version: str | None = None
    ready_timeout_s: float = 1800.0


@dataclass(frozen=True)
class SearchSpace:
    """A validated search-space file (plus CLI overrides)."""

    source: str
    params: tuple[ParamSpec, ...]
    server: ServerSpec
    workload: WorkloadSpec
    bench: BenchSpec
    objectives: tuple[ObjectiveSpec, ...]
    constraints: tuple[ConstraintSpec, ...] = ()
    baseline: Mapping[str, Any] | None = None

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def fingerprint(self) -> str:
        """Hash of what makes two studies comparable: parameters, objectives, workload,
        concurrency levels and fixed flags. Stored with the study to catch clashes."""
        payload = {
            "params": [_param_dict(p) for p in self.params],
            "objectives": [(o.metric, o.concurrency, o.direction) for o in self.objectives],
            "constraints": [(c.metric, c.concurrency, c.max, c.min) for c in self.constraints],
            "workload": self.workload.__dict__,
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
    ) -> "SearchSpace":
        """Apply command-line overrides; the result is validated again."""
        server = self.server
        if flags:
            merged = dict(server.flags)
            merged.update(flags)
            server = replace(server, flags=merged)
        if command:
            server = replace(server, command=tuple(command))
        bench = self.bench
        if concurrency:
            bench = replace(bench, concurrency=tuple(concurrency))
        workload = self.workload
        if output_len:
            workload = replace(workload, output_len=output_len)
        space = replace(self, server=server, bench=bench, workload=workload)
        _validate_space(space)
        return space


def _param_dict(p: ParamSpec) -> dict[str, Any]:
    return {k: v for k, v in p.__dict__.items() if v not in (None, (), False)}


# ---------------------------------------------------------------------------- parsing


def load_search_space(path: str | Path) -> SearchSpace:
    """Read and validate a search-space TOML file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(
            f"search-space file {str(p)!r} does not exist; pass an existing file with --space "
            "(see search_spaces/ for examples)"
        )
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML ({exc}); fix the syntax at that position") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a UTF-8 text file; pass a TOML search-space file") from None
    return parse_search_space(data, source=str(p))


def parse_search_space(data: Mapping[str, Any], *, source: str = "<search space>") -> SearchSpace:
    """Validate an already parsed TOML document."""
    _known_keys(data, {"server", "params", "workload", "bench", "objectives", "constraints", "baseline", "study"}, source, "")
    server = _parse_server(data.get("server", {}), source)
    params = tuple(_parse_param(name, spec, source) for name, spec in _table(data, "params", source).items())
    workload = _parse_workload(_table(data, "workload", source), source)
    bench = _parse_bench(_table(data, "bench", source), source)
    objectives = tuple(_parse_objective(o, i, source) for i, o in enumerate(_array(data, "objectives", source)))
    if not objectives:
        objectives = (
            ObjectiveSpec("output_tok_s", 1, "maximize"),
            ObjectiveSpec("agg_output_tok_s", 32, "maximize"),
        )
    constraints = tuple(_parse_constraint(c, i, source) for i, c in enumerate(_array(data, "constraints", source)))
    baseline = data.get("baseline")
    if baseline is not None and not isinstance(baseline, dict):
        raise ConfigError(f"{source}: [baseline] must be a table of server flags, e.g. speculative_num_steps = 3")
    space = SearchSpace(
        source=source,
        params=params,
        server=server,
        workload=workload,
        bench=bench,
        objectives=objectives,
        constraints=constraints,
        baseline=dict(baseline) if baseline else None,
    )
    _validate_space(space)
    return space


def _table(data: Mapping[str, Any], key: str, source: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{key}] must be a table; write it as [{key}] followed by key = value lines")
    return value


def _array(data: Mapping[str, Any], key: str, source: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"{source}: {key} must be an array of tables; write each entry as [[{key}]]")
    return value


def _known_keys(table: Mapping[str, Any], allowed: set[str], source: str, where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        place = f"[{where}] " if where else ""
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r} in {place.strip() or 'the top level'}; "
            f"allowed keys are {', '.join(sorted(allowed))}"
        )


def _parse_server(raw: Any, source: str) -> ServerSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [server] must be a table")
    _known_keys(raw, {"command", "flags", "env", "sglang_version", "ready_timeout_s"}, source, "server")
    command = raw.get("command", ServerSpec.command)
    if isinstance(command, str):
        command = command.split()
    if not isinstance(command, (list, tuple)) or not command or not all(isinstance(c, str) for c in command):
        raise ConfigError(f"{source}: [server] command must be a non-empty list of strings, e.g. [\"python\", \"-m\", \"sglang.launch_server\"]")
    flags = raw.get("flags", {})
    if not isinstance(flags, dict):
        raise ConfigError(f"{source}: [server.flags] must be a table of SGLang flags (snake_case names)")
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ConfigError(f"{source}: [server.env] must map variable names to strings")
    timeout = raw.get("ready_timeout_s", ServerSpec.ready_timeout_s)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"{source}: [server] ready_timeout_s must be a positive number of seconds")
    version = raw.get("sglang_version")
    return ServerSpec(
        command=tuple(command),
        flags={_flag_name(k): v for k, v in flags.items()},
        env=dict(env),
        sglang_version=str(version) if version is not None else None,
        ready_timeout_s=float(timeout),
    )


def _flag_name(name: str) -> str:
    """Accept `--speculative-num-steps`, `speculative-num-steps` or the snake_case name."""
    return name.lstrip("-").replace("-", "_")


def _parse_param(name: str, spec: Any, source: str) -> ParamSpec:
    name = _flag_name(name)
    where = f"params.{name}"
    if not isinstance(spec, dict):
        raise ConfigError(f"{source}: [{where}] must be a table with a type, e.g. type = \"int\", low = 1, high = 8")
    _known_keys(spec, {"type", "low", "high", "step", "log", "choices", "when"}, source, where)
    kind = spec.get("type")
    if kind not in _PARAM_TYPES:
        raise ConfigError(f"{source}: [{where}] type must be one of {', '.join(_PARAM_TYPES)} (got {kind!r})")
    when = _parse_when(spec.get("when"), source, where)
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{source}: [{where}] categorical needs a non-empty choices = [...] list")
        if len(set(map(repr, choices))) != len(choices):
            raise ConfigError(f"{source}: [{where}] choices contain duplicates; list each value once")
        return ParamSpec(name, kind, choices=tuple(choices), when=when)
    low, high, step = spec.get("low"), spec.get("high"), spec.get("step")
    if kind == "draft_tokens":
        if name != DRAFT_TOKENS:
            raise ConfigError(f"{source}: [{where}] type draft_tokens is only for {DRAFT_TOKENS}")
        if high is not None and (not isinstance(high, int) or high < 2):
            raise ConfigError(f"{source}: [{where}] high (the draft-token cap) must be an integer >= 2")
        if step is not None and not (isinstance(step, (int, float)) and 0 < step <= 1):
            raise ConfigError(f"{source}: [{where}] step is the fraction grid of the allowed range; use a number in (0, 1], e.g. 0.25")
        return ParamSpec(name, kind, high=high, step=float(step) if step is not None else 0.25, when=when)
    for key, value in (("low", low), ("high", high)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError(f"{source}: [{where}] needs a numeric {key} = ...")
    if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
        raise ConfigError(f"{source}: [{where}] int parameters need integer low and high (got {low!r}, {high!r})")
    if low > high:
        raise ConfigError(f"{source}: [{where}] is an empty range: low = {low} > high = {high}; swap or widen them")
    if step is not None and (not isinstance(step, (int, float)) or step <= 0):
        raise ConfigError(f"{source}: [{where}] step must be a positive number")
    log = bool(spec.get("log", False))
    if log and (low <= 0 or step is not None):
        raise ConfigError(f"{source}: [{where}] log = true needs low > 0 and no step")
    return ParamSpec(name, kind, low=low, high=high, step=step, log=log, when=when)


def _parse_when(raw: Any, source: str, where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{source}: [{where}] when must be a table such as when = {{ speculative_eagle_topk = [2, 4] }}")
    out = []
    for key, allowed in raw.items():
        values = tuple(allowed) if isinstance(allowed, list) else (allowed,)
        out.append((_flag_name(key), values))
    return tuple(out)


def _parse_workload(raw: Mapping[str, Any], source: str) -> WorkloadSpec:
    fields = set(WorkloadSpec.__dataclass_fields__)
    _known_keys(raw, fields, source, "workload")
    w = WorkloadSpec(**raw)
    if w.kind not in _WORKLOAD_KINDS:
        raise ConfigError(f"{source}: [workload] kind must be one of {', '.join(_WORKLOAD_KINDS)} (got {w.kind!r})")
    if w.api not in _APIS:
        raise ConfigError(f"{source}: [workload] api must be one of {', '.join(_APIS)} (got {w.api!r})")
    for key in ("input_len", "output_len"):
        value = getattr(w, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{source}: [workload] {key} must be a positive integer (got {value!r})")
    if not isinstance(w.temperature, (int, float)) or w.temperature < 0:
        raise ConfigError(f"{source}: [workload] temperature must be >= 0 (got {w.temperature!r})")
    if w.kind == "file" and not w.path:
        raise ConfigError(f"{source}: [workload] kind = \"file\" needs path = \"prompts.jsonl\"")
    if w.kind == "builtin" and w.name not in ("chat", "code", "summarize"):
        raise ConfigError(f"{source}: [workload] kind = \"builtin\" needs name = \"chat\", \"code\" or \"summarize\"")
    return w


def _parse_bench(raw: Mapping[str, Any], source: str) -> BenchSpec:
    _known_keys(raw, set(BenchSpec.__dataclass_fields__), source, "bench")
    values = dict(raw)
    if "concurrency" in values:
        values["concurrency"] = tuple(values["concurrency"]) if isinstance(values["concurrency"], list) else values["concurrency"]
    b = BenchSpec(**values)
    if not isinstance(b.concurrency, tuple) or not b.concurrency or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in b.concurrency
    ):
        raise ConfigError(f"{source}: [bench] concurrency must be a list of positive integers, e.g. [1, 32]")
    if len(set(b.concurrency)) != len(b.concurrency):
        raise ConfigError(f"{source}: [bench] concurrency lists a level twice; list each level once")
    for key in ("requests_multiplier", "min_requests"):
        if not isinstance(getattr(b, key), int) or getattr(b, key) < 1:
            raise ConfigError(f"{source}: [bench] {key} must be a positive integer")
    if not isinstance(b.warmup_requests, int) or b.warmup_requests < 0:
        raise ConfigError(f"{source}: [bench] warmup_requests must be an integer >= 0")
    if not (0 <= b.max_error_rate < 1):
        raise ConfigError(f"{source}: [bench] max_error_rate must be in [0, 1)")
    return b


def _parse_objective(raw: Mapping[str, Any], index: int, source: str) -> ObjectiveSpec:
    _known_keys(raw, {"metric", "concurrency", "direction"}, source, f"objectives #{index + 1}")
    metric, conc = raw.get("metric"), raw.get("concurrency")
    direction = raw.get("direction", _default_direction(metric))
    if not isinstance(metric, str):
        raise ConfigError(f"{source}: objectives #{index + 1} needs metric = \"...\" (e.g. output_tok_s)")
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        raise ConfigError(f"{source}: objectives #{index + 1} needs concurrency = a positive integer")
    if direction not in _DIRECTIONS:
        raise ConfigError(f"{source}: objectives #{index + 1} direction must be maximize or minimize")
    return ObjectiveSpec(metric, conc, direction)


def _default_direction(metric: Any) -> str:
    """The metric's natural direction (latencies and errors down, speeds up)."""
    from autospec.metrics import METRIC_DIRECTIONS

    return METRIC_DIRECTIONS.get(metric, "maximize") if isinstance(metric, str) else "maximize"


def _parse_constraint(raw: Mapping[str, Any], index: int, source: str) -> ConstraintSpec:
    _known_keys(raw, {"metric", "concurrency", "max", "min"}, source, f"constraints #{index + 1}")
    metric, conc = raw.get("metric"), raw.get("concurrency")
    if not isinstance(metric, str):
        raise ConfigError(f"{source}: constraints #{index + 1} needs metric = \"...\" (e.g. ttft_ms_p99)")
    if not isinstance(conc, int) or isinstance(conc, bool) or conc < 1:
        raise ConfigError(f"{source}: constraints #{index + 1} needs concurrency = a positive integer")
    lo, hi = raw.get("min"), raw.get("max")
    if lo is None and hi is None:
        raise ConfigError(f"{source}: constraints #{index + 1} needs max = ... and/or min = ...")
    for v in (lo, hi):
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)):
            raise ConfigError(f"{source}: constraints #{index + 1} bounds must be numbers")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{source}: constraints #{index + 1} is empty: min = {lo} > max = {hi}")
    return ConstraintSpec(metric, conc, max=hi, min=lo)


# ------------------------------------------------------------------- cross-field checks

# Bounds SGLang itself needs (checked against sglang 0.5.23 server_args): steps >= 1,
# topk >= 1, draft tokens >= 2 under EAGLE, 0 < mem_fraction_static < 1.
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


def _check_bound(name: str, low: float, high: float, source: str, what: str) -> None:
    bounds = _FLAG_BOUNDS.get(name)
    if bounds is None:
        return
    lo, hi, inclusive = bounds
    ok = (lo <= low and high <= hi) if inclusive else (lo < low and high < hi)
    if not ok:
        rng = f"[{lo:g}, {hi:g}]" if inclusive else f"({lo:g}, {hi:g})"
        raise ConfigError(f"{source}: {what} {name} must stay within {rng} (SGLang rejects other values); got {low:g}..{high:g}")


def _validate_space(space: SearchSpace) -> None:
    src = space.source
    names = [p.name for p in space.params]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ConfigError(f"{src}: parameter {sorted(dupes)[0]} is declared twice; keep one [params.*] table")
    for name in names:
        if name in space.server.flags:
            raise ConfigError(
                f"{src}: {name} is both tunable ([params.{name}]) and fixed ([server.flags]); remove one of them"
            )
    for p in space.params:
        for key, _ in p.when:
            if key not in names and key not in space.server.flags:
                raise ConfigError(f"{src}: [params.{p.name}] when refers to {key}, which is neither a parameter nor a fixed flag")
        if p.type in ("int", "float"):
            _check_bound(p.name, p.low, p.high, src, f"[params.{p.name}]")
        elif p.type == "categorical" and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in p.choices):
            _check_bound(p.name, min(p.choices), max(p.choices), src, f"[params.{p.name}]")
        elif p.type == "draft_tokens":
            for needed in (STEPS, TOPK):
                if needed not in names and needed not in space.server.flags:
                    raise ConfigError(
                        f"{src}: [params.{DRAFT_TOKENS}] needs {needed} as a parameter or a fixed flag, "
                        "because its range depends on it"
                    )
    for name, value in space.server.flags.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _check_bound(name, value, value, src, "[server.flags]")
    levels = set(space.bench.concurrency)
    for spec in (*space.objectives, *space.constraints):
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
    from autospec.metrics import METRICS  # pure module; imported lazily to keep config light

    if metric not in METRICS:
        known = ", ".join(sorted(METRICS))
        raise ConfigError(f"{source}: unknown metric {metric!r}; choose one of: {known}")


def parse_duration(text: str) -> float:
    """'90s', '30m', '8h', '1h30m' or plain seconds -> seconds."""
    s = text.strip().lower()
    if not s:
        raise ConfigError("empty duration; write e.g. 8h, 30m or 90s")
    try:
        return float(s)
    except ValueError:
        pass
    total, number = 0.0, ""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for ch in s:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            raise ConfigError(f"bad duration {text!r}; write e.g. 8h, 30m, 90s or 1h30m")
    if number:
        raise ConfigError(f"bad duration {text!r}: {number} has no unit; add s, m or h")
    return total
