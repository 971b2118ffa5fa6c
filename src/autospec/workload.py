"""What each benchmark request asks for: the one `Workload` type.

A search space's `[workload]` table and `autospec bench`'s flags both become a
`Workload`; it is validated when it is built, so a bad value (say `top_p = 0`) fails
before any server starts. Invalid values raise `ConfigError` with one line naming the
field, the problem and the fix.

Pure: nothing here reads files. Turning a workload into prompts (which reads prompt
files and the built-in sets) is `autospec.bench.workloads.prompts(workload, n)`.

Kinds:

    synthetic  one fixed prompt ("1 2 ... input_len"), like the seed's hand-tuning
    random     random English words, about `input_len` of them per prompt
    file       the prompts of `path` (JSONL or ShareGPT JSON)
    builtin    one of the prompt sets shipped with autospec (`name`: chat, code,
               summarize; summarise and summary are accepted for summarize)
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass

from autospec.errors import ConfigError
from autospec.validation import KnownKeys, Number, first_problem, invalid, one_of

__all__ = ["APIS", "BUILTIN_ALIASES", "BUILTIN_SETS", "KINDS", "Workload"]

KINDS = ("synthetic", "random", "file", "builtin")
APIS = ("generate", "completions", "chat")
BUILTIN_SETS = ("chat", "code", "summarize")
BUILTIN_ALIASES = {"summarise": "summarize", "summary": "summarize"}


def _temperature(value: float) -> float:
    if value < 0:
        raise invalid(f"must be >= 0, got {value}; use 0 for greedy decoding")
    return value


def _top_p(value: float) -> float:
    if not 0 < value <= 1:
        raise invalid(f"must be in (0, 1], got {value}; use 1.0 to disable nucleus sampling")
    return value


def _top_k(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise invalid(f"must be a positive integer, got {value}; leave top_k out to sample from every token")
    return value


_Length = Annotated[int, Strict(), Field(ge=1)]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Workload(KnownKeys):
    """What each request asks for; immutable and valid once built (else ConfigError).

    Fields keep the types they were given (`temperature = 0` stays an int), so the
    search space's fingerprint of a `[workload]` table does not depend on the loader.
    """

    kind: Annotated[str, one_of(KINDS)] = "synthetic"
    input_len: _Length = 32
    output_len: _Length = 256
    temperature: Annotated[Number, AfterValidator(_temperature)] = 0.0
    top_p: Annotated[Number, AfterValidator(_top_p)] = 1.0
    ignore_eos: StrictBool = True
    api: Annotated[str, one_of(APIS)] = "generate"
    path: StrictStr | None = None
    name: StrictStr | None = None
    seed: StrictInt = 0
    #: sample among the k most likely tokens only; None sends nothing (the server's default, every token)
    top_k: Annotated[StrictInt | None, AfterValidator(_top_k)] = None
    #: send each measured request a sampling seed fixed by its position (`bench.protocol.sampling_seed`);
    #: native API only, and only with SGLang's pytorch sampling backend (flashinfer refuses the field)
    sampling_seed: StrictBool = False

    @field_validator("name")
    @classmethod
    def _canonical_set_name(cls, name: str | None, info: ValidationInfo) -> str | None:
        """summarise / summary -> summarize, for built-in sets."""
        if info.data.get("kind") == "builtin" and name is not None:
            return BUILTIN_ALIASES.get(name, name)
        return name

    @model_validator(mode="wrap")
    @classmethod
    def _one_line_errors(cls, values: Any, handler: ModelWrapValidatorHandler[Workload]) -> Workload:
        """Every problem leaves as a one-line ConfigError, pydantic's own errors included."""
        try:
            workload = handler(values)
        except ValidationError as exc:
            problem = first_problem(exc, positional=[f.name for f in dataclasses.fields(cls)])
            raise ConfigError(f"{problem.key} {problem.text}" if problem.key else problem.text) from None
        _check_source(workload)
        return workload

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON reports)."""
        return dataclasses.asdict(self)

    def sampling_params(self) -> dict[str, Any]:
        """The sampling settings every request carries: temperature, top_p, ignore_eos,
        and top_k when it is set (left out otherwise, so the server's default applies)."""
        params: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p}
        if self.top_k is not None:
            params["top_k"] = self.top_k
        params["ignore_eos"] = self.ignore_eos
        return params


def _check_source(workload: Workload) -> None:
    """File workloads need a path, built-in ones a known set name."""
    if workload.kind == "file" and not workload.path:
        raise ConfigError('kind "file" needs path = "prompts.jsonl" (JSONL or ShareGPT JSON); add the path')
    if workload.sampling_seed and workload.api != "generate":
        raise ConfigError(
            f'sampling_seed is sent on the native API only (api = "{workload.api}"); set api = "generate" or drop it'
        )
    if workload.kind == "builtin" and workload.name not in BUILTIN_SETS:
        raise ConfigError(
            f'kind "builtin" needs name = one of {", ".join(BUILTIN_SETS)} (got {workload.name!r}); pick one of them'
        )
