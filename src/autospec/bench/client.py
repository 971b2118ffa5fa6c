"""The streaming HTTP client: one request in, one `RequestRecord` out, never a raise.

`BenchClient` wraps one `httpx.AsyncClient` (HTTP/1.1, a connection pool sized to
the concurrency, an injectable `httpx.AsyncBaseTransport` for tests). `send()`
streams one request and maps every failure to a record with an `error_kind`
(see `autospec.bench.records`):

    non-2xx status                        -> http_status
    error event / "abort" finish          -> stream_error
    body ended before `data: [DONE]`      -> truncated
    past `timeout_s` (whole request)      -> timeout
    connect/reset/refused before a body   -> connection
    unparseable event                     -> protocol

Only cancellation escapes: cancelling the task that awaits `send()` (or the level
that runs it) closes the response, and so the connection, before re-raising.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any

import httpx

from autospec.bench.protocol import SseSplitter, StreamError, StreamProgress, build_request
from autospec.bench.records import RequestRecord
from autospec.bench.workloads import Prompt, Workload

_ERROR_BODY_LIMIT = 300


class BenchClient:
    """Sends streaming generation requests for one workload to one server.

    Use as an async context manager. `max_connections` must be at least the number
    of requests in flight at once (the runner passes the concurrency), otherwise
    requests would queue inside the client and the measurement would be wrong.
    """

    def __init__(
        self,
        base_url: str,
        workload: Workload,
        *,
        model: str | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.workload = workload
        self.model = model
        self.timeout_s = float(timeout_s)
        self._connect_timeout_s = connect_timeout_s
        self._max_connections = max(1, int(max_connections))
        self._transport = transport
        self._http: httpx.AsyncClient | None = None

    async def __aenter__(self) -> BenchClient:
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=self._transport,
            timeout=httpx.Timeout(
                connect=self._connect_timeout_s, read=self.timeout_s, write=self.timeout_s, pool=self.timeout_s
            ),
            limits=httpx.Limits(
                max_connections=self._max_connections, max_keepalive_connections=self._max_connections
            ),
            trust_env=False,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError("BenchClient must be used inside 'async with'")
        return self._http

    async def resolve_model(self) -> str | None:
        """For the OpenAI APIs without an explicit model: the first id of
        `GET /v1/models` (None when unavailable; SGLang then uses its default)."""
        if self.model or self.workload.api == "generate":
            return self.model
        try:
            response = await self.http.get("/v1/models", timeout=self._connect_timeout_s)
            if response.status_code == 200:
                data = response.json().get("data") or []
                if data and isinstance(data[0], dict) and data[0].get("id"):
                    self.model = str(data[0]["id"])
        except (httpx.HTTPError, ValueError):
            pass
        return self.model

    async def send(self, prompt: Prompt, *, warmup: bool = False) -> RequestRecord:
        """Stream one request; returns its record (never raises except on cancellation)."""
        path, body = build_request(self.workload, prompt, self.model)
        progress = StreamProgress(api=self.workload.api)
        t_sent = time.perf_counter()
        error: StreamError | None = None
        try:
            await asyncio.wait_for(self._stream(path, body, progress), timeout=self.timeout_s)
        except StreamError as exc:
            error = exc
        except (asyncio.TimeoutError, httpx.TimeoutException):
            error = StreamError("timeout", f"no complete answer within {self.timeout_s:g} s")
        except httpx.RemoteProtocolError as exc:
            kind = "truncated" if progress.status_code is not None else "connection"
            error = StreamError(kind, f"{type(exc).__name__}: {exc}")
        except (httpx.TransportError, OSError) as exc:
            kind = "truncated" if progress.status_code is not None else "connection"
            error = StreamError(kind, f"{type(exc).__name__}: {exc}")
        return progress.to_record(
            t_sent, time.perf_counter(), warmup=warmup, prompt_index=prompt.index, error=error
        )

    async def _stream(self, path: str, body: dict[str, Any], progress: StreamProgress) -> None:
        async with self.http.stream("POST", path, json=body) as response:
            progress.status_code = response.status_code
            if not 200 <= response.status_code < 300:
                detail = (await response.aread())[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
                raise StreamError("http_status", f"HTTP {response.status_code}: {detail}")
            splitter = SseSplitter()
            clock = time.perf_counter
            async for chunk in response.aiter_bytes():
                events = splitter.feed(chunk)
                if events:
                    now = clock()
                    for data in events:
                        progress.feed(data, now)
            for data in splitter.flush():
                progress.feed(data, clock())
