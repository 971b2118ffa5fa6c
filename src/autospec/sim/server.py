"""The simulator's server process: an asyncio HTTP/1.1 server and the batch scheduler.

Everything runs on one asyncio loop in one process (plus an optional do-nothing
``sglang::scheduler`` child for process-tree realism):

- :class:`HttpConnection` is a stdlib ``asyncio.Protocol``: HTTP/1.1 with keep-alive,
  ``Content-Length`` request bodies, JSON responses, and ``Transfer-Encoding: chunked``
  for SSE streams. A client that closes its connection aborts its request, which frees
  the request's slot at the next step.
- :class:`Engine` is the scheduler, exactly as ``autospec.sim.predict`` replays it: admit
  waiting requests while running < max_running_requests; one prefill step
  (``prefill_seconds``) for all of them, during which running requests stall, after which
  each admitted request has its first token; then decode steps of
  ``step_seconds(batch)`` in which every running request emits k tokens (noise off: the
  deterministic fractional accumulator of ``accept_length``; noise on: k drawn from
  ``accept_length_distribution`` with a seeded RNG, times a per-run and a per-step speed
  factor). Step ends follow an absolute schedule (each deadline is the previous deadline
  plus the step's duration), so Python overhead does not slow the simulated GPU.
  *Gathering*: requests sent together (a benchmark level starting, or the replacements
  of requests that just ended in a closed loop) reach the server spread over milliseconds;
  when slots are free and nothing or only just-finished work is pending, the engine waits
  for such a burst to complete (10 ms without an arrival, 50 ms while replacements for
  finished requests are still expected; 100 ms at most, or 80% of the next step while
  others run; all shrink with time scales below 0.5) and admits it in one prefill. The
  prefill starts, in simulated time, at its first request's arrival or at the last step's
  end, whichever is later, so gathering costs no simulated time. This is the closed loop
  predict() replays, whose clients turn around instantly.
- :class:`SimServer` plays SGLang's start-up (log lines, load time, init failures),
  serves SGLang's HTTP surface (``/health``, ``/health_generate``, ``/ready``,
  ``/model_info``, ``/server_info`` and their ``/get_*`` aliases, ``/generate``,
  ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``), records simulated GPU
  memory and applies faults.

Tokenizer: whitespace words. A prompt's token count is its number of whitespace-separated
words (chat: the words of all message contents; ``input_ids``: their number); generated
tokens are words `` w<N>`` (like SGLang's random-weight tiny models), so a completion of n
tokens is n such words. JSON shapes follow sglang 0.5.23's ``http_server.py`` and
``entrypoints/openai/protocol.py`` / ``serving_completions.py`` / ``serving_chat.py``
(completion stream chunks, the final usage chunk when ``stream_options.include_usage``,
chat's role chunk, content chunks and finish chunk) and the 0.5.16 captures in
``data/real-sglang-0.5.16-h200/eagle-probe.json``.

Requests: ``ignore_eos`` false lets a request stop early at a seeded "EOS" (exponential
around the profile's optional top-level ``typical_output_len``, default 400 tokens;
finish_reason ``stop``); ``max_new_tokens``/``max_tokens`` cap it; the workload kind is
``classify_prompt(prompt)`` (``input_ids``: "synthetic") and, with ``temperature``,
sets the acceptance. ``/health``, ``/health_generate`` and ``/ready`` answer 503 until
load and warmup are done (sglang routes ``/health`` to the same handler), 200 after.
``/server_info``'s ``internal_states[0]`` also carries ``sim_*`` counters (tokens emitted,
simulated and busy seconds, worst step lateness) for benchmarks/sim_capacity.py.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
import random
import signal
import socket
import sys
import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, Callable

from autospec.sim import logs
from autospec.sim.faults import Faults, spawn_zombie_child
from autospec.sim.gpu_state import GpuStateFile

# ---------------------------------------------------------------- constants

DECODE_LOG_INTERVAL = 40  # SGLang's decode_log_interval default (0.5.16 server_args line)
# Gathering windows (real seconds) at time scales >= GATHER_FULL_SCALE; faster scales shrink
# them in proportion, so a near-zero --sim-time-scale answers at once.
GATHER_CAP_S = 0.100  # longest wait for arrivals to gather while nothing runs
BURST_QUIET_S = 0.010  # a fresh burst (a level starting) ended after this long without arrivals
REPLACEMENT_QUIET_S = 0.050  # replacements of finished requests: allow this client turnaround
GATHER_FULL_SCALE = 0.5
EOS_TOKEN_ID = 2  # "matched" in finish_reason when a request stops at its simulated EOS
DEFAULT_TYPICAL_OUTPUT_LEN = 400  # median length of an EOS-terminated answer (profile extra)
VOCAB = tuple(f" w{i}" for i in range(512))
WARMUP_PROMPT_TOKENS = 6  # "The capital city of France is" (SGLang's warmup request)

JSON = dict[str, Any]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------- the scheduler


@dataclass(eq=False)
class Generation:
    """One request inside the engine; the HTTP side observes it through ``on_step``."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    stop_at: int  # completion length at which it ends (max_new_tokens, or an earlier EOS)
    workload: str
    temperature: float
    accept_mean: float
    accept_cdf: list[float] | None  # cumulative P(k <= i+1); None = noiseless
    on_step: Callable[["Generation", str], None]  # (generation, new text)
    created: float = field(default_factory=time.perf_counter)
    arrived: float = 0.0  # loop time at which the engine received it
    token_state: int = 1
    completion_tokens: int = 0
    verify_ct: int = 0
    accumulator: float = 0.0
    histogram: list[int] | None = None
    text: str = ""
    finished: bool = False
    aborted: bool = False
    stopped_at_eos: bool = False
    events: int = 0

    def next_words(self, count: int) -> str:
        state = self.token_state
        words = []
        for _ in range(count):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            words.append(VOCAB[(state >> 7) % len(VOCAB)])
        self.token_state = state
        return "".join(words)

    @property
    def remaining(self) -> int:
        return self.stop_at - self.completion_tokens

    def finish_reason(self) -> JSON | None:
        if not self.finished:
            return None
        if self.stopped_at_eos:
            return {"type": "stop", "matched": EOS_TOKEN_ID}
        return {"type": "length", "length": self.completion_tokens}


