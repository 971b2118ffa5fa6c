"""Prompts for a workload: what to send, in which order.

`prompts(workload, n)` turns a `Workload` (`autospec.workload`: what each request asks
for, validated when built) into `n` prompts, deterministically for its `seed` and
prefix-stable (`prompts(w, 5)[:3] == prompts(w, 3)`), so two runs, or autospec and
SGLang's own benchmark, can be fed the same prompts in the same order (see
`export_jsonl`).

Sources, by kind:

    synthetic  the seed's method: one fixed prompt repeated, temperature 0 and
               ignore_eos by default, fixed output length; the prompt is the
               numbers 1..input_len, whose continuation is as predictable as the
               seed's (near-100% acceptance)
    random     random English words, about `input_len` of them per prompt (one word
               is about one token; the server's prompt_tokens is recorded)
    file       a JSONL file (one {"prompt": str} or {"messages": [...]} per line) or
               a ShareGPT JSON file (a list of {"conversations": [{"from", "value"}]};
               the first human turn is the prompt)
    builtin    one of the prompt sets shipped with autospec: chat, code, summarize

File and built-in prompts are used in a seeded shuffled order and cycled when `n`
exceeds their count. Every request asks for `output_len` tokens; with
`ignore_eos=False` the server may stop earlier, and the server's count is what the
metrics use.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from autospec.errors import ConfigError
from autospec.workload import APIS, BUILTIN_ALIASES, BUILTIN_SETS, KINDS, Workload

__all__ = [
    "APIS",
    "BUILTIN_SETS",
    "KINDS",
    "Prompt",
    "Workload",
    "export_jsonl",
    "export_sharegpt",
    "load_builtin",
    "load_prompt_file",
    "prompts",
    "synthetic_prompt",
]


def synthetic_prompt(input_len: int) -> str:
    """The synthetic workload's one prompt: "1 2 3 ... input_len".

    The seed's benchmark sent one short fixed prompt at temperature 0 with
    ignore_eos; its wording is not known, so this stands in with a prompt whose
    continuation is as predictable (counting on), which is what made the seed's
    acceptance near 100%. The simulator classifies it as "synthetic".
    """
    return " ".join(str(i) for i in range(1, input_len + 1))


# Common English words for kind="random" (one word is roughly one token for most
# tokenizers; the server's own prompt_tokens is recorded per request).
_WORDS: list[str] = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "president",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "foot",
    "boy",
    "age",
    "policy",
    "music",
    "market",
    "sense",
    "nation",
    "plan",
    "college",
    "interest",
    "death",
    "experience",
    "effect",
    "class",
    "control",
    "care",
    "field",
    "development",
    "role",
    "effort",
    "rate",
    "heart",
    "drug",
    "show",
    "leader",
    "light",
    "voice",
    "wife",
    "police",
    "mind",
    "price",
    "report",
    "decision",
    "son",
    "view",
    "relationship",
    "town",
    "road",
    "arm",
    "difference",
    "value",
    "building",
    "action",
    "model",
    "season",
    "society",
    "tax",
    "director",
    "position",
    "player",
    "record",
    "paper",
    "space",
    "ground",
    "form",
    "event",
    "official",
    "matter",
    "center",
    "couple",
    "site",
    "project",
    "activity",
    "star",
    "table",
    "need",
    "court",
    "oil",
    "situation",
    "cost",
    "industry",
    "figure",
    "street",
    "image",
    "phone",
    "data",
    "picture",
    "practice",
    "piece",
    "land",
    "product",
    "doctor",
    "wall",
    "patient",
    "worker",
    "news",
    "test",
    "movie",
    "north",
    "love",
    "support",
    "technology",
    "step",
    "baby",
    "computer",
    "type",
    "attention",
    "film",
    "tree",
    "source",
    "organization",
    "hair",
    "window",
    "evidence",
    "population",
    "site",
    "river",
    "garden",
    "bridge",
    "cloud",
    "stone",
    "window",
    "letter",
    "music",
    "summer",
    "winter",
    "orange",
    "green",
    "quiet",
    "happy",
    "early",
    "simple",
    "strong",
    "bright",
    "small",
    "large",
    "open",
    "clear",
    "fresh",
]


@dataclass(frozen=True)
class Prompt:
    """One prompt, ready for any API.

    `text` is sent to /generate and /v1/completions; `messages` to
    /v1/chat/completions. A plain-text source gets a single user message; a
    messages source gets `text` = the message contents joined by blank lines.
    `index` is the prompt's position in its source (for tracing).
    """

    text: str
    messages: tuple[dict[str, str], ...]
    index: int = 0

    @classmethod
    def from_text(cls, text: str, index: int = 0) -> Prompt:
        return cls(text=text, messages=({"role": "user", "content": text},), index=index)

    @classmethod
    def from_messages(cls, messages: list[dict[str, Any]], index: int = 0) -> Prompt:
        clean = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in messages)
        text = "\n\n".join(m["content"] for m in clean)
        return cls(text=text, messages=clean, index=index)


def prompts(workload: Workload, n: int) -> list[Prompt]:
    """The workload's first `n` prompts, deterministic for its `seed` and prefix-stable.

    Reads the prompt file or built-in set of file and builtin workloads (ConfigError when
    unusable)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if workload.kind == "synthetic":
        text = synthetic_prompt(workload.input_len)
        return [Prompt.from_text(text, 0) for _ in range(n)]
    if workload.kind == "random":
        return [Prompt.from_text(_random_text(workload.seed, i, workload.input_len), i) for i in range(n)]
    pool = _prompt_pool(workload)
    order = list(range(len(pool)))
    random.Random(f"autospec-order:{workload.seed}").shuffle(order)
    return [pool[order[i % len(order)]] for i in range(n)]


