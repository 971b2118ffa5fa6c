from __future__ import annotations

import json

import pytest

from autospec.feasibility import Verdict


def test_ok_is_true_only_for_status_ok():
    assert Verdict(status="ok").ok
    for status in ("rejected", "skipped", "duplicate"):
        assert not Verdict(status=status, source="learned").ok


@pytest.mark.parametrize("field,value", [("status", "maybe"), ("source", "oracle")])
def test_unknown_status_or_source_is_refused(field, value):
    kwargs = {"status": "ok", "source": "static", field: value}
    with pytest.raises(ValueError, match=value):
        Verdict(**kwargs)


def test_reason_is_one_line_and_resolved_a_copy():
    flags = {"page_size": 16}
    verdict = Verdict(status="rejected", reason="line one\n  line two", resolved=flags)
    flags["page_size"] = 1
    assert verdict.reason == "line one line two"
    assert verdict.resolved == {"page_size": 16}


def test_to_dict_is_json_ready():
    verdict = Verdict(
        status="rejected",
        reason="r",
        source="preflight",
        rule="x",
        resolved={"speculative_num_steps": 3},
        hardware_dependent=True,
    )
    assert json.loads(json.dumps(verdict.to_dict())) == {
        "status": "rejected",
        "reason": "r",
        "source": "preflight",
        "rule": "x",
        "resolved": {"speculative_num_steps": 3},
        "hardware_dependent": True,
    }