@dataclass
class EngineStats:
    """Cumulative counters for /server_info and the decode log."""

    decode_tokens: int = 0  # tokens emitted by decode (verify) steps since launch
    verify_steps: int = 0  # per-request verify passes since launch
    completed: int = 0  # finished requests (not aborted)
    last_gen_throughput: float = 0.0
    scheduled_seconds: float = 0.0  # simulated GPU time of all steps (prefill + decode)
    busy_seconds: float = 0.0  # real time with requests waiting or running
    emitted_tokens: int = 0
    max_lag_seconds: float = 0.0  # worst lateness of a step's end against its schedule


class Engine:
    """The batch scheduler (module docstring); ``run()`` is the loop."""

    def __init__(self, *, profile, cfg, max_running: int, max_total_tokens: int,
                 model: "ModelFunctions", time_scale: float, noise: bool, rng: random.Random,
                 log: logs.SglangLog, on_complete: Callable[[Generation], None]) -> None:
        self.profile = profile
        self.cfg = cfg
        self.model = model
        self.max_running = max(1, max_running)
        self.max_total_tokens = max(1, max_total_tokens)
        self.scale = time_scale
        self.noise = noise
        self.rng = rng
        self.log = log
        self.on_complete = on_complete
        self.speculative = cfg.speculative_algorithm is not None
        self.draft_tokens = cfg.speculative_num_draft_tokens if self.speculative else 1
        self.cuda_graph_max_bs = 0 if model.disable_cuda_graph else cfg.cuda_graph_max_bs
        self.run_factor = math.exp(rng.gauss(0.0, profile.run_sigma)) if noise and profile.run_sigma else 1.0
        self.step_sigma = profile.step_sigma if noise else 0.0
        self.waiting: deque[Generation] = deque()
        self.running: list[Generation] = []
        self.kv_tokens = 0
        self.stats = EngineStats()
        self._arrived = asyncio.Event()
        self._step_cache: dict[int, float] = {}
        self._interval_tokens = 0
        self._interval_verify = 0
        self._interval_steps = 0
        self._interval_start = time.perf_counter()
        self.busy = True
        self.busy_since = 0.0
        self.window = min(1.0, time_scale / GATHER_FULL_SCALE)  # factor on the gathering windows

    # -- requests in and out
    def submit(self, gen: Generation) -> None:
        gen.arrived = asyncio.get_running_loop().time()
        self.waiting.append(gen)
        self._arrived.set()

    @staticmethod
    def abort(gen: Generation) -> None:
        """Drop the request at the next step boundary (its slot is freed then)."""
        gen.aborted = True

    # -- durations
    def _step_duration(self, batch: int) -> float:
        base = self._step_cache.get(batch)
        if base is None:
            base = self.model.step_seconds(self.profile, self.cfg, batch)
            self._step_cache[batch] = base
        factor = self.scale * self.run_factor
        if self.step_sigma:
            factor *= math.exp(self.rng.gauss(0.0, self.step_sigma))
        return base * factor

    def _prefill_duration(self, tokens: int, seqs: int) -> float:
        base = self.model.prefill_seconds(self.profile, self.cfg, tokens, seqs)
        factor = self.scale * self.run_factor
        if self.step_sigma:
            factor *= math.exp(self.rng.gauss(0.0, self.step_sigma))
        return base * factor

    # -- the loop
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()  # end of the last simulated step (the schedule's anchor)
        self.busy_since = deadline
        freed = 0  # slots freed at the last step's end
        while True:
            free = self.max_running - len(self.running)
            # Replacements of the requests that ended at the last step (closed loop), beyond
            # those already queued.
            target = min(free, len(self.waiting) + freed)
            if not self.running and not self.waiting:
                self.stats.busy_seconds += loop.time() - self.busy_since
                self.busy = False
                self._arrived.clear()
                await self._arrived.wait()
                self.busy = True
                self.busy_since = loop.time()
                if loop.time() - deadline > GATHER_CAP_S * self.window:
                    freed = 0  # too late to be replacements: a fresh burst
            if (freed or not self.running) and len(self.waiting) < free:
                # Requests sent together reach us spread over milliseconds: the workers of a
                # level starting, or the replacements of requests that just ended (closed
                # loop). Gather them into one prefill, as predict() assumes (its clients turn
                # around instantly). Waiting costs no simulated time: the prefill starts at
                # its first request's arrival or at the last step's end, whichever is later.
                cap = GATHER_CAP_S * self.window if not self.running \
                    else 0.8 * self._step_duration_nominal(len(self.running))
                await self._gather(loop, loop.time() + cap, target if freed else 0, free)
            freed = 0
            # Admit and prefill: starts when the previous step ended or when its first request
            # arrived, whichever is later.
            new: list[Generation] = []
            while self.waiting and len(self.running) + len(new) < self.max_running:
                gen = self.waiting.popleft()
                if not gen.aborted:
                    new.append(gen)
            if new:
                deadline = max(deadline, min(g.arrived for g in new))
                tokens = sum(g.prompt_tokens for g in new)
                duration = self._prefill_duration(tokens, len(new))
                deadline += duration
                self.stats.scheduled_seconds += duration
                await _sleep_until(loop, deadline, self.stats)
                self.log.rank(logs.prefill_batch(
                    new_seq=len(new), new_token=tokens, token_usage=self.kv_tokens / self.max_total_tokens,
                    running=len(self.running), queued=len(self.waiting),
                    cuda_graph=len(self.running) + len(new) <= self.cuda_graph_max_bs,
                    input_throughput=tokens / duration if duration > 0 else 0.0,
                ))
                for gen in new:
                    if gen.aborted:
                        continue
                    self.kv_tokens += gen.prompt_tokens
                    self._emit(gen, 1)
                    if gen.finished:
                        self._retire(gen)
                        freed += 1
                    else:
                        self.running.append(gen)
                continue
            # Decode: one step for every running request.
            running = []
            for gen in self.running:
                if gen.aborted:
                    self.kv_tokens -= gen.prompt_tokens + gen.completion_tokens
                else:
                    running.append(gen)
            self.running = running
            if not running:
                continue
            if loop.time() - deadline > 1.0:
                deadline = loop.time()  # stalled (SIGSTOP, starved): do not replay missed steps
            duration = self._step_duration(len(running))
            deadline += duration
            self.stats.scheduled_seconds += duration
            await _sleep_until(loop, deadline, self.stats)
            step_tokens = 0
            still: list[Generation] = []
            for gen in running:
                if gen.aborted:
                    self.kv_tokens -= gen.prompt_tokens + gen.completion_tokens
                    freed += 1
                    continue
                k = self._draw(gen)
                gen.verify_ct += 1
                if gen.histogram is not None:
                    gen.histogram[min(k - 1, len(gen.histogram) - 1)] += 1
                step_tokens += k
                self._emit(gen, k)
                if gen.finished:
                    self._retire(gen)
                    freed += 1
                else:
                    still.append(gen)
            self.running = still
            self.stats.decode_tokens += step_tokens
            self.stats.verify_steps += len(running)
            self._interval_tokens += step_tokens
            self._interval_verify += len(running)
            self._interval_steps += 1
            if self._interval_steps >= DECODE_LOG_INTERVAL:
                self._log_decode(len(running))

    def _step_duration_nominal(self, batch: int) -> float:
        base = self._step_cache.get(batch)
        if base is None:
            base = self.model.step_seconds(self.profile, self.cfg, batch)
            self._step_cache[batch] = base
        return base * self.scale * self.run_factor

    async def _gather(self, loop: asyncio.AbstractEventLoop, until: float, expected: int, slots: int) -> None:
        """Wait for arrivals until `slots` requests wait or `until` passes; once one waits,
        stop when none arrives for REPLACEMENT_QUIET_S (fewer than `expected` wait) or
        BURST_QUIET_S (at least `expected` wait)."""
        while len(self.waiting) < slots:
            timeout = until - loop.time()
            if self.waiting:
                quiet = REPLACEMENT_QUIET_S if len(self.waiting) < expected else BURST_QUIET_S
                timeout = min(timeout, quiet * self.window)
            if timeout <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except asyncio.TimeoutError:
                return

    def _draw(self, gen: Generation) -> int:
        remaining = gen.remaining
        if gen.accept_cdf is None:
            # Same rounding as autospec.sim.predict.noiseless_emit.
            total = gen.accumulator + gen.accept_mean
            k = max(int(math.floor(total + 1e-9)), 1)
            gen.accumulator = max(total - k, 0.0)
        else:
            k = bisect.bisect_left(gen.accept_cdf, self.rng.random()) + 1
            k = min(k, len(gen.accept_cdf))
        return min(k, remaining)

    def _emit(self, gen: Generation, count: int) -> None:
        if count <= 0:
            return
        new_text = gen.next_words(count)
        gen.text += new_text
        gen.completion_tokens += count
        self.kv_tokens += count
        self.stats.emitted_tokens += count
        if gen.completion_tokens >= gen.stop_at:
            gen.finished = True
        gen.events += 1
        try:
            gen.on_step(gen, new_text)
        except Exception as exc:  # noqa: BLE001 - one broken response must not stop the engine
            gen.aborted = True
            self.log.info(f"[http_server] Error: {exc!r}")

    def _retire(self, gen: Generation) -> None:
        self.kv_tokens -= gen.prompt_tokens + gen.completion_tokens
        self.stats.completed += 1
        self.on_complete(gen)

    def _log_decode(self, batch: int) -> None:
        now = time.perf_counter()
        elapsed = max(now - self._interval_start, 1e-9)
        throughput = self._interval_tokens / elapsed
        self.stats.last_gen_throughput = throughput
        accept_len = accept_rate = None
        if self.speculative:
            accept_len = self._interval_tokens / max(self._interval_verify, 1)
            accept_rate = (accept_len - 1.0) / max(self.draft_tokens - 1, 1)
        self.log.rank(logs.decode_batch(
            running=batch, tokens=self.kv_tokens, token_usage=self.kv_tokens / self.max_total_tokens,
            accept_len=accept_len, accept_rate=accept_rate, cuda_graph=batch <= self.cuda_graph_max_bs,
            gen_throughput=throughput, queued=len(self.waiting),
        ))
        self._interval_tokens = self._interval_verify = self._interval_steps = 0
        self._interval_start = now


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float, stats: EngineStats) -> None:
    delay = deadline - loop.time()
    await asyncio.sleep(delay if delay > 0 else 0)
    lag = loop.time() - deadline
    if lag > stats.max_lag_seconds:
        stats.max_lag_seconds = lag


