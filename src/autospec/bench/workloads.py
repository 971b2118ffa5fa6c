"""Workloads: what to send (prompts) and how to sample (lengths, temperature, API).

A `Workload` is a frozen description; `Workload.prompts(n)` turns it into `n`
prompts, deterministically for its `seed` and prefix-stable (`prompts(5)[:3] ==
prompts(3)`), so two runs, or autospec and SGLang's own benchmark, can be fed the
same prompts in the same order (see `export_jsonl`).

Kinds:

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
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from autospec.errors import ConfigError

KINDS = ("synthetic", "random", "file", "builtin")
APIS = ("generate", "completions", "chat")
BUILTIN_SETS = ("chat", "code", "summarize")
_BUILTIN_ALIASES = {"summarise": "summarize", "summary": "summarize"}


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
_WORDS = (
    "time year people way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program "
    "question work government number night point home water room mother area money "
    "story fact month lot right study book eye job word business issue side kind head "
    "house service friend father power hour game line end member law car city "
    "community name president team minute idea kid body information back parent face "
    "others level office door health person art war history party result change "
    "morning reason research girl guy moment air teacher force education foot boy age "
    "policy music market sense nation plan college interest death experience effect "
    "class control care field development role effort rate heart drug show leader "
    "light voice wife police mind price report decision son view relationship town "
    "road arm difference value building action model season society tax director "
    "position player record paper space ground form event official matter center "
    "couple site project activity star table need court oil situation cost industry "
    "figure street image phone data picture practice piece land product doctor wall "
    "patient worker news test movie north love support technology step baby computer "
    "type attention film tree source organization hair window evidence population "
    "site river garden bridge cloud stone window letter music summer winter orange "
    "green quiet happy early simple strong bright small large open clear fresh"
).split()


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


@dataclass(frozen=True)
class Workload:
    """What each request asks for. Validated on construction (ConfigError)."""

    kind: str
    input_len: int = 32
    output_len: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    ignore_eos: bool = True
    api: str = "generate"
    path: str | None = None
    name: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"unknown workload kind {self.kind!r}; use one of {', '.join(KINDS)}")
        if self.api not in APIS:
            raise ConfigError(f"unknown api {self.api!r}; use one of {', '.join(APIS)}")
        if self.input_len < 1:
            raise ConfigError(f"input_len must be at least 1, got {self.input_len}; pass a positive length")
        if self.output_len < 1:
            raise ConfigError(f"output_len must be at least 1, got {self.output_len}; pass a positive length")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {self.temperature}; use 0 for greedy decoding")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}; use 1.0 to disable nucleus sampling")
        if self.kind == "file" and not self.path:
            raise ConfigError("workload kind 'file' needs a path; pass the JSONL or ShareGPT JSON file")
        if self.kind == "builtin":
            name = _BUILTIN_ALIASES.get(self.name or "", self.name)
            if name not in BUILTIN_SETS:
                raise ConfigError(
                    f"unknown built-in prompt set {self.name!r}; use one of {', '.join(BUILTIN_SETS)}"
                )
            object.__setattr__(self, "name", name)

    def prompts(self, n: int) -> list[Prompt]:
        """`n` prompts, deterministic for `seed` and prefix-stable."""
        if n < 0:
            raise ValueError("n must be >= 0")
        if self.kind == "synthetic":
            text = synthetic_prompt(self.input_len)
            return [Prompt.from_text(text, 0) for _ in range(n)]
        if self.kind == "random":
            return [Prompt.from_text(_random_text(self.seed, i, self.input_len), i) for i in range(n)]
        pool = self._load_pool()
        order = list(range(len(pool)))
        random.Random(f"autospec-order:{self.seed}").shuffle(order)
        return [pool[order[i % len(order)]] for i in range(n)]

    def _load_pool(self) -> list[Prompt]:
        if self.kind == "builtin":
            return load_builtin(self.name or "")
        return load_prompt_file(Path(self.path or ""))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _random_text(seed: int, index: int, n_words: int) -> str:
    rng = random.Random(f"autospec-random:{seed}:{index}")
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def load_builtin(name: str) -> list[Prompt]:
    """The prompts of a built-in set (package data `autospec/bench/prompts/NAME.jsonl`)."""
    name = _BUILTIN_ALIASES.get(name, name)
    if name not in BUILTIN_SETS:
        raise ConfigError(f"unknown built-in prompt set {name!r}; use one of {', '.join(BUILTIN_SETS)}")
    text = resources.files("autospec.bench").joinpath("prompts", f"{name}.jsonl").read_text("utf-8")
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
    prompts: list[Prompt] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"{origin}:{lineno}: not valid JSON; write one JSON object per line") from None
        prompts.append(_prompt_from_item(item, len(prompts), f"{origin}:{lineno}"))
    if not prompts:
        raise ConfigError(f"{origin} holds no prompts; add lines like {{\"prompt\": \"...\"}}")
    return prompts


def _prompt_from_item(item: Any, index: int, where: str) -> Prompt:
    if isinstance(item, dict) and isinstance(item.get("prompt"), str) and item["prompt"]:
        return Prompt.from_text(item["prompt"], index)
    messages = item.get("messages") if isinstance(item, dict) else None
    if (
        isinstance(messages, list)
        and messages
        and all(_is_message(m) for m in messages)
    ):
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
    prompts: list[Prompt] = []
    for entry in data if isinstance(data, list) else []:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list):
            continue
        first_human = next(
            (t.get("value") for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")),
            None,
        )
        if isinstance(first_human, str) and first_human.strip():
            prompts.append(Prompt.from_text(first_human, len(prompts)))
    if not prompts:
        raise ConfigError(
            f"{path}: no ShareGPT conversations with a human turn found; "
            'expected [{"conversations": [{"from": "human", "value": "..."}]}]'
        )
    return prompts


def export_jsonl(workload: Workload, n: int, path: Path) -> None:
    """Write the workload's first `n` prompts as JSONL (chat messages for api="chat"),
    so another client (e.g. SGLang's bench_serving) can replay exactly these prompts."""
    with path.open("w", encoding="utf-8") as out:
        for prompt in workload.prompts(n):
            item = {"messages": list(prompt.messages)} if workload.api == "chat" else {"prompt": prompt.text}
            out.write(json.dumps(item, ensure_ascii=False) + "\n")


def export_sharegpt(workload: Workload, n: int, path: Path) -> None:
    """Write the workload's first `n` prompts as ShareGPT JSON (the first user turn of
    each; a placeholder assistant turn), which autospec (kind="file") and SGLang's
    bench_serving (`--dataset-name sharegpt --dataset-path F --sharegpt-output-len L`,
    checked against sglang 0.5.23's benchmark/datasets) both read. bench_serving
    shuffles the rows itself, so use n equal to the number of prompts sent."""
    rows = []
    for i, prompt in enumerate(workload.prompts(n)):
        user = next((m["content"] for m in prompt.messages if m["role"] == "user"), prompt.text)
        rows.append({"id": f"autospec-{i}", "conversations": [
            {"from": "human", "value": user}, {"from": "gpt", "value": "placeholder answer"}]})
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
