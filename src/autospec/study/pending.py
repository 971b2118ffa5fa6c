"""Results measured while the storage was away, kept in files until it is back.

When a trial's result cannot be stored (`autospec.records.StorageUnavailable`) its server
is already torn down; the result is written to ``<study>-pending/trial-NNNN.json``
(atomically) and the run stops. The next run writes every pending result into the
storage before anything else (before recovery would fail the still-RUNNING trial as
stale), then deletes the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from autospec.records import TrialRecord, TrialStore

__all__ = ["PendingResults"]


class PendingResults:
    """The pending results of one study, one JSON file per trial in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def save(self, number: int, record: TrialRecord, *, failed: bool = False) -> Path:
        """Keep `record` of trial `number` (to be told FAIL when `failed`); the file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        entry = {"number": number, "failed": failed, "attrs": record.to_attrs(), "values": record.values,
                 "constraints": record.constraints}
        path = self.folder / f"trial-{number:04d}.json"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".trial-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        return path

    def replay(self, store: TrialStore) -> list[str]:
        """Write every pending result into `store`; log lines. A result whose trial is no
        longer running (another process failed it meanwhile) is dropped: that trial's
        retry measures it again."""
        lines: list[str] = []
        for path in sorted(self.folder.glob("trial-*.json")) if self.folder.is_dir() else []:
            entry = self._load(path)
            if entry is None:
                lines.append(f"ignored the unreadable pending result {path}")
                path.unlink(missing_ok=True)
                continue
            number = int(entry["number"])
            record = TrialRecord.from_attrs(entry["attrs"], entry.get("values"), entry.get("constraints"))
            if record is None:
                path.unlink(missing_ok=True)
                continue
            if store.is_finished(number):
                lines.append(f"trial {number} was finished meanwhile; dropped the result kept in {path.name}")
            elif entry.get("failed"):
                store.tell_failed(number, record)
                lines.append(f"recorded trial {number} (kept while the storage was away) as failed")
            else:
                store.tell(number, record)
                lines.append(f"recorded trial {number} (measured while the storage was away): outcome {record.outcome}")
            path.unlink(missing_ok=True)
        return lines

    @staticmethod
    def _load(path: Path) -> dict[str, Any] | None:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and isinstance(entry.get("number"), int) else None