@dataclass(frozen=True)
class ModelFunctions:
    """The model API the server calls (injected so the server module stays testable)."""

    step_seconds: Callable
    prefill_seconds: Callable
    accept_length: Callable
    accept_length_distribution: Callable
    classify_prompt: Callable
    disable_cuda_graph: bool = False


# ---------------------------------------------------------------- HTTP


class HttpRequest:
    __slots__ = ("method", "path", "headers", "body", "keep_alive")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes, keep_alive: bool):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive


class BadRequest(Exception):
    pass


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
_TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)  # Linux only
_MAX_HEADER = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024


def _parse_request(buffer: bytearray) -> HttpRequest | None:
    """Parse one request from the front of ``buffer`` (consuming it); None if incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > _MAX_HEADER:
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
    if length > _MAX_BODY:
        raise BadRequest("body too large")
    if len(buffer) < end + 4 + length:
        return None
    body = bytes(buffer[end + 4:end + 4 + length])
    del buffer[:end + 4 + length]
    connection = headers.get("connection", "").lower()
    keep_alive = version == "HTTP/1.1" and connection != "close" or connection == "keep-alive"
    path = target.split("?", 1)[0]
    return HttpRequest(method.upper(), path, headers, body, keep_alive)


class HttpConnection(asyncio.Protocol):
    """One client connection; requests on it are served one at a time, in order."""

    def __init__(self, app: "SimServer") -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False
        self.closed = False
        self.client = "127.0.0.1:0"
        self.current: Generation | None = None
        self.keep_alive = True

    # -- asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.client = f"{peer[0]}:{peer[1]}"
        self.app.connections.add(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()

    def eof_received(self):
        self._lost()
        return False

    def connection_lost(self, exc) -> None:
        self._lost()
        self.app.connections.discard(self)

    def _lost(self) -> None:
        self.closed = True
        if self.current is not None and not self.current.finished:
            Engine.abort(self.current)
        self.current = None

    # -- request handling
    def _next(self) -> None:
        if self.busy or self.closed:
            return
        try:
            request = _parse_request(self.buffer)
        except BadRequest as exc:
            self.keep_alive = False
            self.busy = True
            self.send_json(400, {"detail": str(exc)})
            return
        if request is None:
            if self.buffer and self.transport is not None:
                # A client that sends headers and body in two writes with Nagle on would
                # otherwise wait for our delayed ACK (~40 ms on Linux) before sending the body.
                sock = self.transport.get_extra_info("socket")
                if sock is not None and _TCP_QUICKACK is not None:
                    try:
                        sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
                    except OSError:
                        pass
            return
        self.busy = True
        self.keep_alive = request.keep_alive
        self.app.dispatch(self, request)

    def done(self) -> None:
        """The current response is complete; serve the next request or close."""
        self.current = None
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
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}",
            f"date: {formatdate(usegmt=True)}",
            "server: uvicorn",
        ]
        if content_type:
            lines.append(f"content-type: {content_type}")
        lines.append(extra)
        if not self.keep_alive:
            lines.append("connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send_bytes(self, status: int, body: bytes, content_type: str | None, method: str = "", path: str = "") -> None:
        if method:
            self.app.access(self.client, method, path, status)
        if not self.closed and self.transport is not None:
            self.transport.write(self._head(status, content_type, f"content-length: {len(body)}") + body)
        self.done()

    def send_json(self, status: int, obj: Any, method: str = "", path: str = "") -> None:
        self.send_bytes(status, _dumps(obj), "application/json", method, path)

    def start_stream(self, method: str, path: str) -> None:
        self.app.access(self.client, method, path, 200)
        if not self.closed and self.transport is not None:
            self.transport.write(self._head(200, "text/event-stream; charset=utf-8", "transfer-encoding: chunked"))

    def stream_event(self, payload: bytes) -> None:
        """One SSE event ``data: <payload>\\n\\n`` as one HTTP chunk."""
        if self.closed or self.transport is None:
            return
        data = b"data: " + payload + b"\n\n"
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(b"0\r\n\r\n")
        self.done()

    def cut_stream(self) -> None:
        """Close mid-stream without the terminating chunk (a truncated response)."""
        self.keep_alive = False
        if self.current is not None and not self.current.finished:
            Engine.abort(self.current)
        self.current = None
        if self.transport is not None:
            self.transport.close()
        self.closed = True
        self.busy = False


# ---------------------------------------------------------------- response shapes


class ApiError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError"):
        super().__init__(message)
        self.status = status
        self.err_type = err_type


def _error_body(status: int, message: str, err_type: str) -> JSON:
    # sglang entrypoints/openai/protocol.py ErrorResponse
    return {"object": "error", "message": message, "type": err_type, "param": None, "code": status}


@dataclass
class Parsed:
    """A generation request, API-independent."""

    api: str  # "generate" | "completions" | "chat"
    prompt_text: str | None
    prompt_tokens: int
    max_new_tokens: int
    temperature: float
    ignore_eos: bool
    stream: bool
    include_usage: bool
    model: str


def _as_int(value: Any, name: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise ApiError(400, f"{name} must be an integer, got {value!r}")
    return int(value)


def _as_float(value: Any, name: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{name} must be a number, got {value!r}")
    return float(value)


def _count_words(text: str) -> int:
    return len(text.split())


def parse_generate(body: JSON, served_model: str) -> Parsed:
    """SGLang's native /generate body (sglang io_struct.GenerateReqInput, the fields the sim uses)."""
    text = body.get("text")
    ids = body.get("input_ids")
    if isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list)):
        raise ApiError(400, "batched /generate requests are not supported by the simulator; send one prompt")
    if text is None and ids is None:
        raise ApiError(400, "Either text, input_ids or input_embeds should be provided.")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise ApiError(400, "sampling_params must be an object")
    if text is not None:
        if not isinstance(text, str):
            raise ApiError(400, "text must be a string")
        prompt_text, prompt_tokens = text, _count_words(text)
    else:
        prompt_text, prompt_tokens = None, len(ids)
    return Parsed(
        api="generate", prompt_text=prompt_text, prompt_tokens=prompt_tokens,
        max_new_tokens=_as_int(params.get("max_new_tokens"), "max_new_tokens", 128),
        temperature=_as_float(params.get("temperature"), "temperature", 1.0),
        ignore_eos=bool(params.get("ignore_eos", False)),
        stream=bool(body.get("stream", False)), include_usage=False, model=served_model,
    )


