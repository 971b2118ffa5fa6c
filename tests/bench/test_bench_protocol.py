from __future__ import annotations

import json

import pytest

from autospec.bench import Workload, prompts
from autospec.bench.protocol import SseSplitter, StreamError, StreamProgress, build_request
from autospec.bench.workloads import Prompt


def _native(done: int, finish: dict | None = None, verify: int | None = None, text: str = "t") -> str:
    meta: dict = {"prompt_tokens": 5, "completion_tokens": done, "finish_reason": finish}
    if verify is not None:
        meta["spec_verify_ct"] = verify
    return json.dumps({"text": text, "meta_info": meta})


def _chunk(text: str, usage: int | None = None, chat: bool = False) -> str:
    choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
    event: dict = {"choices": [choice]}
    if usage is not None:
        event["usage"] = {"prompt_tokens": 9, "completion_tokens": usage}
    return json.dumps(event)


def test_native_request_body() -> None:
    w = Workload("synthetic", input_len=3, output_len=7, temperature=0.5, top_p=0.9, ignore_eos=False)
    path, body = build_request(w, prompts(w, 1)[0], model="ignored")
    assert path == "/generate"
    assert body == {
        "text": "1 2 3",
        "sampling_params": {"max_new_tokens": 7, "temperature": 0.5, "top_p": 0.9, "ignore_eos": False},
        "stream": True,
    }


@pytest.mark.parametrize("api", ["generate", "completions", "chat"])
def test_top_k_is_sent_on_every_api_when_the_workload_sets_it(api: str) -> None:
    w = Workload("synthetic", input_len=2, output_len=5, temperature=1, top_k=4, api=api)
    body = build_request(w, prompts(w, 1)[0], model=None)[1]
    params = body["sampling_params"] if api == "generate" else body
    assert params["top_k"] == 4 and params["temperature"] == 1
    unset = Workload("synthetic", input_len=2, output_len=5, temperature=1, api=api)
    body = build_request(unset, prompts(unset, 1)[0], model=None)[1]
    assert "top_k" not in (body["sampling_params"] if api == "generate" else body)


@pytest.mark.parametrize(("api", "path"), [("completions", "/v1/completions"), ("chat", "/v1/chat/completions")])
def test_openai_request_bodies_ask_for_usage_on_every_chunk(api: str, path: str) -> None:
    w = Workload("synthetic", input_len=2, output_len=5, api=api)
    got_path, body = build_request(w, prompts(w, 1)[0], model=None)
    assert got_path == path
    assert "model" not in body
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["max_tokens"] == 5 and body["ignore_eos"] is True and body["stream"] is True
    if api == "chat":
        assert body["messages"] == [{"role": "user", "content": "1 2"}]
    else:
        assert body["prompt"] == "1 2"
    assert build_request(w, prompts(w, 1)[0], model="m")[1]["model"] == "m"


def test_sse_splitter_handles_split_chunks_crlf_comments_and_multiline_data() -> None:
    s = SseSplitter()
    assert s.feed(b'data: {"a"') == []
    assert s.feed(b": 1}\n") == []
    assert s.feed(b"\n") == ['{"a": 1}']
    assert s.feed(b": keep-alive comment\r\n\r\nevent: x\r\ndata: one\r\ndata:two\r\n\r\n") == ["one\ntwo"]
    assert s.feed(b"data: [DONE]") == []
    assert s.flush() == ["[DONE]"]
    assert s.flush() == []


def test_native_stream_counts_tokens_per_event_from_cumulative_counts() -> None:
    p = StreamProgress("generate")
    p.feed(_native(1), 1.0)
    p.feed(_native(1), 1.05)  # no new token: not an output event
    p.feed(_native(4), 1.1)
    p.feed(_native(6, {"type": "length"}, verify=2), 1.2)
    p.feed("[DONE]", 1.25)
    rec = p.to_record(0.5, 9.0, warmup=False, prompt_index=3)
    assert rec.ok and rec.error_kind is None
    assert rec.completion_tokens == 6
    assert rec.chunk_times == (1.0, 1.1, 1.2) and rec.chunk_tokens == (1, 3, 2)
    assert rec.t_first == 1.0 and rec.t_done == 1.25  # the [DONE] arrival, not the socket close
    assert rec.spec_verify_ct == 2 and rec.prompt_tokens == 5 and rec.prompt_index == 3


def test_openai_stream_with_continuous_usage_and_final_usage_chunk() -> None:
    p = StreamProgress("chat")
    p.feed(json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}), 1.0)
    p.feed(_chunk("a", usage=1, chat=True), 1.1)
    p.feed(_chunk("bcd", usage=4, chat=True), 1.2)
    p.feed(json.dumps({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}), 1.3)
    p.feed("[DONE]", 1.3)
    rec = p.to_record(0.9, 1.4, warmup=True, prompt_index=0)
    assert rec.ok and rec.warmup
    assert rec.chunk_times == (1.1, 1.2) and rec.chunk_tokens == (1, 3)
    assert rec.completion_tokens == 4 and rec.prompt_tokens == 9 and rec.t_first == 1.1


