"""A tiny SGLang-like streaming server for client tests (stdlib asyncio, own thread).

It speaks HTTP/1.1 with chunked transfer encoding and keep-alive (like uvicorn),
answers `/generate`, `/v1/completions`, `/v1/chat/completions` and `/v1/models`
with SGLang's streaming event shapes (sglang 0.5.23), `/server_info` (and the older
`/get_server_info`) with `FakeServer.info()` where set (404 otherwise), `/freeze_gc` where
`FakeServer.can_freeze_gc` (404 otherwise; `freezes` holds how many generation requests
had arrived at each), and misbehaves
on request:
`FakeServer.script(n, body) -> Reply` decides per request (n counts from 0).
It records every request body and counts open and closed streams, so tests can
check what the client sent and that cancelled streams were closed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    """How to answer one request.

    kind: ok | status | truncate | hang | error_event | abort | garbage
    """

    kind: str = "ok"
    status: int = 500
    tokens: int | None = None  # default: the requested max tokens
    per_event: int = 3
    delay_s: float = 0.0
    first_delay_s: float = 0.0
    events_before_fault: int = 2
    verify: bool = True
    usage_per_chunk: bool = True


class FakeServer:
    def __init__(self, script: Callable[[int, dict], Reply] | None = None) -> None:
        self.script = script or (lambda n, body: Reply())
        self.info: Callable[[], dict] | None = None
        self.info_paths: list[str] = []
        self.can_freeze_gc = False
        self.freezes: list[int] = []
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.model_lookups = 0
        self.open_streams = 0
        self.max_open_streams = 0
        self.closed_streams = 0
        self.client_disconnects = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stop = asyncio.Event()
        self.port = 0

    # lifecycle -------------------------------------------------------------
    def start(self) -> FakeServer:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def shutdown() -> None:
            self._stop.set()
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # HTTP ------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    return
                _method, path, _ = request_line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    key, _, value = line.decode().partition(":")
                    headers[key.strip().lower()] = value.strip()
                body_bytes = await reader.readexactly(int(headers.get("content-length", "0")))
                body = json.loads(body_bytes) if body_bytes else {}
                if path in ("/server_info", "/get_server_info"):
                    with self._lock:
                        self.info_paths.append(path)
                    if self.info is None:
                        await self._send_json(writer, 404, {"detail": "Not Found"})
                    else:
                        await self._send_json(writer, 200, self.info())
                    continue
                if path == "/freeze_gc":
                    with self._lock:
                        self.freezes.append(len(self.bodies))
                    await self._send_json(writer, 200 if self.can_freeze_gc else 404, {})
                    continue
                if path == "/v1/models":
                    with self._lock:
                        self.model_lookups += 1
                    await self._send_json(writer, 200, {"object": "list", "data": [{"id": "fake-model"}]})
                    continue
                with self._lock:
                    n = len(self.bodies)
                    self.bodies.append(body)
                    self.paths.append(path)
                keep_alive = await self._answer(writer, path, body, self.script(n, body))
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return  # client went away, or the server is shutting down
        finally:
            writer.close()

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode() + data
        )
        await writer.drain()

    async def _answer(self, writer: asyncio.StreamWriter, path: str, body: dict, reply: Reply) -> bool:
        if reply.kind == "status":
            await self._send_json(writer, reply.status, {"object": "error", "message": "injected failure"})
            return True
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        with self._lock:
            self.open_streams += 1
            self.max_open_streams = max(self.max_open_streams, self.open_streams)
        finished = False
        try:
            events = _events(path, body, reply)
            for i, event in enumerate(events):
                if reply.kind != "ok" and i == reply.events_before_fault:
                    if reply.kind == "truncate":
                        return False  # close without the terminating chunk
                    if reply.kind == "hang":
                        await self._stop.wait()
                        return False
                    if reply.kind == "error_event":
                        event = {"error": {"message": "injected error", "type": "internal", "code": 500}}
                    elif reply.kind == "abort":
                        event = _native(body, 0, 1, finish={"type": "abort", "message": "injected abort"})
                    else:
                        await _write_chunk(writer, b"data: {not json\n\n")
                        continue
                    await _write_chunk(writer, b"data: " + json.dumps(event).encode() + b"\n\n")
                    break
                delay = reply.first_delay_s if i == 0 else reply.delay_s
                if delay:
                    await asyncio.sleep(delay)
                await _write_chunk(writer, b"data: " + json.dumps(event).encode() + b"\n\n")
            await _write_chunk(writer, b"data: [DONE]\n\n")
            await _write_chunk(writer, b"")
            finished = True
            return True
        except (ConnectionError, asyncio.CancelledError):
            with self._lock:
                self.client_disconnects += 1
            raise
        finally:
            with self._lock:
                self.open_streams -= 1
                self.closed_streams += 1
            if not finished:
                writer.close()


async def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()


def _max_tokens(body: dict) -> int:
    if "sampling_params" in body:
        return int(body["sampling_params"]["max_new_tokens"])
    return int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)


def _native(body: dict, done: int, verify: int, finish: dict | None = None, with_verify: bool = True) -> dict:
    meta = {"prompt_tokens": len(str(body.get("text", "")).split()), "completion_tokens": done, "finish_reason": finish}
    if with_verify:
        meta["spec_verify_ct"] = verify
    return {"text": "x" * done, "meta_info": meta}


def _events(path: str, body: dict, reply: Reply) -> list[dict]:
    total = reply.tokens if reply.tokens is not None else _max_tokens(body)
    sizes = [1] + [reply.per_event] * ((total - 1) // reply.per_event)
    if (total - 1) % reply.per_event:
        sizes.append((total - 1) % reply.per_event)
    sizes = sizes if total > 0 else []
    events: list[dict] = []
    done = 0
    for step, size in enumerate(sizes):
        done += size
        last = done == total
        if path == "/generate":
            events.append(_native(body, done, step + 1, {"type": "length", "length": total} if last else None, reply.verify))
            continue
        usage = {"prompt_tokens": 7, "completion_tokens": done, "total_tokens": 7 + done}
        if path == "/v1/chat/completions":
            choice = {"index": 0, "delta": {"content": "y" * size}, "finish_reason": "length" if last else None}
            if step == 0:
                events.append({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        else:
            choice = {"index": 0, "text": "y" * size, "finish_reason": "length" if last else None}
        event: dict = {"object": "chunk", "choices": [choice]}
        if reply.usage_per_chunk:
            event["usage"] = usage
        events.append(event)
    if path != "/generate":
        events.append({"object": "chunk", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": done}})
    return events
