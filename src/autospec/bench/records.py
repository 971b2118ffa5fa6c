"""The benchmark's per-request records and per-level results, defined in
`autospec.request_records` (where `autospec.metrics` reads them too) and re-exported here."""

from __future__ import annotations

from autospec.request_records import ERROR_KINDS, LevelResult, RequestRecord

__all__ = ["ERROR_KINDS", "LevelResult", "RequestRecord"]