def test_openai_stream_without_per_chunk_usage_keeps_times_but_not_counts() -> None:
    p = StreamProgress("completions")
    for i, text in enumerate(["a", "bc", "", "d"]):
        p.feed(_chunk(text), 1.0 + i / 10)
    p.feed(json.dumps({"choices": [], "usage": {"completion_tokens": 5}}), 2.0)
    p.feed("[DONE]", 2.0)
    rec = p.to_record(0.0, 2.1, warmup=False, prompt_index=0)
    assert rec.ok and rec.completion_tokens == 5  # the server's count, not 3 chunks
    assert rec.chunk_times == (1.0, 1.1, 1.3) and rec.chunk_tokens == ()


def test_reasoning_content_counts_as_output_for_chat() -> None:
    p = StreamProgress("chat")
    p.feed(json.dumps({"choices": [{"delta": {"reasoning_content": "hmm"}}]}), 1.0)
    assert p.t_first == 1.0


@pytest.mark.parametrize(
    "event",
    [
        {"error": {"message": "boom", "type": "BadRequestError", "code": 400}},
        {"object": "error", "message": "boom", "type": "x", "code": 500},
    ],
)
def test_error_events_raise_stream_error(event: dict) -> None:
    with pytest.raises(StreamError) as info:
        StreamProgress("completions").feed(json.dumps(event), 1.0)
    assert info.value.kind == "stream_error" and "boom" in info.value.detail


def test_native_abort_finish_is_an_error() -> None:
    with pytest.raises(StreamError, match="aborted"):
        StreamProgress("generate").feed(_native(2, {"type": "abort", "message": "oom"}), 1.0)


@pytest.mark.parametrize(
    ("api", "data", "kind"),
    [
        ("generate", "{not json", "protocol"),
        ("generate", "[1, 2]", "protocol"),
        ("generate", json.dumps({"text": "x"}), "protocol"),
        ("completions", json.dumps({"choices": ["x"]}), "protocol"),
    ],
)
def test_malformed_events_are_protocol_errors(api: str, data: str, kind: str) -> None:
    with pytest.raises(StreamError) as info:
        StreamProgress(api).feed(data, 1.0)
    assert info.value.kind == kind


def test_stream_without_done_is_truncated_and_carries_no_tokens() -> None:
    p = StreamProgress("generate")
    p.feed(_native(3), 1.0)
    rec = p.to_record(0.0, 1.5, warmup=False, prompt_index=0)
    assert not rec.ok and rec.error_kind == "truncated"
    assert rec.completion_tokens == 0 and rec.chunk_times == (1.0,)
    assert rec.t_done == 1.5


def test_openai_stream_without_any_usage_is_a_protocol_error() -> None:
    p = StreamProgress("completions")
    p.feed(_chunk("abc"), 1.0)
    p.feed("[DONE]", 1.1)
    rec = p.to_record(0.0, 1.2, warmup=False, prompt_index=0)
    assert rec.error_kind == "protocol" and "usage" in (rec.error_detail or "")


def test_events_after_done_are_ignored() -> None:
    p = StreamProgress("generate")
    p.feed(_native(2), 1.0)
    p.feed("[DONE]", 1.1)
    p.feed("garbage that would not parse", 1.2)
    assert p.to_record(0.0, 1.3, warmup=False, prompt_index=0).ok


def test_failed_record_with_an_explicit_error_keeps_partial_times() -> None:
    p = StreamProgress("generate")
    p.feed(_native(2), 1.0)
    rec = p.to_record(0.0, 3.0, warmup=False, prompt_index=0, error=StreamError("timeout", "late"))
    assert rec.error_kind == "timeout" and rec.completion_tokens == 0 and rec.t_first == 1.0


def test_prompt_from_messages_joins_contents() -> None:
    p = Prompt.from_messages([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    assert p.text == "a\n\nb" and len(p.messages) == 2


@pytest.mark.parametrize("name", ["spec_correct_drafts_histogram", "spec_accept_histogram"])
def test_the_verify_steps_by_accepted_drafts_are_kept_on_the_record(name: str) -> None:
    # SGLang 0.5.16/0.5.23 send spec_correct_drafts_histogram; the simulator spec_accept_histogram
    p = StreamProgress("generate")
    meta = {"prompt_tokens": 5, "completion_tokens": 9, "spec_verify_ct": 4, name: [1, 0, 2, 1]}
    p.feed(json.dumps({"text": "t", "meta_info": meta}), 1.0)
    p.feed("[DONE]", 1.1)
    record = p.to_record(0.0, 1.1, warmup=False, prompt_index=0)
    assert record.spec_accept_histogram == (1, 0, 2, 1)
    assert type(record).from_dict(json.loads(json.dumps(record.as_dict()))) == record


def test_a_record_without_a_histogram_keeps_none() -> None:
    p = StreamProgress("generate")
    p.feed(_native(3, verify=2), 1.0)
    p.feed("[DONE]", 1.1)
    assert p.to_record(0.0, 1.1, warmup=False, prompt_index=0).spec_accept_histogram == ()
