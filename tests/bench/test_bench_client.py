from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from autospec.bench import BenchClient, Workload, prompts

from .fake_server import Reply
from .sim_process import free_port


def _send(url: str, workload: Workload, *, timeout_s: float = 5.0, transport=None, model=None):
    async def go():
        async with BenchClient(url, workload, timeout_s=timeout_s, transport=transport, model=model) as client:
            await client.resolve_model()
            return await client.send(prompts(workload, 1)[0]), client.model

    return asyncio.run(go())


@pytest.mark.parametrize("api", ["generate", "completions", "chat"])
def test_streams_each_api_and_uses_the_servers_token_counts(fake_server, api: str) -> None:
    server = fake_server(lambda n, body: Reply(tokens=10, per_event=4))
    record, model = _send(server.url, Workload("synthetic", input_len=4, output_len=99, api=api))
    assert record.ok, record.error_detail
    assert record.completion_tokens == 10  # what the server reported, not max_tokens
    assert record.chunk_tokens == (1, 4, 4, 1)
    assert record.t_sent < record.t_first <= record.chunk_times[-1] <= record.t_done
    body = server.bodies[0]
    if api == "generate":
        assert server.paths == ["/generate"] and body["sampling_params"]["max_new_tokens"] == 99
        assert record.spec_verify_ct == 4 and model is None
    else:
        assert body["model"] == "fake-model" and model == "fake-model"  # from GET /v1/models
        assert record.spec_verify_ct is None


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(kind="status", status=503), "http_status"),
        (Reply(kind="truncate"), "truncated"),
        (Reply(kind="hang"), "timeout"),
        (Reply(kind="error_event"), "stream_error"),
        (Reply(kind="abort"), "stream_error"),
        (Reply(kind="garbage"), "protocol"),
    ],
)
def test_every_failure_is_a_record_without_tokens(fake_server, reply: Reply, kind: str) -> None:
    server = fake_server(lambda n, body: reply)
    record, _ = _send(server.url, Workload("synthetic", output_len=12), timeout_s=0.5)
    assert not record.ok
    assert record.error_kind == kind
    assert record.completion_tokens == 0
    assert record.t_done is not None and record.t_done >= record.t_sent
    if kind == "http_status":
        assert record.status_code == 503 and "503" in (record.error_detail or "")


def test_refused_connection_is_a_connection_error() -> None:
    record, _ = _send(f"http://127.0.0.1:{free_port()}", Workload("synthetic"))
    assert record.error_kind == "connection" and not record.ok


def test_injected_transport_is_used() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = b"".join(
            b"data: " + json.dumps({"text": "x", "meta_info": {"completion_tokens": n, "finish_reason": None}}).encode() + b"\n\n"
            for n in (1, 3)
        )
        return httpx.Response(200, content=body + b"data: [DONE]\n\n")

    record, _ = _send("http://test", Workload("synthetic", output_len=3), transport=httpx.MockTransport(handler))
    assert record.ok and record.completion_tokens == 3 and record.chunk_tokens == (1, 2)
    assert seen[0].url.path == "/generate"


def test_explicit_model_skips_the_models_lookup(fake_server) -> None:
    server = fake_server()
    record, model = _send(server.url, Workload("synthetic", api="completions", output_len=3), model="mine")
    assert record.ok and model == "mine" and server.bodies[0]["model"] == "mine"


def test_client_must_be_entered() -> None:
    client = BenchClient("http://127.0.0.1:1", Workload("synthetic"))
    with pytest.raises(RuntimeError, match="async with"):
        client.lane(0)
