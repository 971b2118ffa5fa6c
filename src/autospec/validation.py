"""Pydantic's validation errors -> autospec's one-line messages.

The tables of user files (`config`, `workload`) are pydantic dataclasses that inherit
`KnownKeys`, so a key that is not a field fails with the allowed keys listed. Their
validators raise `invalid(text)` (about one key's value) or `invalid_table(text)`
(about a table as a whole), with `text` = "problem; fix". `first_problem(exc)` turns
the first error of a `ValidationError` into a `Problem`: the table path, the key, and a
one-line "problem; fix", whatever pydantic's own wording was.

Pure: no I/O, and nothing from the rest of autospec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, NamedTuple

from pydantic import PlainValidator, ValidationError, model_validator
from pydantic_core import ArgsKwargs, ErrorDetails, PydanticCustomError

__all__ = [
    "KnownKeys",
    "Number",
    "Problem",
    "first_problem",
    "invalid",
    "invalid_table",
    "one_of",
    "short",
]

#: error types whose location is a table, not a key in it
_TABLE_ERRORS = frozenset(
    {
        "unknown_key",
        "table",
        "union_tag_invalid",
        "union_tag_not_found",
        "model_type",
        "model_attributes_type",
        "dataclass_type",
        "dataclass_args_type",
    }
)


class Problem(NamedTuple):
    """Where a value is wrong (`table` path, `key` in it or None for the table) and
    `text`, one line: "problem; fix"."""

    table: tuple[str | int, ...]
    key: str | None
    text: str


def invalid(text: str) -> PydanticCustomError:
    """A validator's error about one key's value; `text` is "problem; fix"."""
    return PydanticCustomError("value", text)


def invalid_table(text: str) -> PydanticCustomError:
    """A validator's error about a whole table (a combination of its keys)."""
    return PydanticCustomError("table", text)


def short(value: Any, limit: int = 60) -> str:
    """`repr(value)` on one line, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class KnownKeys:
    """Mixin for pydantic dataclasses: a key that is not a field fails (as `invalid_table`)
    with the allowed keys listed. `IMPLICIT_KEYS` are fields filled in by the loader,
    not written by users, so they are not listed."""

    IMPLICIT_KEYS: ClassVar[frozenset[str]] = frozenset()
    __pydantic_fields__: ClassVar[dict[str, Any]]  # set by pydantic on each dataclass

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        given = (data.kwargs or {}) if isinstance(data, ArgsKwargs) else data
        if isinstance(given, Mapping):
            fields = set(cls.__pydantic_fields__)
            unknown = sorted(str(key) for key in set(given) - fields)
            if unknown:
                allowed = ", ".join(sorted(fields - cls.IMPLICIT_KEYS))
                raise invalid_table(f"unknown key {unknown[0]!r}; allowed keys are {allowed}")
        return data


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise invalid(f"must be a number, got {short(value)}; write a plain number such as 0.5")
    return value


#: an int or a float (not a bool, not a string), kept as given: `1` stays `1`
Number = Annotated[float, PlainValidator(_number)]


def one_of(allowed: Sequence[str]) -> PlainValidator:
    """A validator for a string that must be one of `allowed`."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise invalid(f"must be one of {', '.join(allowed)} (got {short(value)}); use one of them")
        return value

    return PlainValidator(check)


def first_problem(exc: ValidationError, positional: Sequence[str] = ()) -> Problem:
    """The first error of `exc`, located and worded on one line. `positional` names a
    dataclass's fields in order, so an error in a positional argument names its field."""
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    if loc and isinstance(loc[0], int) and loc[0] < len(positional):
        loc = (positional[loc[0]], *loc[1:])
    if error["type"] in _TABLE_ERRORS:
        return Problem(loc, None, _describe(error))
    last = max((i for i, part in enumerate(loc) if isinstance(part, str)), default=-1)
    if last < 0:
        return Problem(loc, None, _describe(error))
    key = str(loc[last]) + "".join(f"[{part}]" for part in loc[last + 1 :])
    return Problem(loc[:last], key, _describe(error))


def _describe(error: ErrorDetails) -> str:
    """ "problem; fix" for one pydantic error."""
    kind, ctx, got = error["type"], error.get("ctx") or {}, short(error.get("input"))
    if kind in ("value", "table", "unknown_key"):
        return error["msg"]
    if kind in ("missing", "missing_argument", "missing_keyword_only_argument"):
        return "is missing; add it"
    if kind in ("extra_forbidden", "unexpected_keyword_argument", "unexpected_positional_argument"):
        return "is not a known key; remove it or fix its spelling"
    if kind == "union_tag_invalid":
        tags = str(ctx.get("expected_tags", "")).replace("'", "")
        name = str(ctx.get("discriminator", "type")).strip("'")
        return f"{name} must be one of {tags} (got {ctx.get('tag')!r}); use one of them"
    if kind == "union_tag_not_found":
        name = str(ctx.get("discriminator", "type")).strip("'")
        return f"needs {name} = ...; add it"
    template = _GENERIC.get(kind, "is invalid ({msg}, got {got}); fix the value")
    return template.format_map(_Fill(ctx, msg=error["msg"], got=got))


class _Fill(dict[str, Any]):
    """Template values; a placeholder pydantic did not provide reads as '?'."""

    def __missing__(self, key: str) -> str:
        return "?"


_GENERIC = {
    "int_type": "must be an integer, got {got}; write a whole number",
    "int_parsing": "must be an integer, got {got}; write a whole number",
    "int_from_float": "must be an integer, got {got}; write a whole number",
    "float_type": "must be a number, got {got}; write a plain number",
    "float_parsing": "must be a number, got {got}; write a plain number",
    "bool_type": "must be true or false, got {got}; write true or false",
    "bool_parsing": "must be true or false, got {got}; write true or false",
    "string_type": "must be a string, got {got}; quote the value",
    "literal_error": "must be one of {expected}, got {got}; use one of them",
    "greater_than_equal": "must be >= {ge}, got {got}; use a value of at least {ge}",
    "greater_than": "must be > {gt}, got {got}; use a value above {gt}",
    "less_than_equal": "must be <= {le}, got {got}; use a value of at most {le}",
    "less_than": "must be < {lt}, got {got}; use a value below {lt}",
    "dict_type": "must be a table, got {got}; write key = value pairs",
    "list_type": "must be a list, got {got}; write [a, b, ...]",
    "tuple_type": "must be a list, got {got}; write [a, b, ...]",
    "too_short": "must not be empty; list at least {min_length} value(s)",
    "model_type": "must be a table, got {got}; write key = value pairs under it",
    "model_attributes_type": "must be a table, got {got}; write key = value pairs under it",
    "dataclass_type": "must be a table, got {got}; write key = value pairs under it",
    "dataclass_args_type": "must be a table, got {got}; write key = value pairs under it",
}
