"""Arguments and conversions shared by several subcommands."""

from __future__ import annotations

import argparse
import ast
from importlib import resources
from pathlib import Path
from typing import Any

from autospec.config import SearchSpace, load_search_space
from autospec.errors import UsageError

__all__ = ["add_study_args", "load_space", "parse_flag_overrides", "study_name_for", "bundled_spaces", "open_existing_study"]


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


def open_existing_study(name: str, storage: str | None, studies_dir: Path, *,
                        name_flag: str = "--study", storage_flag: str = "--storage"):
    """(StorageHandle, Study) of a study that must already exist; creates nothing."""
    import optuna

    from autospec.study.storage import open_storage, study_exists

    if storage is None:
        path = studies_dir / f"{name}.db"
        if not path.exists():
            raise UsageError(f"no study {name!r}: {path} does not exist; check {name_flag}, --studies-dir or pass {storage_flag}")
    handle = open_storage(storage, name, studies_dir)
    if not study_exists(handle, name):
        raise UsageError(f"no study named {name!r} in {handle.description}; check {name_flag} and {storage_flag}")
    return handle, optuna.load_study(study_name=name, storage=handle.storage)
