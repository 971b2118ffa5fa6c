"""The one --concurrency parser (optimize and bench)."""

from __future__ import annotations

import pytest

from autospec.cli.common import parse_concurrency
from autospec.errors import UsageError


@pytest.mark.parametrize(
    "text, levels",
    [
        ("1,4,32", (1, 4, 32)),
        ("32,1", (32, 1)),
        (" 2 , 8 ,", (2, 8)),
        ("16", (16,)),
    ],
)
def test_levels_keep_their_order(text, levels):
    assert parse_concurrency(text) == levels


@pytest.mark.parametrize(
    "text, needles",
    [
        ("1,x", ("not a list of integers", "is not a comma-separated list", "'x'")),
        ("1.5", ("not a list of integers", "'1.5'")),
        ("1;4", ("not a list of integers",)),
        ("0,4", ("needs positive levels",)),
        ("-1", ("needs positive levels",)),
        ("", ("needs positive levels",)),
        (",", ("needs positive levels",)),
        ("4,1,4", ("lists a level twice",)),
    ],
)
def test_bad_levels_are_one_line_usage_errors(text, needles):
    with pytest.raises(UsageError) as info:
        parse_concurrency(text)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"--concurrency {text!r}")
    assert all(needle in message for needle in needles)