def parse_completions(body: JSON, served_model: str) -> Parsed:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt_text, prompt_tokens = prompt, _count_words(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt_text, prompt_tokens = None, len(prompt)
    elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        return parse_completions({**body, "prompt": prompt[0]}, served_model)
    else:
        raise ApiError(400, "prompt must be a string or a list of token ids (one prompt per request)")
    options = body.get("stream_options") or {}
    max_tokens = _as_int(body.get("max_tokens"), "max_tokens", 16)
    if max_tokens is not None and max_tokens <= 0:
        raise ApiError(400, "max_tokens must be positive")
    return Parsed(
        api="completions", prompt_text=prompt_text, prompt_tokens=prompt_tokens,
        max_new_tokens=max_tokens, temperature=_as_float(body.get("temperature"), "temperature", 1.0),
        ignore_eos=bool(body.get("ignore_eos", False)), stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        model=str(body.get("model") or served_model),
    )


def parse_chat(body: JSON, served_model: str, context_len: int) -> Parsed:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    prompt_text = "\n".join(parts)
    prompt_tokens = _count_words(prompt_text)
    options = body.get("stream_options") or {}
    max_tokens = _as_int(body.get("max_completion_tokens"), "max_completion_tokens", None)
    if max_tokens is None:
        max_tokens = _as_int(body.get("max_tokens"), "max_tokens", None)
    if max_tokens is None:
        max_tokens = max(context_len - prompt_tokens, 1)
    return Parsed(
        api="chat", prompt_text=prompt_text, prompt_tokens=prompt_tokens, max_new_tokens=max_tokens,
        temperature=_as_float(body.get("temperature"), "temperature", 1.0),
        ignore_eos=bool(body.get("ignore_eos", False)), stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
        model=str(body.get("model") or served_model),
    )


class Responder:
    """Turns a Generation's steps into the response of one API on one connection."""

    def __init__(self, server: "SimServer", conn: HttpConnection, parsed: Parsed, method: str, path: str,
                 truncate_after: int | None) -> None:
        self.server = server
        self.conn = conn
        self.parsed = parsed
        self.method = method
        self.path = path
        self.truncate_after = truncate_after
        self.created = int(time.time())
        self.role_sent = False

    # meta_info as sglang 0.5.16 returns it (eagle-probe.json), spec fields when speculating
    def meta_info(self, gen: Generation) -> JSON:
        meta: JSON = {
            "id": gen.rid,
            "finish_reason": gen.finish_reason(),
            "prompt_tokens": gen.prompt_tokens,
            "weight_version": "default",
            "completion_tokens": gen.completion_tokens,
            "cached_tokens": 0,
            "e2e_latency": time.perf_counter() - gen.created,
        }
        if gen.histogram is not None:
            verify = max(gen.verify_ct, 1)
            accepted_drafts = max(gen.completion_tokens - 1 - gen.verify_ct, 0)
            proposed = gen.verify_ct * (self.server.engine.draft_tokens - 1)
            meta["spec_accept_rate"] = accepted_drafts / proposed if proposed else 0.0
            meta["spec_accept_length"] = gen.completion_tokens / verify
            meta["spec_verify_ct"] = gen.verify_ct
            meta["spec_accept_histogram"] = list(gen.histogram)
        return meta

    def usage(self, gen: Generation, exclude_none: bool) -> JSON:
        usage: JSON = {"prompt_tokens": gen.prompt_tokens,
                       "total_tokens": gen.prompt_tokens + gen.completion_tokens,
                       "completion_tokens": gen.completion_tokens}
        if not exclude_none:
            usage["prompt_tokens_details"] = None
        usage["reasoning_tokens"] = 0
        return usage

    def on_step(self, gen: Generation, new_text: str) -> None:
        if self.parsed.stream:
            self._stream_step(gen, new_text)
            if gen.finished:
                self.stream_end(gen)
            elif self.truncate_after is not None and gen.events >= self.truncate_after:
                self.conn.cut_stream()
        elif gen.finished:
            self.conn.send_json(200, self.full_response(gen), self.method, self.path)

    def _stream_step(self, gen: Generation, new_text: str) -> None:
        api = self.parsed.api
        if api == "generate":
            payload = {"text": gen.text, "meta_info": self.meta_info(gen)}
        elif api == "completions":
            reason = gen.finish_reason()
            payload = {"id": gen.rid, "object": "text_completion", "created": self.created,
                       "model": self.parsed.model,
                       "choices": [{"index": 0, "text": new_text, "logprobs": None,
                                    "finish_reason": reason["type"] if reason else None,
                                    "matched_stop": reason.get("matched") if reason else None}],
                       "usage": None}
        else:
            if not self.role_sent:
                self.role_sent = True
                self.conn.stream_event(_dumps(self._chat_chunk(gen, {"role": "assistant", "content": ""}, None)))
            payload = self._chat_chunk(gen, {"role": None, "content": new_text}, None)
        self.conn.stream_event(_dumps(payload))

    def _chat_chunk(self, gen: Generation, delta: JSON, finish: str | None, matched: Any = None) -> JSON:
        full_delta = {"role": delta.get("role"), "content": delta.get("content"),
                      "reasoning_content": None, "tool_calls": None}
        return {"id": gen.rid, "object": "chat.completion.chunk", "created": self.created,
                "model": self.parsed.model,
                "choices": [{"index": 0, "delta": full_delta, "logprobs": None,
                             "finish_reason": finish, "matched_stop": matched}],
                "usage": None}

    def stream_end(self, gen: Generation) -> None:
        api = self.parsed.api
        reason = gen.finish_reason() or {}
        if api == "chat":
            self.conn.stream_event(_dumps(self._chat_chunk(gen, {}, reason.get("type"), reason.get("matched"))))
        if api in ("completions", "chat") and self.parsed.include_usage:
            chunk: JSON = {"id": gen.rid,
                           "object": "text_completion" if api == "completions" else "chat.completion.chunk",
                           "created": self.created, "model": self.parsed.model, "choices": [],
                           "usage": self.usage(gen, exclude_none=api == "completions")}
            self.conn.stream_event(_dumps(chunk))
        self.conn.stream_event(b"[DONE]")
        self.conn.end_stream()

    def full_response(self, gen: Generation) -> JSON:
        api = self.parsed.api
        reason = gen.finish_reason() or {}
        if api == "generate":
            return {"text": gen.text, "meta_info": self.meta_info(gen)}
        usage = self.usage(gen, exclude_none=False)
        if api == "completions":
            choice = {"index": 0, "text": gen.text, "logprobs": None, "finish_reason": reason.get("type"),
                      "matched_stop": reason.get("matched")}
            return {"id": gen.rid, "object": "text_completion", "created": self.created,
                    "model": self.parsed.model, "choices": [choice], "usage": usage,
                    "metadata": {"weight_version": "default"}}
        message = {"role": "assistant", "content": gen.text, "reasoning_content": None, "tool_calls": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": reason.get("type"),
                  "matched_stop": reason.get("matched")}
        return {"id": gen.rid, "object": "chat.completion", "created": self.created,
                "model": self.parsed.model, "choices": [choice], "usage": usage,
                "metadata": {"weight_version": "default"}}


# ---------------------------------------------------------------- the server process


@dataclass
class ServerSetup:
    """Everything the server needs, resolved by ``__main__`` before the loop starts."""

    profile: Any
    cfg: Any
    outcome: Any
    model: ModelFunctions
    server_args: dict[str, Any]
    host: str
    port: int
    served_model_name: str
    model_path: str
    time_scale: float
    noise: bool
    seed: int
    load_seconds: float
    faults: Faults
    state_dir: str | None
    cmdline: str
    scheduler_child: int | None = None
    log_stream: Any = None


class SimServer:
    """SGLang's start-up, HTTP surface, memory record and faults around the Engine."""

    def __init__(self, setup: ServerSetup) -> None:
        self.setup = setup
        self.profile = setup.profile
        self.cfg = setup.cfg
        self.outcome = setup.outcome
        self.faults = setup.faults
        prefix = " TP0" if self.cfg.tp_size > 1 else ""
        self.log = logs.SglangLog(setup.log_stream or sys.stderr, rank_prefix=prefix)
        self.state = GpuStateFile(setup.state_dir)
        self.gpus = list(range(self.cfg.tp_size * max(self.cfg.pp_size, 1)))
        self.rng = random.Random(setup.seed)
        self.fault_rng = random.Random(setup.seed + 1)
        self.eos_rng = random.Random(setup.seed + 2)
        self.ready = False
        self.shutting_down = False
        self.connections: set[HttpConnection] = set()
        self.zombie_pid: int | None = None
        self._accept_cache: dict[tuple[str, float], tuple[float, list[float] | None]] = {}
        self._workload_cache: dict[str, str] = {}
        self._request_counter = 0
        self._crash_scheduled = False
        self._stop = asyncio.Event()
        self.engine = Engine(
            profile=self.profile, cfg=self.cfg, max_running=self.outcome.max_running_requests,
            max_total_tokens=self.outcome.max_total_num_tokens, model=setup.model,
            time_scale=setup.time_scale, noise=setup.noise, rng=self.rng, log=self.log,
            on_complete=self._on_complete,
        )
        self.typical_output_len = int(self._extra("typical_output_len", DEFAULT_TYPICAL_OUTPUT_LEN))
        self.architecture = str(self._extra("architecture", "LlamaForCausalLM"))

    def _extra(self, key: str, default: Any) -> Any:
        """An optional top-level profile key the model does not define (see docs/simulator.md)."""
        return getattr(self.profile, "extra", {}).get(key, default)

    # ------------------------------------------------------------ process lifecycle
    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: HttpConnection(self), self.setup.host, self.setup.port,
                                          reuse_address=True, backlog=1024)
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._on_signal, signum)
        engine_task = loop.create_task(self.engine.run())
        startup_task = loop.create_task(self._startup())
        stop_task = loop.create_task(self._stop.wait())
        pending = {engine_task, startup_task, stop_task}
        while stop_task in pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(not task.cancelled() and task.exception() is not None for task in done):
                break
        status = 0
        for task in (engine_task, startup_task):
            if task.done() and not task.cancelled() and task.exception() is not None:
                # A bug in the simulator itself: say so and exit non-zero instead of hanging.
                error = task.exception()
                self.log.raw(traceback.format_exception(type(error), error, error.__traceback__))
                status = 1
        for task in (startup_task, engine_task, stop_task):
            task.cancel()
        server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        self.cleanup()
        return status

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGTERM:
            self.log.info(logs.SIGTERM_RECEIVED)
        if self.faults.ignore_sigterm:
            return
        self.shutting_down = True
        self._stop.set()

    def cleanup(self) -> None:
        """Forget the GPU memory and stop the scheduler child (idempotent; not the zombie)."""
        self.state.remove()
        child = self.setup.scheduler_child
        if child:
            self.setup.scheduler_child = None
            try:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            except (ProcessLookupError, ChildProcessError):
                pass

    def die(self, frames, error_line: str) -> None:
        """SGLang's failure chain, then death by SIGKILL (what kill_process_tree does)."""
        lines = logs.scheduler_traceback(frames, error_line)
        self.log.rank(lines[0])
        self.log.raw(lines[1:])
        self.log.info(logs.SIGQUIT_FROM_CHILD)
        pid = os.getpid()
        self.log.info(f"kill_process_tree called: parent_pid={pid}, include_parent=True, pid={pid}")
        self.log.flush()
        self.cleanup()
        sys.stdout.flush()
        os.kill(pid, signal.SIGKILL)

    def _mib(self, gb: float) -> float:
        return gb * 1e9 / 2**20

    # ------------------------------------------------------------ start-up
    async def _startup(self) -> None:
        profile, cfg, outcome, faults = self.profile, self.cfg, self.outcome, self.faults
        scale = self.setup.time_scale
        load = self.setup.load_seconds * scale
        version = profile.sglang_version
        total = profile.gpu_mem_gb
        overhead = getattr(profile, "runtime_overhead_gb", 1.0)
        avail0 = max(total - overhead, 0.0)
        arch = self.architecture
        speculative = cfg.speculative_algorithm is not None

        self.log.rank(logs.load_weight_begin(avail0))
        if faults.hang_at_start:
            await asyncio.Event().wait()
        if faults.crash_at_start:
            await asyncio.sleep(0.5 * load)
            self.die(logs.SCHEDULER_INIT_FRAMES,
                     "RuntimeError: CUDA error: an illegal memory access was encountered\n"
                     "CUDA kernel errors might be asynchronously reported at some other API call, "
                     "so the stacktrace below might be incorrect.\n"
                     "For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
            return
        await asyncio.sleep(0.7 * load)
        if outcome.status == "weights_oom":
            self.state.write(self.gpus, self._mib(total), self.setup.cmdline)
            self.die(logs.SCHEDULER_WEIGHTS_FRAMES, outcome.message)
            return
        # Target first, then the draft model (its own load and KV lines, as in 0.5.16's log).
        weights = outcome.weights_gb
        shards = cfg.tp_size * max(cfg.pp_size, 1)
        draft = profile.draft_weights_gb / shards if speculative and cfg.speculative_algorithm != "NGRAM" else 0.0
        draft = min(draft, weights)
        avail = max(avail0 - (weights - draft), 0.0)
        self.log.rank(logs.load_weight_end(0.7 * load, arch, avail, weights - draft))
        if draft:
            self.log.rank(logs.load_weight_begin(avail))
            avail = max(avail - draft, 0.0)
            draft_arch = str(self._extra("draft_architecture", f"{arch}Eagle"))
            self.log.rank(logs.load_weight_end(0.0, draft_arch, avail, draft))
        self.state.write(self.gpus, self._mib(weights + overhead), self.setup.cmdline)
        if faults.zombie_child:
            self.zombie_pid = spawn_zombie_child(self.setup.state_dir, self.gpus,
                                                 self._mib(weights + overhead), self.setup.cmdline + " [scheduler]")
        await asyncio.sleep(0.05 * load)
        if outcome.status == "kv_pool_too_small":
            self.die(logs.SCHEDULER_INIT_FRAMES, outcome.message)
            return
        kv = outcome.kv_cache_gb
        draft_kv = kv * draft / weights if draft and weights else 0.0
        # Free after the static pool: what the model leaves (its reserves count with the target's pool).
        avail_kv = max(avail - kv, 0.0) if outcome.status != "ok" else outcome.available_gpu_mem_gb + outcome.cuda_graph_gb
        self.log.rank(logs.kv_cache_allocated(outcome.max_total_num_tokens, (kv - draft_kv) / 2, (kv - draft_kv) / 2))
        self.log.rank(logs.memory_pool_end(avail_kv + draft_kv))
        if draft_kv:
            self.log.rank(logs.kv_cache_allocated(outcome.max_total_num_tokens, draft_kv / 2, draft_kv / 2))
            self.log.rank(logs.memory_pool_end(avail_kv))
        self.state.write(self.gpus, self._mib(max(total - avail_kv, 0.0)), self.setup.cmdline)
        graph_kwargs = dict(speculative=speculative, num_tokens_per_req=cfg.speculative_num_draft_tokens or 1,
                            max_bs=cfg.cuda_graph_max_bs)
        if outcome.status in ("cuda_graph_oom", "invalid_draft_tree"):
            for line in logs.graph_capture_begin_only(version, avail_gb=avail_kv, **graph_kwargs):
                self.log.rank(line)
            await asyncio.sleep(0.1 * load)
            self.die(logs.SCHEDULER_GRAPH_FRAMES, outcome.message.rstrip("\n"))
            return
        if outcome.status != "ok":
            self.die(logs.SCHEDULER_INIT_FRAMES, outcome.message)
            return
        capture_s = 0.25 * load
        if not self.setup.model.disable_cuda_graph:
            begin, end = logs.graph_capture_lines(version, avail_before_gb=avail_kv,
                                                  avail_after_gb=outcome.available_gpu_mem_gb,
                                                  elapsed_s=capture_s, **graph_kwargs)
            for line in begin:
                self.log.rank(line)
            await asyncio.sleep(capture_s)
            for line in end:
                self.log.rank(line)
        else:
            await asyncio.sleep(capture_s)
        self.state.write(self.gpus, self._mib(outcome.gpu_mem_used_gb), self.setup.cmdline)
        self.log.rank(logs.startup_summary(
            max_total_num_tokens=outcome.max_total_num_tokens,
            chunked_prefill_size=self.setup.server_args.get("chunked_prefill_size") or 8192,
            max_prefill_tokens=self.setup.server_args.get("max_prefill_tokens") or 16384,
            max_running_requests=outcome.max_running_requests, context_len=outcome.context_len,
            available_gpu_mem_gb=outcome.available_gpu_mem_gb,
        ))
        for line in logs.uvicorn_startup(os.getpid(), self.setup.host, self.setup.port):
            self.log.info(line)
        await asyncio.sleep(profile.warmup_seconds * scale + faults.slow_start_s)
        self.log.rank(logs.prefill_batch(new_seq=1, new_token=WARMUP_PROMPT_TOKENS, token_usage=0.0, running=0,
                                         queued=0, cuda_graph=True, input_throughput=WARMUP_PROMPT_TOKENS / 0.1))
        self.log.info(logs.access_line("127.0.0.1:" + str(self.setup.port + 1), "POST", "/generate", 200))
        self.ready = True
        self.log.info(logs.READY)

    # ------------------------------------------------------------ requests
    def access(self, client: str, method: str, path: str, status: int) -> None:
        self.log.info(logs.access_line(client, method, path, status))

    def dispatch(self, conn: HttpConnection, request: HttpRequest) -> None:
        method, path = request.method, request.path
        handler = _ROUTES.get(path)
        if handler is None:
            conn.send_json(404, {"detail": "Not Found"}, method, path)
            return
        allowed, func = handler
        if method not in allowed:
            conn.send_json(405, {"detail": "Method Not Allowed"}, method, path)
            return
        try:
            func(self, conn, request)
        except ApiError as exc:
            conn.send_json(exc.status, _error_body(exc.status, str(exc), exc.err_type), method, path)

    def _readiness(self, conn: HttpConnection, request: HttpRequest) -> None:
        status = 200 if self.ready and not self.shutting_down else 503
        conn.send_bytes(status, b"", None, request.method, request.path)

    def model_info(self) -> JSON:
        return {"model_path": self.setup.model_path, "tokenizer_path": self.setup.model_path,
                "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
                "has_image_understanding": False, "has_audio_understanding": False,
                "model_type": str(self._extra("model_type", "llama")), "architectures": [self.architecture]}

    def _model_info(self, conn: HttpConnection, request: HttpRequest) -> None:
        if request.path == "/get_model_info":
            self.log.info("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                          "Please use '/model_info' instead.")
        conn.send_json(200, self.model_info(), request.method, request.path)

    def server_info(self) -> JSON:
        stats = self.engine.stats
        state: JSON = {"last_gen_throughput": stats.last_gen_throughput,
                       "memory_usage": {"weight": self.outcome.weights_gb, "kvcache": self.outcome.kv_cache_gb,
                                        "token_capacity": self.outcome.max_total_num_tokens,
                                        "graph": self.outcome.cuda_graph_gb}}
        # Simulator-only counters (SGLang has no such keys): schedule keeping, for benchmarks.
        state.update({"sim_emitted_tokens": stats.emitted_tokens, "sim_scheduled_seconds": stats.scheduled_seconds,
                      "sim_busy_seconds": stats.busy_seconds + (time.monotonic() - self.engine.busy_since
                                                                if self.engine.busy else 0.0),
                      "sim_max_lag_seconds": stats.max_lag_seconds})
        if self.cfg.speculative_algorithm is not None:
            state["avg_spec_accept_length"] = stats.decode_tokens / stats.verify_steps if stats.verify_steps else 0.0
        info = dict(self.setup.server_args)
        info.update({"status": "ready" if self.ready else "starting",
                     "max_total_num_tokens": self.outcome.max_total_num_tokens,
                     "max_req_input_len": max(self.outcome.context_len - 1, 1),
                     "internal_states": [state], "version": self.profile.sglang_version})
        return info

    def _server_info(self, conn: HttpConnection, request: HttpRequest) -> None:
        if request.path == "/get_server_info":
            self.log.info("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                          "Please use '/server_info' instead.")
        conn.send_json(200, self.server_info(), request.method, request.path)

    def _models(self, conn: HttpConnection, request: HttpRequest) -> None:
        card = {"id": self.setup.served_model_name, "object": "model", "created": int(time.time()),
                "owned_by": "sglang", "root": self.setup.model_path, "parent": None,
                "max_model_len": self.outcome.context_len}
        conn.send_json(200, {"object": "list", "data": [card]}, request.method, request.path)

    def _generation(self, conn: HttpConnection, request: HttpRequest) -> None:
        if not self.ready or self.shutting_down:
            raise ApiError(503, "The server is not ready yet.", "ServiceUnavailable")
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            raise ApiError(400, "request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        path = request.path
        if path == "/generate":
            parsed = parse_generate(body, self.setup.served_model_name)
        elif path == "/v1/completions":
            parsed = parse_completions(body, self.setup.served_model_name)
        else:
            parsed = parse_chat(body, self.setup.served_model_name, self.outcome.context_len)
        if parsed.max_new_tokens is None or parsed.max_new_tokens < 0:
            raise ApiError(400, "max_new_tokens must be a non-negative integer")
        if parsed.prompt_tokens + parsed.max_new_tokens > self.outcome.context_len:
            raise ApiError(400, (f"Requested token count exceeds the model's maximum context length of "
                                 f"{self.outcome.context_len} tokens. You requested a total of "
                                 f"{parsed.prompt_tokens + parsed.max_new_tokens} tokens: "
                                 f"{parsed.prompt_tokens} tokens from the input messages and "
                                 f"{parsed.max_new_tokens} tokens for the completion. Please reduce the number "
                                 f"of tokens in the input messages or the completion to fit within the limit."))
        truncate_after = None
        if self.faults.error_rate and self.fault_rng.random() < self.faults.error_rate:
            if parsed.stream and self.fault_rng.random() < 0.5:
                truncate_after = 1 + self.fault_rng.randrange(3)
            else:
                raise ApiError(500, "Internal server error (simulated: --sim-fault error_rate)", "InternalServerError")
        self._start_generation(conn, parsed, request.method, path, truncate_after)

    def _accept(self, workload: str, temperature: float) -> tuple[float, list[float] | None]:
        key = (workload, temperature)
        cached = self._accept_cache.get(key)
        if cached is None:
            model = self.setup.model
            mean = model.accept_length(self.profile, self.cfg, workload, temperature)
            cdf = None
            if self.setup.noise and self.cfg.speculative_algorithm is not None:
                probs = model.accept_length_distribution(self.profile, self.cfg, workload, temperature)
                running, cdf = 0.0, []
                for p in probs:
                    running += p
                    cdf.append(running)
                cdf[-1] = 1.0
            cached = (mean, cdf)
            self._accept_cache[key] = cached
        return cached

    def _workload(self, text: str | None) -> str:
        if text is None:
            return "synthetic"
        kind = self._workload_cache.get(text)
        if kind is None:
            kind = self.setup.model.classify_prompt(text)
            if len(self._workload_cache) < 4096:
                self._workload_cache[text] = kind
        return kind

    def _start_generation(self, conn: HttpConnection, parsed: Parsed, method: str, path: str,
                          truncate_after: int | None) -> None:
        self._request_counter += 1
        workload = self._workload(parsed.prompt_text)
        mean, cdf = self._accept(workload, parsed.temperature)
        stop_at = parsed.max_new_tokens
        stopped_early = False
        if not parsed.ignore_eos:
            # A seeded "EOS": exponential around the profile's typical answer length.
            eos_at = 1 + int(self.eos_rng.expovariate(1.0 / self.typical_output_len))
            if eos_at < stop_at:
                stop_at, stopped_early = eos_at, True
        responder = Responder(self, conn, parsed, method, path, truncate_after)
        gen = Generation(
            rid=uuid.uuid4().hex, prompt_tokens=parsed.prompt_tokens, max_new_tokens=parsed.max_new_tokens,
            stop_at=stop_at, workload=workload, temperature=parsed.temperature, accept_mean=mean,
            accept_cdf=cdf, on_step=responder.on_step, token_state=self._request_counter * 7919 + 17,
            histogram=[0] * self.engine.draft_tokens if self.cfg.speculative_algorithm is not None else None,
        )
        gen.stopped_at_eos = stopped_early
        if stop_at == 0:  # max_new_tokens=0: answered at once, no engine step
            gen.finished = True
            if parsed.stream:
                conn.start_stream(method, path)
                responder.stream_end(gen)
            else:
                conn.send_json(200, responder.full_response(gen), method, path)
            return
        conn.current = gen
        if parsed.stream:
            conn.start_stream(method, path)
        self.engine.submit(gen)

    def _on_complete(self, gen: Generation) -> None:
        limit = self.faults.crash_after_requests
        if limit is not None and self.engine.stats.completed >= limit and not self._crash_scheduled:
            self._crash_scheduled = True
            loop = asyncio.get_running_loop()
            loop.call_later(0.05, self.die, logs.SCHEDULER_LOOP_FRAMES,
                            "RuntimeError: CUDA error: an illegal memory access was encountered")


_ROUTES: dict[str, tuple[tuple[str, ...], Callable]] = {
    "/health": (("GET",), SimServer._readiness),
    "/health_generate": (("GET",), SimServer._readiness),
    "/ready": (("GET",), SimServer._readiness),
    "/model_info": (("GET",), SimServer._model_info),
    "/get_model_info": (("GET",), SimServer._model_info),
    "/server_info": (("GET",), SimServer._server_info),
    "/get_server_info": (("GET",), SimServer._server_info),
    "/v1/models": (("GET",), SimServer._models),
    "/generate": (("POST", "PUT"), SimServer._generation),
    "/v1/completions": (("POST",), SimServer._generation),
    "/v1/chat/completions": (("POST",), SimServer._generation),
}
