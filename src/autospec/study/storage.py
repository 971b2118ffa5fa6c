"""Where studies live: storage URLs, study creation/opening and clash checks.

Accepted storage specs (checked against Optuna 5.0.0):

- ``None``: SQLite file ``<studies_dir>/<study>.db`` (one worker).
- ``sqlite:///path.db``, ``postgresql://user@host/db`` (any SQLAlchemy URL): ``RDBStorage``
  with heartbeats, so a trial whose worker died is failed before the next ``ask``.
- a path ending in ``.log``, ``.journal`` or ``.jsonl``: ``JournalStorage`` on a
  ``JournalFileBackend`` (several workers on one host). Journal storage has no heartbeat;
  `autospec.study.processes.recovery` fails stale trials itself.

A study remembers the search-space fingerprint, objectives and metric names it was
created with; opening it with a different space is a `StorageError` that changes nothing.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend

from autospec.config import SearchSpace
from autospec.errors import StorageError
from autospec.records.stored import FINGERPRINT_KEY
from autospec.study.files import StudyLayout

__all__ = ["StorageHandle", "open_storage", "open_study", "FINGERPRINT_KEY", "study_exists", "missing_storage_file"]

SPACE_SOURCE_KEY = "autospec:space_source"
HEARTBEAT_INTERVAL_S = 20
GRACE_PERIOD_S = 60
_JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")


@dataclass
class StorageHandle:
    """An opened storage plus what the tool needs to know about it."""

    storage: optuna.storages.BaseStorage
    description: str  # for messages: a path or a URL with the password removed
    heartbeat: bool
    local_path: Path | None  # the file holding the study, when it is a file

    @property
    def locator(self) -> str:
        """The --storage value that names this storage from any directory (`storage_locator`)."""
        if self.local_path is None:
            return self.description
        if self.description.startswith("sqlite"):
            return f"sqlite:///{self.local_path.resolve()}"
        return str(self.local_path.resolve())


def storage_locator(spec: str | None, study_name: str, studies_dir: Path) -> tuple[str, Path | None]:
    """(the --storage value that names the storage of `spec` from any directory, the local
    file that holds it or None), without opening or creating anything. The same value
    `StorageHandle.locator` gives once it is open."""
    if spec is None:
        path = StudyLayout.default_storage_file(studies_dir, study_name).resolve()
        return f"sqlite:///{path}", path
    if "://" not in spec:
        return str(Path(spec).resolve()), Path(spec).resolve()
    if spec.split("://", 1)[0].lower().startswith("sqlite"):
        raw = spec.split("://", 1)[1]
        path = Path(raw[1:] if raw.startswith("/") else raw).resolve()
        return f"sqlite:///{path}", path
    return _redact(spec), None


def missing_storage_file(spec: str | None, study_name: str, studies_dir: Path) -> Path | None:
    """The local file (SQLite or journal) `spec` names, when it does not exist: opening it
    would create it. None where it exists or the storage is a database server. Opens nothing."""
    file = storage_locator(spec, study_name, studies_dir)[1]
    return file if file is not None and not file.exists() else None


def check_study_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise StorageError(
            f"study name {name!r} is not usable; use letters, digits, '-', '_' and '.', starting with a letter or digit"
        )
    return name


def _redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def open_storage(spec: str | None, study_name: str, studies_dir: Path) -> StorageHandle:
    """Open (creating files as needed) the storage named by `spec`; errors are one line."""
    check_study_name(study_name)
    if spec is None:
        studies_dir.mkdir(parents=True, exist_ok=True)
        path = StudyLayout.default_storage_file(studies_dir, study_name)
        spec = f"sqlite:///{path}"
    if "://" not in spec:
        path = Path(spec)
        if path.suffix not in _JOURNAL_SUFFIXES:
            raise StorageError(
                f"storage {spec!r} is neither a database URL nor a journal file; use sqlite:///FILE.db, "
                "postgresql://USER@HOST/DB, or a path ending in .log/.journal"
            )
        if path.exists() and path.is_dir():
            raise StorageError(f"journal path {spec!r} is a directory; name a file such as studies/run.log")
        if not path.parent.exists():
            raise StorageError(f"folder {str(path.parent)!r} for the journal file does not exist; create it first")
        try:
            backend = JournalFileBackend(str(path))
            journal = optuna.storages.JournalStorage(backend)
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot open journal file {spec!r}: {exc}; check the path and permissions") from None
        return StorageHandle(journal, str(path), heartbeat=False, local_path=path)
    scheme = spec.split("://", 1)[0].lower()
    if not re.match(r"^(sqlite|postgresql|postgres|mysql)(\+\w+)?$", scheme):
        raise StorageError(
            f"storage URL scheme {scheme!r} is not supported; "
            "use sqlite:///FILE.db, postgresql://USER@HOST/DB or a journal file path"
        )
    local: Path | None = None
    if scheme.startswith("sqlite"):
        raw = spec.split("://", 1)[1]
        file_part = raw[1:] if raw.startswith("/") else raw
        if not file_part:
            raise StorageError("sqlite URL has no file; write sqlite:///studies/NAME.db")
        local = Path(file_part)
        if not local.parent.exists():
            raise StorageError(f"folder {str(local.parent)!r} for the SQLite file does not exist; create it first")
    try:
        storage = _rdb_storage(spec, scheme)
    except ImportError as exc:
        raise StorageError(
            f"storage {_redact(spec)} needs a database driver that is not installed ({exc}); pip install it"
        ) from None
    except Exception as exc:  # sqlalchemy.exc.* and driver errors: unreachable, auth, bad URL
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(
            f"cannot open storage {_redact(spec)}: {first}; check the URL, that the server runs and the credentials"
        ) from None
    return StorageHandle(storage, _redact(spec), heartbeat=True, local_path=local)


def _rdb_storage(spec: str, scheme: str, attempts: int = 4) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage of `spec`. Workers started at once on a new database race to
    create its tables (Optuna 5.0: a UNIQUE violation on ``alembic_version`` or an existing
    type for the loser): such an error is retried; the tables are there by then."""

    def make() -> optuna.storages.RDBStorage:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeat_interval (Optuna 5.0-5.1)
            return optuna.storages.RDBStorage(
                spec,
                heartbeat_interval=HEARTBEAT_INTERVAL_S,
                grace_period=GRACE_PERIOD_S,
                engine_kwargs={"pool_pre_ping": True} if not scheme.startswith("sqlite") else None,
            )

    for attempt in range(attempts - 1):
        try:
            return make()
        except ImportError:
            raise
        except Exception as exc:
            if not re.search(r"UNIQUE|unique|already exists|IntegrityError", str(exc)):
                raise
            time.sleep(0.5 * (attempt + 1))
    return make()


