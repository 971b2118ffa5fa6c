"""The streaming HTTP client: one request in, one `RequestRecord` out, never a raise.

`BenchClient` sends through httpx transports directly (`httpx.AsyncHTTPTransport`,
HTTP/1.1, or an injected `httpx.AsyncBaseTransport` for tests), one transport with one
keep-alive connection per *lane*; the runner gives each closed-loop worker its own
lane. Both choices keep the client's CPU cost per request low, which matters because
a closed loop's next request waits for it: with one `httpx.AsyncClient` and one pool of
C connections, httpcore scanned every pooled connection on each request and response
close, and the client layer (URL merging, cookies, redirects, hooks) added more; at
C=16 against the simulator that cost showed as a 3-4% lower speed than a bare-socket
client measured (httpx 0.28.1, httpcore 1.0.9). `send()` streams one request and maps
every failure to a record with an `error_kind` (see `autospec.request_records`):

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
import json
import ssl
import sys
import time
from types import TracebackType

import httpx

from autospec.bench.protocol import ENDPOINTS, SseSplitter, StreamError, StreamProgress, build_request
from autospec.bench.workloads import Prompt, Workload
from autospec.request_records import RequestRecord, request_id

_ERROR_BODY_LIMIT = 300
#: where SGLang reports its state (`internal_states[0].avg_spec_accept_length`): the
#: current path first, then the older one (sglang 0.5.x answers both, the old one with a
#: deprecation warning in its log)
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
#: SGLang (0.5.16 checked): moves every live object of the HTTP server's, scheduler's and
#: detokenizer's Python heaps out of the collector's generations (`gc.freeze()`), which its
#: long-GC warning advises after warmup. Measured on an H200: C=32 per-second throughput
#: with dips to 50-60% before, none after (docs/real-gpu-validation.md).
FREEZE_GC_PATH = "/freeze_gc"


class BenchClient:
    """Sends streaming generation requests for one workload to one server.

    Use as an async context manager. Requests sent at the same time must use
    different lanes (`send(..., lane=i)`), otherwise they would queue inside the
    client and the measurement would be wrong; lanes are opened on first use (or by
    `connect_lanes`) and kept, with their connection, until the client closes. An
    injected transport serves every lane and is not closed by the client.
    """

    def __init__(
        self,
        base_url: str,
        workload: Workload,
        *,
        model: str | None = None,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.workload = workload
        self.model = model
        self.timeout_s = float(timeout_s)
        self._connect_timeout_s = connect_timeout_s
        self._injected = transport
        self._lanes: list[httpx.AsyncBaseTransport] = []
        self._entered = False
        self._connected = 0
        self._ssl: ssl.SSLContext | None = None
        self._urls = {
            path: httpx.URL(self.base_url + path)
            for path in (*ENDPOINTS.values(), "/v1/models", *SERVER_INFO_PATHS, FREEZE_GC_PATH)
        }
        self._timeouts = {
            "timeout": {
                "connect": connect_timeout_s,
                "read": self.timeout_s,
                "write": self.timeout_s,
                "pool": self.timeout_s,
            }
        }

    async def __aenter__(self) -> BenchClient:
        self._entered = True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        lanes, self._lanes, self._entered, self._connected = self._lanes, [], False, 0
        if self._injected is None:
            for lane in lanes:
                await lane.aclose()

    def lane(self, index: int = 0) -> httpx.AsyncBaseTransport:
        """The transport of lane `index` (opened on first use)."""
        if not self._entered:
            raise RuntimeError("BenchClient must be used inside 'async with'")
        if self._injected is not None:
            return self._injected
        if self._ssl is None:
            # One TLS context for every lane: building one costs ~20 ms (CA bundle).
            self._ssl = ssl.create_default_context()
        while len(self._lanes) <= index:
            self._lanes.append(
                httpx.AsyncHTTPTransport(verify=self._ssl, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
            )
        return self._lanes[index]

    async def connect_lanes(self, count: int) -> None:
        """Open lanes 0..count-1 and their connections now (a concurrent `GET /v1/models`
        on each lane not connected yet, answer ignored), so that no measured request
        pays for a TCP connect or a lane's set-up. Failures are left for the measured
        requests to record."""
        if count <= self._connected:
            return
        self.lane(count - 1)

        async def touch(index: int) -> None:
            request = httpx.Request("GET", self._urls["/v1/models"], extensions=self._timeouts)
            try:
                lane = self.lane(index)
                response = await asyncio.wait_for(lane.handle_async_request(request), self._connect_timeout_s)
                try:
                    await response.aread()
                finally:
                    await response.aclose()
            except (httpx.HTTPError, OSError, asyncio.TimeoutError):
                pass

        await asyncio.gather(*(touch(i) for i in range(self._connected, count)))
        self._connected = count

    async def resolve_model(self) -> str | None:
        """For the OpenAI APIs without an explicit model: the first id of
        `GET /v1/models` (None when unavailable; SGLang then uses its default)."""
        if self.model or self.workload.api == "generate":
            return self.model
        request = httpx.Request("GET", self._urls["/v1/models"], extensions=self._timeouts)
        try:
            response = await asyncio.wait_for(self.lane(0).handle_async_request(request), self._connect_timeout_s)
            try:
                payload = json.loads(await response.aread()) if response.status_code == 200 else {}
            finally:
                await response.aclose()
            data = payload.get("data") or [] if isinstance(payload, dict) else []
            if data and isinstance(data[0], dict) and data[0].get("id"):
                self.model = str(data[0]["id"])
        except (httpx.HTTPError, OSError, ValueError, asyncio.TimeoutError):
            pass
        return self.model

    async def server_info(self) -> dict | None:
        """The server's `GET /server_info` (older SGLang: `/get_server_info`) as a dict,
        through lane 0 (between levels, when no request is in flight); None when neither
        answers with a JSON object."""
        for path in SERVER_INFO_PATHS:
            request = httpx.Request("GET", self._urls[path], extensions=self._timeouts)
            try:
                response = await asyncio.wait_for(self.lane(0).handle_async_request(request), self._connect_timeout_s)
                try:
                    body = await response.aread()
                finally:
                    await response.aclose()
                if response.status_code == 200:
                    payload = json.loads(body)
                    return payload if isinstance(payload, dict) else None
            except (httpx.HTTPError, OSError, ValueError, asyncio.TimeoutError):
                return None
        return None

    async def freeze_gc(self) -> bool:
        """Ask the server to freeze its garbage collectors (`FREEZE_GC_PATH`), through lane
        0 when no request is in flight; True when it answered 200 (a server without the
        endpoint answers 404: False)."""
        request = httpx.Request("POST", self._urls[FREEZE_GC_PATH], extensions=self._timeouts)
        try:
            response = await asyncio.wait_for(self.lane(0).handle_async_request(request), self._connect_timeout_s)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except (httpx.HTTPError, OSError, asyncio.TimeoutError):
            return False
        return response.status_code == 200

    async def send(
        self,
        prompt: Prompt,
        *,
        warmup: bool = False,
        lane: int = 0,
        output_len: int | None = None,
        position: int | None = None,
    ) -> RequestRecord:
        """Stream one request on `lane` (`output_len`: instead of the workload's; `position`:
        its place in the phase's send order, which names it, `request_records.request_id`);
        returns its record (never raises except on cancellation)."""
        transport = self.lane(lane)
        path, body = build_request(self.workload, prompt, self.model, output_len, None if warmup else position)
        request = httpx.Request(
            "POST", self._urls[path], content=json.dumps(body).encode(), headers=_HEADERS, extensions=self._timeouts
        )
        progress = StreamProgress(api=self.workload.api)
        t_sent = time.perf_counter()
        error: StreamError | None = None
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(self.timeout_s):
                    await self._stream(transport, request, progress)
            else:  # Python 3.10
                await asyncio.wait_for(self._stream(transport, request, progress), timeout=self.timeout_s)
        except StreamError as exc:
            error = exc
        except (asyncio.TimeoutError, httpx.TimeoutException):
            error = StreamError("timeout", f"no complete answer within {self.timeout_s:g} s")
        except (httpx.TransportError, OSError) as exc:
            kind = "truncated" if progress.status_code is not None else "connection"
            error = StreamError(kind, f"{type(exc).__name__}: {exc}")
        return progress.to_record(
            t_sent,
            time.perf_counter(),
            warmup=warmup,
            prompt_index=prompt.index,
            error=error,
            position=position,
            request_id=None if position is None else request_id(position, prompt.index, warmup),
        )

    @staticmethod
    async def _stream(transport: httpx.AsyncBaseTransport, request: httpx.Request, progress: StreamProgress) -> None:
        response = await transport.handle_async_request(request)
        try:
            progress.status_code = response.status_code
            if not 200 <= response.status_code < 300:
                detail = (await response.aread())[:_ERROR_BODY_LIMIT].decode("utf-8", errors="replace")
                raise StreamError("http_status", f"HTTP {response.status_code}: {detail}")
            stream = response.stream
            if not isinstance(stream, httpx.AsyncByteStream):
                raise TypeError("the transport answered with a synchronous stream; give BenchClient an async transport")
            splitter = SseSplitter()
            clock = time.perf_counter
            async for chunk in stream:
                events = splitter.feed(chunk)
                if events:
                    now = clock()
                    for data in events:
                        progress.feed(data, now)
            for data in splitter.flush():
                progress.feed(data, clock())
        finally:
            await response.aclose()


_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
