"""What the model reads from a stored trial record."""

from __future__ import annotations

from autospec.model import observation_from_record
from autospec.records import TrialRecord

TUNED = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def _reference_of_defaults(startup: dict) -> TrialRecord:
    """SGLang's defaults as a reference launches them: the tuned flags left unset."""
    candidate = {"speculative_algorithm": "STANDALONE", **{name: None for name in TUNED}}
    return TrialRecord("ok", candidate, resolved=dict(candidate), launched=True, startup=startup, values=[500.0, 6000.0])


def test_what_the_server_logged_it_runs_settles_the_flags_left_to_sglang():
    logged = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}
    obs = observation_from_record(_reference_of_defaults({"max_running_requests": 48, "logged_flags": logged}))
    assert obs is not None
    assert {name: obs.flags[name] for name in TUNED} == logged


def test_without_a_logged_line_the_unset_flags_stay_unset():
    obs = observation_from_record(_reference_of_defaults({"max_running_requests": 48}))
    assert obs is not None
    assert all(obs.flags.get(name) is None for name in TUNED)


def test_a_logged_none_does_not_erase_a_flag_that_was_set():
    record = TrialRecord(
        "ok",
        {"speculative_num_steps": 2},
        resolved={"speculative_num_steps": 2},
        launched=True,
        startup={"logged_flags": {"speculative_num_steps": None}},
        values=[1.0, 1.0],
    )
    obs = observation_from_record(record)
    assert obs is not None and obs.flags["speculative_num_steps"] == 2
