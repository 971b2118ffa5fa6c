"""Arguments and conversions shared by several subcommands."""

from __future__ import annotations

import argparse
import ast
from importlib import resources
from pathlib import Path
from typing import Any

from autospec.config import SearchSpace, load_search_space
from autospec.errors import UsageError

__all__ = ["add_study_args", "load_space", "parse_flag_overrides", "study_name_for", "bundled_spaces"]


def bundled_spaces() -> dict[str, Path]:
    """Search spaces shipped with autospec, by name (file stem)."""
    folder = resources.files("autospec") / "search_spaces"
    return {Path(str(f)).stem: Path(str(f)) for f in folder.iterdir() if str(f).endswith(".toml")}


def load_space(spec: str | None) -> SearchSpace:
    """A path to a TOML file, or the name of a bundled space (default: "default")."""
    spec = spec or "default"
    path = Path(spec)
    if not path.exists() and not spec.endswith(".toml"):
        bundled = bundled_spaces()
        if spec not in bundled:
            raise UsageError(
                f"no search-space file {spec!r} and no bundled space of that name; "
                f"pass a .toml path or one of: {', '.join(sorted(bundled))}"
            )
        path = bundled[spec]
    return load_search_space(path)


def add_study_args(p: argparse.ArgumentParser, *, space: bool = True) -> None:
    p.add_argument("--study", help="study name (default: the search-space name, with -sim for --sim)")
    p.add_argument("--storage", help="Optuna storage: sqlite:///F.db, postgresql://USER@HOST/DB, or a journal file F.log "
                                     "(default: studies/<study>.db)")
    p.add_argument("--studies-dir", default="studies", help="folder for default storage, logs and artifacts (default studies)")
    if space:
        p.add_argument("--space", help="search-space TOML file, or a bundled name: default, mtp, eagle3, ngram")


def study_name_for(args: argparse.Namespace, space: SearchSpace) -> str:
    if args.study:
        return args.study
    stem = Path(space.source).stem
    return f"{stem}-sim" if getattr(args, "sim", False) else stem


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_flag_overrides(items: list[str]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--flag {item!r} needs NAME=VALUE, e.g. --flag attention_backend=fa3")
        key, value = item.split("=", 1)
        flags[key.strip().lstrip("-").replace("-", "_")] = _value(value.strip())
    return flags
