"""Lines of text no wider than a terminal (pure).

`wrap_lines` folds each line longer than `width` at spaces, continuing it with the line's
own indentation plus four spaces; a figure and its interval (``281.3 +-24.5``) stay on one
line. A single word longer than the width is left whole.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

__all__ = ["WIDTH", "wrap_lines"]

WIDTH = 120  # the widest line `autospec pareto` prints by default
_GLUE = "\x00"  # stands for the space before "+-" while wrapping: not a break point


def wrap_lines(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """Every line of `lines`, folded to at most `width` characters where it has spaces."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        folded = textwrap.wrap(
            line.strip().replace(" +-", _GLUE + "+-"),
            width=width,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        out += [part.replace(_GLUE, " ") for part in folded]
    return out