def study_exists(handle: StorageHandle, study_name: str) -> bool:
    return any(s.study_name == study_name for s in optuna.get_all_study_summaries(handle.storage))


def open_study(
    handle: StorageHandle,
    study_name: str,
    space: SearchSpace,
    sampler: optuna.samplers.BaseSampler,
    *,
    create: bool = True,
) -> optuna.Study:
    """Open the named study, or create it when `create`; refuse one made for another space.

    The check runs before anything is written, so a clash leaves the study untouched.
    """
    directions = [
        optuna.study.StudyDirection.MAXIMIZE if o.direction == "maximize" else optuna.study.StudyDirection.MINIMIZE
        for o in space.objectives
    ]
    names = [o.name for o in space.objectives]
    if study_exists(handle, study_name):
        study = optuna.load_study(study_name=study_name, storage=handle.storage, sampler=sampler)
        stored = study.user_attrs.get(FINGERPRINT_KEY)
        stored_names = study.metric_names
        if list(study.directions) != directions or (stored_names and list(stored_names) != names):
            raise StorageError(
                f"study {study_name!r} in {handle.description} was created with objectives "
                f"{stored_names or [d.name.lower() for d in study.directions]}, not {names}; pick another --study name"
            )
        if stored is not None and stored != space.fingerprint():
            source = study.user_attrs.get(SPACE_SOURCE_KEY, "another search space")
            raise StorageError(
                f"study {study_name!r} in {handle.description} was created from {source} with a different search space, "
                "workload or objectives; pick another --study name or use the same space file"
            )
        return study
    if not create:
        raise StorageError(f"no study named {study_name!r} in {handle.description}; check --study and --storage")
    try:
        study = optuna.create_study(study_name=study_name, storage=handle.storage, sampler=sampler, directions=directions)
    except optuna.exceptions.DuplicatedStudyError:  # another worker created it just now
        return open_study(handle, study_name, space, sampler, create=False)
    study.set_metric_names(names)
    study.set_user_attr(FINGERPRINT_KEY, space.fingerprint())
    study.set_user_attr(SPACE_SOURCE_KEY, space.source)
    return study
