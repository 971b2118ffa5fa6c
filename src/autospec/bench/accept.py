"""Accept length per level from the server, for APIs whose responses carry none.

`AcceptTracker` reads `/server_info` before and after each level and remembers the
server log's size, so that after the level it can give the level's accept length from
the change of SGLang's cumulative `avg_spec_accept_length`, or else from the decode log
lines printed meanwhile (`autospec.metrics.accept` has the arithmetic). It counts the
decode tokens of every request sent through it since the server started (warmup
included), which the server_info arithmetic needs: use one tracker per server launch,
for every level sent to that server.
"""

from __future__ import annotations

from pathlib import Path

from autospec.bench.client import BenchClient
from autospec.metrics.accept import (
    AcceptEstimate,
    accept_from_log,
    accept_from_server_info,
    decode_tokens,
    per_request_definition,
    server_info_accept,
)
from autospec.request_records import LevelResult

__all__ = ["AcceptTracker"]


class AcceptTracker:
    """`await begin()` before a level, `await end(result)` after it (see the module)."""

    def __init__(self, client: BenchClient, log_path: str | Path | None = None) -> None:
        self._client = client
        self._log_path = Path(log_path) if log_path else None
        self.decode_before = 0.0  # decode tokens served through this tracker so far
        self._before: float | None = None
        self._offset = 0

    def _log_size(self) -> int:
        try:
            return self._log_path.stat().st_size if self._log_path else 0
        except OSError:
            return 0

    def _log_since(self, offset: int) -> str:
        if self._log_path is None:
            return ""
        try:
            with open(self._log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    async def begin(self) -> None:
        self._before = server_info_accept(await self._client.server_info())
        self._offset = self._log_size()

    async def end(self, results: LevelResult | list[LevelResult]) -> AcceptEstimate | None:
        """The level's accept length (completion tokens per verify pass, as the native
        API's figure) from the server, or None where the server exposes none."""
        runs = results if isinstance(results, list) else [results]
        tokens, requests = decode_tokens(r for run in runs for r in run.records)
        after = server_info_accept(await self._client.server_info())
        value = accept_from_server_info(self._before, self.decode_before, after, tokens)
        source = "server_info"
        if value is None:
            value, source = accept_from_log(self._log_since(self._offset)), "log"
        self.decode_before += tokens
        if value is None:
            return None
        return AcceptEstimate(per_request_definition(value, tokens, requests), source)
