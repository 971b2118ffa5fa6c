"""The user documentation stays navigable and short (issue 39, item 7).

Every relative link in README.md and docs/ (the dated runs in docs/validation/ included)
names a file of the repository and, with `#anchor`, a heading of that file as GitHub
renders its anchor. README.md stays within 110 lines and each user doc (docs/*.md, not
docs/validation/) within 300, and docs/validation/README.md lists every dated run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "validation").glob("*.md")])
USER_DOCS = sorted((ROOT / "docs").glob("*.md"))

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The heading anchors GitHub gives a Markdown file (duplicates get -1, -2, ...)."""
    seen: dict[str, int] = {}
    result = set()
    for line in prose_lines(path.read_text()):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def relative_links(path: Path) -> list[str]:
    """The link targets of a Markdown file that point into the repository."""
    targets = []
    for line in prose_lines(path.read_text()):
        line = re.sub(r"`[^`]*`", "", line)
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                targets.append(target)
    return targets


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_anchor_slugs_follow_github(tmp_path: Path) -> None:
    text = "# Title\n## 1. Arguments: SGLang's rewrites\n## `predict()`: the benchmark\n## Title\n```\n# not a heading\n```\n"
    path = tmp_path / "probe.md"
    path.write_text(text)
    assert anchors(path) == {"title", "1-arguments-sglangs-rewrites", "predict-the-benchmark", "title-1"}


def test_link_finder_skips_code_and_urls(tmp_path: Path) -> None:
    line = "see [a](docs/a.md#x), ![img](docs/img/p.png), [web](https://x.org) and `[b](nowhere.md)`"
    path = tmp_path / "probe.md"
    path.write_text(line + "\n```\n[c](inside.md)\n```\n")
    assert relative_links(path) == ["docs/a.md#x", "docs/img/p.png"]


def test_readme_is_read_in_five_minutes() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 110, f"README.md has {len(lines)} lines; keep it within 110"


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_each_user_doc_stays_short(doc: Path) -> None:
    lines = doc.read_text().splitlines()
    assert len(lines) <= 300, f"{doc.name} has {len(lines)} lines; split it by topic or move dated runs to docs/validation/"


def test_validation_index_lists_every_run() -> None:
    folder = ROOT / "docs" / "validation"
    listed = {Path(t).name for t in relative_links(folder / "README.md")}
    runs = {p.name for p in folder.glob("*.md") if p.name != "README.md"}
    assert runs <= listed, f"docs/validation/README.md does not list {sorted(runs - listed)}"
