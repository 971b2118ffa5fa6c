"""The simulator's HTTP/1.1 server side: one ``asyncio.Protocol`` per client connection.

Contract:

- Requests on one connection are served one at a time, in order (keep-alive; pipelined
  requests wait in the buffer). Bodies need ``Content-Length``; chunked request bodies
  are refused with 400.
- The application is any object with ``dispatch(conn, request)`` (it must end every
  request with ``send_bytes``/``send_json`` or ``start_stream`` ... ``end_stream`` /
  ``cut_stream``) and ``access(client, method, path, status)`` (the access log).
  ``connections`` is the live set, so the server can close them all at exit.
- ``on_client_gone`` is a callback the application sets while a response is being
  produced; it runs once if the client closes the connection before the response ended
  (the request is then aborted) and is cleared when the response ends.
- Responses look like uvicorn's: ``server: uvicorn``, a ``date`` header, JSON with
  ``Content-Length``, SSE streams as ``Transfer-Encoding: chunked`` with one
  ``data: ...`` event per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Protocol, cast

__all__ = ["BadRequest", "HttpConnection", "HttpRequest", "dumps", "parse_request", "reason_phrase"]

_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024


def dumps(obj: Any) -> bytes:
    """Compact JSON, as SGLang's ORJSONResponse / pydantic ``model_dump_json`` write it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def reason_phrase(status: int) -> str:
    """The standard reason phrase (``503`` -> ``Service Unavailable``), as uvicorn prints it."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


class HttpRequest:
    """One parsed request: method (upper case), path (query dropped), lower-case headers."""

    __slots__ = ("body", "headers", "keep_alive", "method", "path")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes, keep_alive: bool):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class BadRequest(Exception):
    """The bytes on the connection are not a request the server accepts (answered with 400)."""


def parse_request(buffer: bytearray) -> HttpRequest | None:
    """Parse one request from the front of ``buffer`` (consuming it); None if incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEADER_BYTES:
            raise BadRequest("header too large")
        return None
    head = bytes(buffer[:end]).decode("latin-1")
    lines = head.split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError:
        raise BadRequest("malformed request line") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("chunked request bodies are not supported; send Content-Length")
    try:
        length = int(headers.get("content-length", "0") or 0)
    except ValueError:
        raise BadRequest("bad Content-Length") from None
    if length > MAX_BODY_BYTES:
        raise BadRequest("body too large")
    if len(buffer) < end + 4 + length:
        return None
    body = bytes(buffer[end + 4 : end + 4 + length])
    del buffer[: end + 4 + length]
    connection = headers.get("connection", "").lower()
    keep_alive = (version == "HTTP/1.1" and connection != "close") or connection == "keep-alive"
    return HttpRequest(method.upper(), target.split("?", 1)[0], headers, body, keep_alive)


class Application(Protocol):
    """What a connection needs from the server (see the module docstring)."""

    connections: set[HttpConnection]

    def dispatch(self, conn: HttpConnection, request: HttpRequest) -> None: ...

    def access(self, client: str, method: str, path: str, status: int) -> None: ...


class HttpConnection(asyncio.Protocol):
    """One client connection; requests on it are served one at a time, in order."""

    def __init__(self, app: Application) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.client = "127.0.0.1:0"
        self.keep_alive = True
        self.on_client_gone: Callable[[], None] | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a TCP server's are stream transports
        peer = transport.get_extra_info("peername")
        if peer:
            self.client = f"{peer[0]}:{peer[1]}"
        self.app.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def eof_received(self) -> bool:
        self._lost()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.app.connections.discard(self)

    def _lost(self) -> None:
        self.closed = True
        self._abandon()

    def _abandon(self) -> None:
        callback, self.on_client_gone = self.on_client_gone, None
        if callback is not None:
            callback()

    # -- request handling
    def _next(self) -> None:
        if self.busy or self.closed:
            return
        try:
            request = parse_request(self.buffer)
        except BadRequest as exc:
            self.keep_alive = False
            self.busy = True
            self.send_json(400, {"detail": str(exc)})
            return
        if request is None:
            if self.buffer:
                self._quick_ack()
            return
        self.busy = True
        self.keep_alive = request.keep_alive
        self.app.dispatch(self, request)

    def _quick_ack(self) -> None:
        # A client that sends headers and body in two writes with Nagle on would otherwise
        # wait for our delayed ACK (~40 ms on Linux) before sending the body.
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is not None and _TCP_QUICKACK is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)

    def _done(self) -> None:
        """The current response is complete; serve the next request or close."""
        self.on_client_gone = None
        self.busy = False
        if self.closed or self.transport is None:
            return
        if not self.keep_alive:
            self.transport.close()
            self.closed = True
            return
        if self.buffer:
            asyncio.get_running_loop().call_soon(self._next)

    # -- responses
    def _head(self, status: int, content_type: str | None, extra: str) -> bytes:
        lines = [
            f"HTTP/1.1 {status} {reason_phrase(status)}",
            f"date: {formatdate(usegmt=True)}",
            "server: uvicorn",
        ]
        if content_type:
            lines.append(f"content-type: {content_type}")
        lines.append(extra)
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def send_bytes(self, status: int, body: bytes, content_type: str | None, method: str = "", path: str = "") -> None:
        """A complete response; logged in the access log when ``method`` is given."""
        if method:
            self.app.access(self.client, method, path, status)
        self._write(self._head(status, content_type, f"content-length: {len(body)}") + body)
        self._done()

    def send_json(self, status: int, obj: Any, method: str = "", path: str = "") -> None:
        self.send_bytes(status, dumps(obj), "application/json", method, path)

    def start_stream(self, method: str, path: str) -> None:
        """Headers of a 200 SSE response; events follow with ``stream_event``."""
        self.app.access(self.client, method, path, 200)
        self._write(self._head(200, "text/event-stream; charset=utf-8", "transfer-encoding: chunked"))

    def stream_event(self, payload: bytes) -> None:
        """One SSE event ``data: <payload>\\n\\n`` as one HTTP chunk."""
        data = b"data: " + payload + b"\n\n"
        self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        self._write(b"0\r\n\r\n")
        self._done()

    def cut_stream(self) -> None:
        """Close mid-stream without the terminating chunk (a truncated response)."""
        self.keep_alive = False
        self._abandon()
        if self.transport is not None:
            self.transport.close()
        self.closed = True
        self.busy = False
