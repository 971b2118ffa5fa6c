from __future__ import annotations

import json
from pathlib import Path

import pytest

from autospec.bench import BUILTIN_SETS, Workload, export_jsonl, load_builtin, load_prompt_file, prompts
from autospec.errors import ConfigError, UsageError


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"kind": "nope"}, "kind must be one of synthetic, random, file, builtin (got 'nope')"),
        ({"kind": "synthetic", "api": "grpc"}, "api must be one of generate, completions, chat (got 'grpc')"),
        ({"kind": "synthetic", "output_len": 0}, "output_len must be >= 1, got 0"),
        ({"kind": "random", "input_len": 0}, "input_len must be >= 1, got 0"),
        ({"kind": "synthetic", "temperature": -0.1}, "temperature must be >= 0, got -0.1"),
        ({"kind": "synthetic", "top_p": 0.0}, "top_p must be in (0, 1], got 0.0"),
        ({"kind": "file"}, 'kind "file" needs path'),
        ({"kind": "builtin", "name": "poetry"}, "(got 'poetry')"),
    ],
)
def test_bad_workloads_are_one_line_usage_errors(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        Workload(**kwargs)
    assert isinstance(info.value, UsageError)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_synthetic_is_one_fixed_prompt_of_input_len_numbers() -> None:
    made = prompts(Workload("synthetic", input_len=6), 3)
    assert [p.text for p in made] == ["1 2 3 4 5 6"] * 3
    assert made[0].messages == ({"role": "user", "content": "1 2 3 4 5 6"},)


def test_random_prompts_are_seeded_prefix_stable_and_sized() -> None:
    a = prompts(Workload("random", input_len=20, seed=1), 6)
    assert a == prompts(Workload("random", input_len=20, seed=1), 6)
    assert a[:3] == prompts(Workload("random", input_len=20, seed=1), 3)
    assert a != prompts(Workload("random", input_len=20, seed=2), 6)
    assert all(len(p.text.split()) == 20 for p in a)
    assert len({p.text for p in a}) == 6


@pytest.mark.parametrize("name", BUILTIN_SETS)
def test_builtin_sets_ship_about_thirty_distinct_prompts(name: str) -> None:
    prompts = load_builtin(name)
    assert len(prompts) >= 30
    assert len({p.text for p in prompts}) == len(prompts)


def test_builtin_order_is_seeded_and_cycles() -> None:
    w = Workload("builtin", name="summarise", seed=3)  # alias accepted
    assert w.name == "summarize"
    pool = load_builtin("summarize")
    made = prompts(w, len(pool) + 5)
    assert sorted(p.index for p in made[: len(pool)]) == list(range(len(pool)))
    assert made[len(pool) :] == made[:5]
    assert [p.index for p in prompts(Workload("builtin", name="summarize", seed=4), 10)] != [p.index for p in made[:10]]


def test_jsonl_file_with_prompts_and_messages(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        json.dumps({"prompt": "hello there"})
        + "\n\n"
        + json.dumps({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
        + "\n"
    )
    prompts = load_prompt_file(path)
    assert prompts[0].text == "hello there"
    assert prompts[0].messages == ({"role": "user", "content": "hello there"},)
    assert prompts[1].messages[0] == {"role": "system", "content": "be brief"}
    assert prompts[1].text == "be brief\n\nhi"


def test_sharegpt_file_uses_first_human_turn(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text(
        json.dumps(
            [
                {"id": "a", "conversations": [{"from": "human", "value": "Q1"}, {"from": "gpt", "value": "A1"}]},
                {"id": "b", "conversations": [{"from": "gpt", "value": "only a model turn"}]},
                {"id": "c", "conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "Q2"}]},
            ]
        )
    )
    assert [p.text for p in load_prompt_file(path)] == ["Q1", "Q2"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"prompt": "ok"}\n{"text": "wrong key"}\n', ":2: expected"),
        ('{"prompt": "ok"}\nnot json\n', ":2: not valid JSON"),
        ("\n\n", "holds no prompts"),
        ('[{"conversations": []}]', "no ShareGPT conversations"),
    ],
)
def test_bad_prompt_files_name_the_problem(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        prompts(Workload("file", path=str(path)), 1)


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read prompt file"):
        prompts(Workload("file", path=str(tmp_path / "absent.jsonl")), 1)


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_export_jsonl_replays_the_same_prompts(tmp_path: Path, api: str) -> None:
    workload = Workload("builtin", name="chat", api=api, seed=5)
    out = tmp_path / "export.jsonl"
    export_jsonl(workload, 40, out)
    replayed = prompts(Workload("file", path=str(out), api=api), 40)
    # A file workload shuffles too; compare as multisets and check the messages survive.
    expected = prompts(workload, 40)
    assert sorted(p.text for p in load_prompt_file(out)) == sorted(p.text for p in expected)
    if api == "chat":
        assert [p.messages for p in load_prompt_file(out)] == [p.messages for p in expected]
    assert len(replayed) == 40


def test_export_sharegpt_is_read_back_as_the_same_user_turns(tmp_path: Path) -> None:
    from autospec.bench import export_sharegpt

    workload = Workload("builtin", name="chat", api="chat")
    out = tmp_path / "sg.json"
    export_sharegpt(workload, 32, out)
    rows = json.loads(out.read_text())
    assert all(len(r["conversations"]) == 2 for r in rows)  # bench_serving needs two turns
    users = [next(m["content"] for m in p.messages if m["role"] == "user") for p in prompts(workload, 32)]
    assert [p.text for p in load_prompt_file(out)] == users
