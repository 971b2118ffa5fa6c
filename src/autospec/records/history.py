"""What relaunches in a storage's other studies measured of the between-launch spread.

A paired comparison's interval holds tau, a launch's own shift (`autospec.metrics.paired`).
Within one study only relaunches measure it, so a study that launches each configuration
once leaves it to a prior of +-2% (SGLang 0.5.16: the launches of one configuration on one
H100 or H200 shifted by 0.0-0.7% at C=1 once the per-request noise was out; the fixtures
under tests/fixtures/real_8b_*). Where the same storage holds earlier studies on the same
hardware and target (or, with no ``--storage``, the other studies' files in the same
folder), their relaunches have measured tau already: those studies' spreads
(`launch_spread`, launches pooled only within one machine as always) add their degrees of
freedom to the prior (`SpreadHistory`).

The same hardware and target: a launch counts where its worker's ``hardware`` (GPU type x
GPUs per server, e.g. "NVIDIA H100 80GB HBM3 x1", or "simulator (PROFILE) x1") and its
resolved ``model_path`` are those of one of this study's launches; launches without a
recorded hardware never count. Per-request noise is not taken from other studies: their
request streams differ.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import optuna
from sqlalchemy.exc import SQLAlchemyError

from autospec.metrics.paired import LogSpread, SpreadHistory
from autospec.records.launches import ObjectiveRef, pool_study
from autospec.records.stored import FINGERPRINT_KEY, StoredTrial, read_trials

__all__ = ["other_studies", "served", "spread_history"]


def served(t: StoredTrial) -> tuple[str, str] | None:
    """(hardware, target model) the trial's server ran; None where either is unrecorded."""
    hardware = (t.worker or {}).get("hardware")
    model = (t.record.resolved or {}).get("model_path") if t.record is not None else None
    return (hardware, model) if isinstance(hardware, str) and isinstance(model, str) else None


def spread_history(
    others: Iterable[Sequence[StoredTrial]], on: Collection[tuple[str, str]], refs: Sequence[ObjectiveRef]
) -> dict[int, SpreadHistory]:
    """Per objective index of `refs`, tau as the relaunches in `others` (each a study's trials)
    measured it on the (hardware, target model) pairs `on` (module docstring; a study's own
    are `served` by its trials); objectives no relaunch measured are left out."""
    found: dict[int, list[LogSpread]] = {}
    for study in others:
        same = [t for t in study if served(t) in on]
        for index, spread in pool_study(same, refs).log_spread.items():
            found.setdefault(index, []).append(spread)
    pooled = {index: SpreadHistory.pooled(spreads) for index, spreads in found.items()}
    return {index: h for index, h in pooled.items() if h is not None}


def other_studies(study: optuna.Study) -> list[list[StoredTrial]]:
    """The trials of every other autospec study beside `study` (those carrying
    FINGERPRINT_KEY; a storage may hold other Optuna studies too): in its storage, and where
    that storage is the default file of its study (``DIR/NAME.db`` holding study NAME, no
    ``--storage`` given) in the other SQLite files of DIR that hold studies, opened without
    writing to them."""
    found = _autospec_studies(study._storage, study.study_name)
    own = _default_file(study)
    if own is not None:
        for path in sorted(own.parent.glob("*.db")):
            if path != own and _holds_studies(path):
                found += _sibling_studies(path)
    return found


def _sibling_studies(path: Path) -> list[list[StoredTrial]]:
    """The autospec studies of another study's file; none where it cannot be read (an Optuna
    that wrote another schema version, a file being replaced): the history is an addition."""
    try:
        return _autospec_studies(optuna.storages.RDBStorage(f"sqlite:///{path}", skip_table_creation=True), None)
    except (RuntimeError, SQLAlchemyError, optuna.exceptions.OptunaError):
        return []


def _autospec_studies(storage: optuna.storages.BaseStorage, leave_out: str | None) -> list[list[StoredTrial]]:
    return [
        read_trials(optuna.load_study(study_name=s.study_name, storage=storage))
        for s in storage.get_all_studies()
        if s.study_name != leave_out and FINGERPRINT_KEY in s.user_attrs
    ]


def _default_file(study: optuna.Study) -> Path | None:
    """The SQLite file of `study`'s storage where it is named after the study (Optuna 5.1
    wraps an RDBStorage in a cache whose `_backend` holds it, with its `url`)."""
    url = getattr(getattr(study._storage, "_backend", study._storage), "url", None)
    if not isinstance(url, str) or not url.startswith("sqlite:///"):
        return None
    path = Path(url.removeprefix("sqlite:///"))
    return path if path.stem == study.study_name and path.is_file() else None


def _holds_studies(path: Path) -> bool:
    """Whether the SQLite file has Optuna's studies and version tables (read-only; any other
    file: False)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            db.execute("SELECT study_name FROM studies LIMIT 1").fetchall()
            db.execute("SELECT schema_version FROM version_info LIMIT 1").fetchall()
    except sqlite3.Error:
        return False
    return True
