"""The verdict's tie rule (`answer.verdict_lines`) and pareto's folding of long lines
(`wrapping.wrap_lines`), on hand-made views."""

from __future__ import annotations

from dataclasses import replace

from autospec.report import answer
from autospec.report.data import StudyData, TrialView, parse_objective
from autospec.report.headline import KNEE, headline_lines
from autospec.report.wrapping import wrap_lines

OBJECTIVES = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]


def _launch(number: int, c1: float, c32: float, half: float) -> TrialView:
    """One launch whose two figures have 95% half-width `half`."""
    bench = {
        1: {"output_tok_s": c1, "n_ok": 8, "cis": {"output_tok_s": [c1 - half, c1 + half]}},
        32: {"agg_output_tok_s": c32, "n_ok": 64, "cis": {"agg_output_tok_s": [c32 - half, c32 + half]}},
    }
    view = TrialView(
        number=number,
        state="complete",
        kind="front",
        flags={"speculative_num_steps": number},
        values=[c1, c32],
        measured=True,
        outcome="ok",
        launched=True,
    )
    return replace(view, bench=bench)


def test_tied_picks_name_the_one_to_deploy_for_every_load():
    # trial 1 is fastest at C=1 but within the intervals of trial 2 there; trial 2 leads at C=32
    found = answer(StudyData("m", OBJECTIVES, [_launch(1, 280.0, 1400.0, 30.0), _launch(2, 260.0, 2000.0, 30.0)]))
    assert (found.picks["latency"].trial.number, found.picks["throughput"].trial.number) == (1, 2)
    assert found.verdict == [
        "the picks are tied: deploy trial 2 (steps=2) for every load; it is the throughput pick at C=32, "
        "and at C=1 within the intervals of the latency pick, trial 1"
    ]
    lines = headline_lines(found)
    assert lines[0] == found.verdict[0]
    assert lines[1] == (
        "for latency: trial 1 (steps=1), 280.0 +-30.0 tok/s at C=1; tied within the intervals with trial(s) 2 "
        "(the pick for throughput and for a mixed load)"
    )
    assert lines[3] == f"for a mixed load: trial 2 (steps=2), {KNEE}: 93% at C=1, 100% at C=32"


def test_separated_picks_say_which_load_gets_which():
    found = answer(StudyData("m", OBJECTIVES, [_launch(1, 300.0, 1400.0, 5.0), _launch(2, 260.0, 2000.0, 5.0)]))
    assert found.verdict[0] == "for light load (C=1) deploy trial 1 (steps=1); for heavy load (C=32) deploy trial 2 (steps=2)"


def test_long_lines_fold_at_spaces_with_their_indentation_and_keep_each_interval_whole():
    line = "  " + " ".join(f"word{i} 281.3 +-24.5" for i in range(20))
    folded = wrap_lines([line, "short"], width=60)
    assert folded[-1] == "short" and len(folded) > 3
    assert all(len(part) <= 60 for part in folded)
    assert folded[0].startswith("  word0") and all(part.startswith("      ") for part in folded[1:-1])
    assert " ".join(part.strip() for part in folded[:-1]) == line.strip()
    assert not any(part.strip().startswith("+-") for part in folded)
