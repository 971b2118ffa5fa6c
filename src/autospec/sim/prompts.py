"""Prompt classification: which workload kind (and so which acceptance) a prompt's text
gets. Pure."""

from __future__ import annotations

import re

__all__ = ["classify_prompt"]

_CODE_MARKERS = re.compile(
    r"```|\bdef \w+\(|\bclass \w+[:(]|\bimport \w+|#include\b|\bfunction\s*\w*\(|=>|;\s*$|\{\s*$|"
    r"\breturn\b|\bfn \w+\(|\bpublic (static )?\w+|\bconsole\.log\b|\bSELECT\b.+\bFROM\b",
    re.MULTILINE,
)
_SUMMARIZE_WORDS = re.compile(r"\b(summari[sz]e|summary|tl;?dr|key points|condense|abstract of)\b", re.IGNORECASE)


def classify_prompt(text: str) -> str:
    """How predictable a prompt's continuation is: "synthetic" | "code" | "summarize" | "chat".

    Heuristic, checked in this order:
    - "synthetic": empty text, or a machine-made prompt: fewer than half the words contain a
      letter (random ids such as "w267 123 w217"), or at least 8 words of which under 30%
      are distinct (a repeated phrase);
    - "code": two or more code markers (fences, `def f(`, `import x`, braces at line end, ...);
    - "summarize": asks for a summary/TL;DR/key points, or is longer than 4000 characters;
    - "chat": everything else.
    """
    words = text.split()
    if not words:
        return "synthetic"
    letters = sum(1 for w in words if any(c.isalpha() for c in w) and not re.fullmatch(r"[A-Za-z]\d+", w))
    if letters < len(words) / 2:
        return "synthetic"
    if len(words) >= 8 and len({w.lower() for w in words}) < 0.3 * len(words):
        return "synthetic"
    if len(_CODE_MARKERS.findall(text)) >= 2:
        return "code"
    if _SUMMARIZE_WORDS.search(text) or len(text) > 4000:
        return "summarize"
    return "chat"
