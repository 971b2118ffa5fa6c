"""Arguments and conversions shared by several subcommands."""

from __future__ import annotations

import argparse
import ast
import difflib
import sys
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.config import SearchSpace, load_search_space
from autospec.errors import AutospecError, UsageError

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
    "did_you_mean",
    "existing_study_names",
    "resolve_study_name",
    "add_sim_timing_arguments",
    "renamed_option",
    "duration_arg",
    "SIM_LOAD_SECONDS",
    "SIM_WARMUP_SECONDS",
    "SIM_TIME_SCALE",
]

#: The simulator's timing when autospec starts it (optimize, bench, capacity): a real 122B
#: model takes ~100 s to load; the simulator need not make you wait.
SIM_LOAD_SECONDS = 2.0
SIM_WARMUP_SECONDS = 1.0
SIM_TIME_SCALE = 1.0


def did_you_mean(word: str, names: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest of `names` to `word` (difflib), else ''."""
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


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
                f"no search-space file {spec!r} and no bundled space of that name{did_you_mean(spec, bundled)}; "
                f"pass a .toml path or one of: {', '.join(sorted(bundled))}"
            )
        path = bundled[spec]
    return path


def load_space(spec: str | None) -> SearchSpace:
    """The search space of ``--space`` (`space_file`)."""
    return load_search_space(space_file(spec))


def add_study_command(
    sub: argparse._SubParsersAction,
    name: str,
    *,
    help: str,
    description: str,
    name_from_space: bool = False,
    space: bool = False,
    existing: bool = True,
) -> argparse.ArgumentParser:
    """A subcommand that works on one study: ``--study``, ``--storage``, ``--studies-dir``
    (and ``--space``), in an argument group "study". ``--study`` defaults to the space
    file's name with `name_from_space` (optimize), else, for an `existing` study, to the
    only study in ``--studies-dir`` (`resolve_study_name`); otherwise it is required."""
    p = sub.add_parser(name, help=help, description=description)
    group = p.add_argument_group("study")
    if name_from_space:
        group.add_argument(
            "--study", metavar="NAME", help="study name (default: the search-space file's name, with -sim added for --sim)"
        )
    elif existing:
        group.add_argument("--study", metavar="NAME", help="name of the study (default: the only study in --studies-dir)")
        p.set_defaults(study_from_folder=True)
    else:
        group.add_argument("--study", metavar="NAME", required=True, help="name of the study")
    group.add_argument(
        "--storage",
        metavar="URL|FILE",
        help="Optuna storage: sqlite:///F.db, postgresql://USER@HOST/DB, or a journal file F.log "
        "(default: <studies-dir>/<study>.db)",
    )
    group.add_argument(
        "--studies-dir",
        default="studies",
        type=studies_dir_arg,
        metavar="DIR",
        help="folder for default storage, logs and artifacts (default studies)",
    )
    if space:
        bundled = ", ".join(sorted(bundled_spaces()))
        group.add_argument("--space", metavar="FILE|NAME", help=f"search-space TOML file, or a bundled name: {bundled}")
    return p


def add_sim_timing_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The simulator's timing knobs, hidden from ``--help`` (tests and benchmarks use them):
    ``--sim-load-seconds``, ``--sim-warmup-seconds``, ``--sim-time-scale``; the one place
    that defines them and their defaults."""
    p.add_argument("--sim-load-seconds", type=float, default=SIM_LOAD_SECONDS, help=argparse.SUPPRESS)
    p.add_argument("--sim-warmup-seconds", type=float, default=SIM_WARMUP_SECONDS, help=argparse.SUPPRESS)
    p.add_argument("--sim-time-scale", type=float, default=SIM_TIME_SCALE, help=argparse.SUPPRESS)


def renamed_option(p: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str, **kwargs: Any) -> None:
    """``old``, hidden from ``--help``, as a deprecated spelling of ``new`` (same value,
    same destination); using it prints one note on stderr. Kept for one release."""

    class _Renamed(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, _: Any = None) -> None:
            print(f"autospec: note: {old} is now {new}; {old} goes away in the next release", file=sys.stderr)
            setattr(namespace, self.dest, values)

    p.add_argument(old, dest=new.lstrip("-").replace("-", "_"), action=_Renamed, help=argparse.SUPPRESS, **kwargs)


def duration_arg(option: str) -> Any:
    """argparse type of a wall-time option (``--timeout``): a finite duration > 0, e.g. 8h,
    90m, 1h30m or plain seconds; anything else is argparse's one-line error, exit 2."""
    import math

    from autospec.config import parse_duration
    from autospec.errors import ConfigError

    def parse(text: str) -> float:
        fix = f"write e.g. {option} 8h, 90m, 1h30m or 600 (seconds), or leave {option} out for no limit"
        try:
            seconds = parse_duration(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(f"{str(exc).split(';')[0]}; {fix}") from None
        if not math.isfinite(seconds) or seconds <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite wall time > 0; {fix}")
        return seconds

    return parse


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


def add_timeout_option(group: argparse._ActionsContainer, help: str) -> None:
    """The ``--timeout DURATION`` option: a finite wall time > 0 (`duration_arg`)."""
    group.add_argument("--timeout", type=duration_arg("--timeout"), metavar="DURATION", help=help)


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


def refuse_missing_storage_file(storage: str | None, name: str, studies_dir: Path, flag: str = "--storage") -> None:
    """A one-line UsageError when `storage` names a local file (SQLite or journal) that does
    not exist: opening it would create an empty database or journal file there."""
    from autospec.study.storage import missing_storage_file

    file = missing_storage_file(storage, name, studies_dir) if storage is not None else None
    if file is not None:
        raise UsageError(f"no study storage at {file} (the file does not exist); check {flag}")


def open_existing_study(
    name: str, storage: str | None, studies_dir: Path, *, name_flag: str = "--study", storage_flag: str = "--storage"
) -> tuple[StorageHandle, optuna.Study]:
    """(StorageHandle, Study) of a study that must already exist; creates nothing."""
    import optuna

    from autospec.study.files import StudyLayout
    from autospec.study.storage import open_storage, study_exists

    refuse_missing_storage_file(storage, name, studies_dir, storage_flag)
    if storage is None:
        path = StudyLayout.default_storage_file(studies_dir, name)
        if not path.exists():
            folder = path.parent.absolute()
            raise UsageError(
                f"no study {name!r} in {folder} ({path.name} does not exist there){_others(name, None, studies_dir)}; "
                f"check {name_flag}, or point --studies-dir at the folder that holds {path.name}, or pass {storage_flag} "
                "with the study's storage"
            )
    handle = open_storage(storage, name, studies_dir)
    if not study_exists(handle, name):
        raise UsageError(
            f"no study named {name!r} in {handle.description}{_others(name, storage, studies_dir)}; "
            f"check {name_flag} and {storage_flag}"
        )
    return handle, optuna.load_study(study_name=name, storage=handle.storage)


def existing_study_names(storage: str | None, studies_dir: Path) -> list[str]:
    """The studies that exist, sorted: in `storage` when given, else the default storage
    files in `studies_dir` (``NAME.db``, not opened). Creates nothing."""
    if storage is None:
        return sorted(p.stem for p in studies_dir.glob("*.db") if p.is_file()) if studies_dir.is_dir() else []
    import optuna

    from autospec.study.storage import missing_storage_file, open_storage

    if missing_storage_file(storage, "listing", studies_dir) is not None:
        return []
    handle = open_storage(storage, "listing", studies_dir)
    return sorted(optuna.get_all_study_names(handle.storage))


def _others(name: str, storage: str | None, studies_dir: Path) -> str:
    """', did you mean X? studies there: A, B' (at most 12 named), or '' when there are none."""
    try:
        names = existing_study_names(storage, studies_dir)
    except AutospecError:
        return ""
    if not names:
        return "; there is no study there"
    shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
    return f"{did_you_mean(name, names)}; studies there: {shown}"


def resolve_study_name(args: argparse.Namespace) -> None:
    """``--study`` left out of a command on an existing study: the only study in
    ``--storage`` or ``--studies-dir``; none or several is a one-line UsageError."""
    if not getattr(args, "study_from_folder", False) or args.study is not None:
        return
    studies_dir = Path(args.studies_dir)
    names = existing_study_names(args.storage, studies_dir)
    where = args.storage or str(studies_dir.absolute())
    if len(names) == 1:
        args.study = names[0]
        return
    if not names:
        raise UsageError(
            f"no study in {where}; run autospec optimize first, or point --studies-dir (or --storage) at the "
            "folder that holds one"
        )
    raise UsageError(f"{where} holds {len(names)} studies ({', '.join(names)}); pick one with --study NAME")