def _prompt_pool(workload: Workload) -> list[Prompt]:
    """Every prompt of a file or builtin workload, in the source's order."""
    if workload.kind == "builtin":
        return load_builtin(workload.name or "")
    return load_prompt_file(Path(workload.path or ""))


def _random_text(seed: int, index: int, n_words: int) -> str:
    rng = random.Random(f"autospec-random:{seed}:{index}")
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def load_builtin(name: str) -> list[Prompt]:
    """The prompts of a built-in set (package data `autospec/bench/prompts/NAME.jsonl`)."""
    name = BUILTIN_ALIASES.get(name, name)
    if name not in BUILTIN_SETS:
        raise ConfigError(f"unknown built-in prompt set {name!r}; use one of {', '.join(BUILTIN_SETS)}")
    text = resources.files("autospec.bench").joinpath("prompts").joinpath(f"{name}.jsonl").read_text("utf-8")
    return _parse_jsonl(text, f"built-in set {name!r}")


def load_prompt_file(path: Path) -> list[Prompt]:
    """Prompts from a JSONL file or a ShareGPT-format JSON file (ConfigError when unusable)."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read prompt file {path}: {exc.strerror}; check the path") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _parse_sharegpt(text, path)
    return _parse_jsonl(text, str(path))


def _parse_jsonl(text: str, origin: str) -> list[Prompt]:
    found: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"{origin}:{lineno}: not valid JSON; write one JSON object per line") from None
        found.append(_prompt_from_item(item, len(found), f"{origin}:{lineno}"))
    if not found:
        raise ConfigError(f'{origin} holds no prompts; add lines like {{"prompt": "..."}}')
    return found


def _prompt_from_item(item: Any, index: int, where: str) -> Prompt:
    if isinstance(item, dict) and isinstance(item.get("prompt"), str) and item["prompt"]:
        return Prompt.from_text(item["prompt"], index)
    messages = item.get("messages") if isinstance(item, dict) else None
    if isinstance(messages, list) and messages and all(_is_message(m) for m in messages):
        return Prompt.from_messages(messages, index)
    raise ConfigError(
        f'{where}: expected {{"prompt": "..."}} or {{"messages": [{{"role": ..., "content": ...}}]}}; fix that line'
    )


def _is_message(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("role"), str) and isinstance(item.get("content"), str)


def _parse_sharegpt(text: str, path: Path) -> list[Prompt]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); fix the file") from None
    found: list[Prompt] = []
    for entry in data if isinstance(data, list) else []:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        first_human = next(
            (t.get("value") for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")),
            None,
        )
        if isinstance(first_human, str) and first_human.strip():
            found.append(Prompt.from_text(first_human, len(found)))
    if not found:
        raise ConfigError(
            f"{path}: no ShareGPT conversations with a human turn found; "
            'expected [{"conversations": [{"from": "human", "value": "..."}]}]'
        )
    return found


def export_jsonl(workload: Workload, n: int, path: Path) -> None:
    """Write the workload's first `n` prompts as JSONL (chat messages for api="chat"),
    so another client (e.g. SGLang's bench_serving) can replay exactly these prompts."""
    with path.open("w", encoding="utf-8") as out:
        for prompt in prompts(workload, n):
            item = {"messages": list(prompt.messages)} if workload.api == "chat" else {"prompt": prompt.text}
            out.write(json.dumps(item, ensure_ascii=False) + "\n")


def export_sharegpt(workload: Workload, n: int, path: Path) -> None:
    """Write the workload's first `n` prompts as ShareGPT JSON (the first user turn of
    each; a placeholder assistant turn), which autospec (kind="file") and SGLang's
    bench_serving (`--dataset-name sharegpt --dataset-path F --sharegpt-output-len L`,
    checked against sglang 0.5.23's benchmark/datasets) both read. bench_serving
    shuffles the rows itself, so use n equal to the number of prompts sent."""
    rows = []
    for i, prompt in enumerate(prompts(workload, n)):
        user = next((m["content"] for m in prompt.messages if m["role"] == "user"), prompt.text)
        rows.append(
            {
                "id": f"autospec-{i}",
                "conversations": [{"from": "human", "value": user}, {"from": "gpt", "value": "placeholder answer"}],
            }
        )
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
