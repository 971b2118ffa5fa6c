"""SGLang's HTTP surface, served over the simulator's engine.

Routes (sglang 0.5.23 ``entrypoints/http_server.py``; the ``/get_*`` aliases log SGLang's
deprecation warning):

=============================================  ===================================================
``GET /health``, ``/health_generate``, ``/ready``  503 until load and warmup are done (SGLang
                                               routes ``/health`` to the same handler), 200 after,
                                               503 again once SIGTERM arrived
``GET /model_info`` (``/get_model_info``)      answers before warmup (not a readiness signal)
``GET /server_info`` (``/get_server_info``)    resolved ServerArgs + ``internal_states[0]``
                                               (``avg_spec_accept_length``, cumulative since launch,
                                               plus the simulator-only ``sim_*`` counters)
``GET /v1/models``                             one model card
``GET|POST /flush_cache``                      SGLang's text answer (the sim has no prefix cache)
``GET|POST /freeze_gc``                        SGLang's text answer (the sim has no collector pauses)
``POST /generate`` (also PUT), ``/v1/completions``, ``/v1/chat/completions``  generation
=============================================  ===================================================

Generation: 503 before ready; 400 for bad bodies or prompt + max tokens beyond the context
(SGLang's wording); requests with ``ignore_eos`` false stop at a seeded "EOS" (exponential
around the profile's ``typical_output_len``, default 400 tokens; finish_reason ``stop``);
the workload kind is ``classify_prompt(prompt)`` (token-id prompts: "synthetic") and, with
``temperature``, sets the acceptance; with noise on, each request's accept length is moved
by its effect, a fixed function of its prompt and its position among the launch's
generation requests (`variation.RequestVariation`). The ``error_rate`` fault answers 500
or cuts a stream.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autospec.sim import logs
from autospec.sim.acceptance import accept_length, accept_length_distribution
from autospec.sim.engine import Engine, Generation
from autospec.sim.http import HttpConnection, HttpRequest
from autospec.sim.parsing import ApiError, Parsed, error_body, parse_chat, parse_completions, parse_generate
from autospec.sim.prompts import classify_prompt
from autospec.sim.responses import Responder
from autospec.sim.variation import shifted_distribution

if TYPE_CHECKING:
    from autospec.sim.server import ServerSetup

__all__ = ["Api"]

JSON = dict[str, Any]
DEFAULT_TYPICAL_OUTPUT_LEN = 400  # median length of an EOS-terminated answer (profile extra)
FLUSH_CACHE_TEXT = (  # sglang 0.5.16 http_server.flush_cache, success
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)
FREEZE_GC_TEXT = "Garbage collection frozen.\n"  # sglang 0.5.16 http_server.freeze_gc_async
_CACHE_LIMIT = 4096  # prompts whose workload kind is remembered


class Api:
    """The HTTP application (``autospec.sim.http.Application``): routes requests, admits
    generations into the engine. ``ready``/``shutting_down`` are set by the server."""

    def __init__(self, setup: ServerSetup, engine: Engine, log: logs.SglangLog) -> None:
        self.setup = setup
        self.profile = setup.profile
        self.cfg = setup.cfg
        self.outcome = setup.outcome
        self.engine = engine
        self.log = log
        self.ready = False
        self.shutting_down = False
        self.connections: set[HttpConnection] = set()
        self.fault_rng = random.Random(setup.seed + 1)
        self.eos_rng = random.Random(setup.seed + 2)
        self.typical_output_len = int(setup.extra("typical_output_len", DEFAULT_TYPICAL_OUTPUT_LEN))
        self._accept_cache: dict[tuple[str, float], tuple[float, list[float] | None]] = {}
        self.variation = self.profile.variation
        self._workload_cache: dict[str, str] = {}
        self._request_counter = 0

    # -- the Application protocol
    def access(self, client: str, method: str, path: str, status: int) -> None:
        self.log.info(logs.access_line(client, method, path, status))

    def dispatch(self, conn: HttpConnection, request: HttpRequest) -> None:
        route = _ROUTES.get(request.path)
        if route is None:
            conn.send_json(404, {"detail": "Not Found"}, request.method, request.path)
            return
        methods, handler = route
        if request.method not in methods:
            conn.send_json(405, {"detail": "Method Not Allowed"}, request.method, request.path)
            return
        try:
            handler(self, conn, request)
        except ApiError as exc:
            conn.send_json(exc.status, error_body(exc.status, str(exc), exc.err_type), request.method, request.path)

    # -- information endpoints
    def _readiness(self, conn: HttpConnection, request: HttpRequest) -> None:
        status = 200 if self.ready and not self.shutting_down else 503
        conn.send_bytes(status, b"", None, request.method, request.path)

    def _warn_if_alias(self, path: str) -> None:
        if path.startswith("/get_"):
            self.log.info(logs.deprecated_endpoint(path, "/" + path[len("/get_") :]))

    def model_info(self) -> JSON:
        return {
            "model_path": self.setup.model_path,
            "tokenizer_path": self.setup.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": str(self.setup.extra("model_type", "llama")),
            "architectures": [self.setup.architecture],
        }

    def _model_info(self, conn: HttpConnection, request: HttpRequest) -> None:
        self._warn_if_alias(request.path)
        conn.send_json(200, self.model_info(), request.method, request.path)

    def server_info(self) -> JSON:
        stats = self.engine.stats
        state: JSON = {
            "last_gen_throughput": stats.last_gen_throughput,
            "memory_usage": {
                "weight": self.outcome.weights_gb,
                "kvcache": self.outcome.kv_cache_gb,
                "token_capacity": self.outcome.max_total_num_tokens,
                "graph": self.outcome.cuda_graph_gb,
            },
        }
        # Simulator-only counters (SGLang has no such keys): schedule keeping, for benchmarks.
        busy_now = time.monotonic() - self.engine.busy_since if self.engine.busy else 0.0
        state.update(
            {
                "sim_emitted_tokens": stats.emitted_tokens,
                "sim_scheduled_seconds": stats.scheduled_seconds,
                "sim_busy_seconds": stats.busy_seconds + busy_now,
                "sim_max_lag_seconds": stats.max_lag_seconds,
                "sim_retracted_requests": stats.retracted,
            }
        )
        if self.cfg.speculative_algorithm is not None:
            state["avg_spec_accept_length"] = stats.decode_tokens / stats.verify_steps if stats.verify_steps else 0.0
        info = dict(self.setup.server_args)
        info.update(
            {
                "status": "ready" if self.ready else "starting",
                "max_total_num_tokens": self.outcome.max_total_num_tokens,
                "max_req_input_len": max(self.outcome.context_len - 1, 1),
                "internal_states": [state],
                "version": self.profile.sglang_version,
            }
        )
        return info

    def _server_info(self, conn: HttpConnection, request: HttpRequest) -> None:
        self._warn_if_alias(request.path)
        conn.send_json(200, self.server_info(), request.method, request.path)

    def _models(self, conn: HttpConnection, request: HttpRequest) -> None:
        card = {
            "id": self.setup.served_model_name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": self.setup.model_path,
            "parent": None,
            "max_model_len": self.outcome.context_len,
        }
        conn.send_json(200, {"object": "list", "data": [card]}, request.method, request.path)

    def _flush_cache(self, conn: HttpConnection, request: HttpRequest) -> None:
        conn.send_bytes(200, FLUSH_CACHE_TEXT.encode(), None, request.method, request.path)

    def _freeze_gc(self, conn: HttpConnection, request: HttpRequest) -> None:
        conn.send_bytes(200, FREEZE_GC_TEXT.encode(), None, request.method, request.path)

    # -- generation
    def _generation(self, conn: HttpConnection, request: HttpRequest) -> None:
        if not self.ready or self.shutting_down:
            raise ApiError(503, "The server is not ready yet.", "ServiceUnavailable")
        parsed = self._parse(request)
        if parsed.max_new_tokens is None or parsed.max_new_tokens < 0:
            raise ApiError(400, "max_new_tokens must be a non-negative integer")
        self._check_context(parsed)
        truncate_after = None
        rate = self.setup.faults.error_rate
        if rate and self.fault_rng.random() < rate:
            if parsed.stream and self.fault_rng.random() < 0.5:
                truncate_after = 1 + self.fault_rng.randrange(3)
            else:
                raise ApiError(500, "Internal server error (simulated: --sim-fault error_rate)", "InternalServerError")
        self._start(conn, parsed, request, truncate_after)

    def _parse(self, request: HttpRequest) -> Parsed:
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            raise ApiError(400, "request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        served = self.setup.served_model_name
        if request.path == "/generate":
            return parse_generate(body, served)
        if request.path == "/v1/completions":
            return parse_completions(body, served)
        return parse_chat(body, served, self.outcome.context_len)

    def _check_context(self, parsed: Parsed) -> None:
        total = parsed.prompt_tokens + parsed.max_new_tokens
        limit = self.outcome.context_len
        if total > limit:
            raise ApiError(
                400,
                (
                    f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
                    f"You requested a total of {total} tokens: {parsed.prompt_tokens} tokens from the input "
                    f"messages and {parsed.max_new_tokens} tokens for the completion. Please reduce the number "
                    f"of tokens in the input messages or the completion to fit within the limit."
                ),
            )

    def _model_accept(self, workload: str, temperature: float) -> tuple[float, list[float] | None]:
        """(mean accept length, its distribution when noise is on) for a workload and temperature."""
        key = (workload, temperature)
        cached = self._accept_cache.get(key)
        if cached is None:
            mean = accept_length(self.profile, self.cfg, workload, temperature)
            probs = None
            if self.setup.noise and self.cfg.speculative_algorithm is not None:
                probs = accept_length_distribution(self.profile, self.cfg, workload, temperature)
            cached = (mean, probs)
            self._accept_cache[key] = cached
        return cached

    def _accept(self, parsed: Parsed, position: int) -> tuple[float, list[float] | None]:
        """(this request's mean accept length, its CDF when noise is on). With noise on the
        mean moves by the request's effect, a fixed function of its prompt and its position
        in the launch (`variation.RequestVariation.shift`); noise off: the model's mean."""
        mean, probs = self._model_accept(self._workload(parsed.prompt_text), parsed.temperature)
        if probs is None:
            return mean, None
        prompt = parsed.prompt_text if parsed.prompt_text is not None else f"<{parsed.prompt_tokens} token ids>"
        shift = self.variation.shift(
            mean=mean,
            draft_tokens=len(probs),
            ngram=self.cfg.speculative_algorithm == "NGRAM",
            prompt=prompt,
            position=position,
        )
        total, cdf = 0.0, []
        for p in shifted_distribution(probs, mean, shift):
            total += p
            cdf.append(total)
        cdf[-1] = 1.0
        return mean + shift, cdf

    def _workload(self, text: str | None) -> str:
        if text is None:
            return "synthetic"
        kind = self._workload_cache.get(text)
        if kind is None:
            kind = classify_prompt(text)
            if len(self._workload_cache) < _CACHE_LIMIT:
                self._workload_cache[text] = kind
        return kind

    def _stop_at(self, parsed: Parsed) -> tuple[int, bool]:
        """(completion length at which the request ends, whether that is a simulated EOS)."""
        if not parsed.ignore_eos:
            eos_at = 1 + int(self.eos_rng.expovariate(1.0 / self.typical_output_len))
            if eos_at < parsed.max_new_tokens:
                return eos_at, True
        return parsed.max_new_tokens, False

    def _start(self, conn: HttpConnection, parsed: Parsed, request: HttpRequest, truncate_after: int | None) -> None:
        self._request_counter += 1
        mean, cdf = self._accept(parsed, self._request_counter)
        stop_at, at_eos = self._stop_at(parsed)
        responder = Responder(
            conn, parsed, request.method, request.path, draft_tokens=self.engine.draft_tokens, truncate_after=truncate_after
        )
        gen = Generation(
            rid=uuid.uuid4().hex,
            prompt_tokens=parsed.prompt_tokens,
            max_new_tokens=parsed.max_new_tokens,
            stop_at=stop_at,
            accept_mean=mean,
            accept_cdf=cdf,
            on_step=responder.on_step,
            token_state=self._request_counter * 7919 + 17,
            stopped_at_eos=at_eos,
            histogram=[0] * self.engine.draft_tokens if self.cfg.speculative_algorithm is not None else None,
        )
        if stop_at == 0:  # max_new_tokens=0: answered at once, no engine step
            gen.finished = True
            responder.finish_now(gen)
            return
        conn.on_client_gone = lambda: Engine.abort(gen)
        responder.start()
        self.engine.submit(gen)


_ROUTES: dict[str, tuple[tuple[str, ...], Callable[[Api, HttpConnection, HttpRequest], None]]] = {
    "/health": (("GET",), Api._readiness),
    "/health_generate": (("GET",), Api._readiness),
    "/ready": (("GET",), Api._readiness),
    "/model_info": (("GET",), Api._model_info),
    "/get_model_info": (("GET",), Api._model_info),
    "/server_info": (("GET",), Api._server_info),
    "/get_server_info": (("GET",), Api._server_info),
    "/v1/models": (("GET",), Api._models),
    "/flush_cache": (("GET", "POST"), Api._flush_cache),
    "/freeze_gc": (("GET", "POST"), Api._freeze_gc),
    "/generate": (("POST", "PUT"), Api._generation),
    "/v1/completions": (("POST",), Api._generation),
    "/v1/chat/completions": (("POST",), Api._generation),
}
