"""Write a copy of a search space with some of its parameters narrowed to one value each.

    python3 tools/gpu/pin_space.py IN.toml OUT.toml NAME=VALUE [NAME=VALUE ...]

Each named ``[params.NAME]`` table becomes a categorical of the one VALUE (parsed as TOML:
4, 0.5, "EAGLE"), or of each value of a TOML array ("[5, 6]": a space of a few
configurations); everything else, comments included, is copied as it is. A study of the
result with ``--remeasure`` launches that configuration again and again, measured exactly as
a study of the full space measures it (docs/validation/2026-12-03-h200-8b-launches-of-one-configuration.md: launches of one
configuration, their spread beside each launch's own interval)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib


def pin(text: str, values: dict[str, str]) -> str:
    """`text` with each ``[params.NAME]`` table of `values` replaced by a one-choice categorical."""
    declared = tomllib.loads(text).get("params", {})
    for name, value in values.items():
        if name not in declared:
            raise SystemExit(f"pin_space: no [params.{name}] in the space; pin one of {', '.join(declared)}")
        parsed = tomllib.loads(f"v = {value}")["v"]  # a TOML value, or a clear error
        choices = value.strip()[1:-1] if isinstance(parsed, list) else value
        table = re.compile(rf"^\[params\.{re.escape(name)}\]\n(?:(?!\[).*\n?)*", re.MULTILINE)
        text = table.sub(f'[params.{name}]\ntype = "categorical"\nchoices = [{choices}]\n\n', text, count=1)
    return text


def main(argv: list[str]) -> None:
    if len(argv) < 3 or not all("=" in a for a in argv[2:]):
        raise SystemExit(__doc__)
    values = dict(a.split("=", 1) for a in argv[2:])
    Path(argv[1]).write_text(pin(Path(argv[0]).read_text(), values))


if __name__ == "__main__":
    main(sys.argv[1:])
