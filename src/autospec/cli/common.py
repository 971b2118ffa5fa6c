"""Arguments and conversions shared by several subcommands."""

from __future__ import annotations

import argparse
import ast
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.config import SearchSpace, load_search_space
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna

    from autospec.study.storage import StorageHandle

__all__ = [
    "add_study_command",
    "load_space",
    "space_file",
    "parse_flag_overrides",
    "flag_override_origins",
    "parse_concurrency",
    "study_name_for",
    "bundled_spaces",
    "open_existing_study",
    "studies_dir_arg",
]


def bundled_spaces() -> dict[str, Path]:
    """Search spaces shipped with autospec, by name (file stem)."""
    folder = resources.files("autospec") / "search_spaces"
    return {Path(str(f)).stem: Path(str(f)) for f in folder.iterdir() if str(f).endswith(".toml")}


def space_file(spec: str | None) -> Path:
    """The file of ``--space``: a path to a TOML file, or the name of a bundled space
    (default: "default"); a one-line UsageError for neither."""
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
    return path


def load_space(spec: str | None) -> SearchSpace:
    """The search space of ``--space`` (`space_file`)."""
    return load_search_space(space_file(spec))


def add_study_command(
    sub: argparse._SubParsersAction, name: str, *, help: str, description: str, name_from_space: bool = False, space: bool = False
) -> argparse.ArgumentParser:
    """A subcommand that works on one study: ``--study``, ``--storage``, ``--studies-dir``
    (and ``--space``). ``--study`` is required, unless `name_from_space` (optimize: the
    space file's name)."""
    p = sub.add_parser(name, help=help, description=description)
    if name_from_space:
        p.add_argument("--study", help="study name (default: the search-space file's name, with -sim added for --sim)")
    else:
        p.add_argument("--study", required=True, help="name of the study")
    p.add_argument(
        "--storage",
        help="Optuna storage: sqlite:///F.db, postgresql://USER@HOST/DB, or a journal file F.log "
        "(default: <studies-dir>/<study>.db)",
    )
    p.add_argument(
        "--studies-dir",
        default="studies",
        type=studies_dir_arg,
        help="folder for default storage, logs and artifacts (default studies)",
    )
    if space:
        p.add_argument("--space", help="search-space TOML file, or a bundled name: " + ", ".join(sorted(bundled_spaces())))
    return p


def studies_dir_arg(text: str) -> str:
    """argparse type of ``--studies-dir``: a folder, or a path where one can be created.
    A file there (or on the way there) is a one-line error when the arguments are parsed,
    before anything is opened or created."""
    path = Path(text)
    for place in (path, *path.parents):
        if place.is_dir():
            break
        if place.exists() or place.is_symlink():
            what = "is a file" if place.is_file() else "is not a folder"
            where = f"{place}" if place == path else f"{place} (on the way to {path})"
            raise argparse.ArgumentTypeError(
                f"{where} {what}, not a folder of studies; pass a folder (created if missing), e.g. --studies-dir studies"
            )
    return text


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


def add_flag_option(group: argparse._ActionsContainer, help: str) -> None:
    """The repeatable ``--flag NAME=VALUE`` option (read with `parse_flag_overrides`)."""
    group.add_argument("--flag", action="append", default=[], metavar="NAME=VALUE", help=help)


def _override_name(key: str) -> str:
    return key.strip().lstrip("-").replace("-", "_")


def parse_flag_overrides(items: list[str]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--flag {item!r} needs NAME=VALUE, e.g. --flag attention_backend=fa3")
        key, value = item.split("=", 1)
        flags[_override_name(key)] = _value(value.strip())
    return flags


def flag_override_origins(items: list[str]) -> dict[str, str]:
    """How each ``--flag NAME=VALUE`` was written, by flag name (the last one wins, as in
    `parse_flag_overrides`): errors about a flag name the option, not the space file."""
    return {_override_name(item.split("=", 1)[0]): f"--flag {item}" for item in items if "=" in item}


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``--concurrency 1,4,32`` -> ``(1, 4, 32)``: positive integers, each listed once, in
    the given order. Anything else is a one-line UsageError."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    bad = next((part for part in parts if not _is_integer(part)), None)
    if bad is not None:
        raise UsageError(
            f"--concurrency {text!r} is not a list of integers ({bad!r} is not one), so it is not a "
            "comma-separated list of levels; write e.g. 1,4,32"
        )
    levels = tuple(int(part) for part in parts)
    if not levels or any(level < 1 for level in levels):
        raise UsageError(f"--concurrency {text!r} needs positive levels; e.g. 1,4,32")
    if len(set(levels)) != len(levels):
        raise UsageError(f"--concurrency {text!r} lists a level twice; list each once")
    return levels


def _is_integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def open_existing_study(
    name: str, storage: str | None, studies_dir: Path, *, name_flag: str = "--study", storage_flag: str = "--storage"
) -> tuple[StorageHandle, optuna.Study]:
    """(StorageHandle, Study) of a study that must already exist; creates nothing."""
    import optuna

    from autospec.study.files import StudyLayout
    from autospec.study.storage import open_storage, study_exists

    if storage is None:
        path = StudyLayout.default_storage_file(studies_dir, name)
        if not path.exists():
            folder = path.parent.absolute()
            raise UsageError(
                f"no study {name!r} in {folder} ({path.name} does not exist there); check {name_flag}, or point "
                f"--studies-dir at the folder that holds {path.name}, or pass {storage_flag} with the study's storage"
            )
    handle = open_storage(storage, name, studies_dir)
    if not study_exists(handle, name):
        raise UsageError(f"no study named {name!r} in {handle.description}; check {name_flag} and {storage_flag}")
    return handle, optuna.load_study(study_name=name, storage=handle.storage)
