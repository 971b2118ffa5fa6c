"""What the table and a pick say of a figure that pools launches of other configurations
(the same server at that concurrency: `autospec.records.front.objective_groups`)."""

from __future__ import annotations

from autospec.report.data import Measure, StudyData, TrialView, parse_objective
from autospec.report.support import runner_up, support_note
from autospec.report.table import build_table, shared_note, table_json

OBJECTIVES = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]


def view(number: int, kind: str, c1: float, c32: float, launches=(1, 1), pooled_with=((), ())) -> TrialView:
    """A pooled view: `launches[i]` launches behind objective i's figure; its own are those
    behind C=32, which pools with no other configuration here."""
    return TrialView(
        number=number,
        state="complete",
        kind=kind,
        flags={"speculative_num_steps": 4, "mem_fraction_static": 0.8 + number / 100},
        values=[c1, c32],
        measured=True,
        outcome="ok",
        launched=True,
        pooled=(Measure(c1, c1 * 0.02, 8), Measure(c32, c32 * 0.05, 64)),
        launches=launches[1],
        objective_launches=launches,
        pooled_with=pooled_with,
    )


def study() -> StudyData:
    trials = [
        view(10, "front", 265.5, 1911.0, launches=(4, 2), pooled_with=((7, 11), ())),
        view(7, "dominated", 265.5, 1571.0, launches=(4, 1), pooled_with=((10, 11), ())),
        view(11, "dominated", 265.5, 1700.0, launches=(4, 1), pooled_with=((7, 10), ())),
        view(6, "front", 263.4, 1950.0),
        view(5, "dominated", 263.4, 1800.0),  # pooled with 6 at C=1: 6, on the front, stands for both
    ]
    return StudyData("s", OBJECTIVES, trials)


def test_a_pick_says_which_launches_of_other_configurations_its_figure_rests_on():
    data = study()
    chosen = data.trial(10)
    assert chosen is not None
    text = support_note(data, chosen, 0)
    assert "rests on 4 launches (2 of its own, 2 of trial(s) 7, 11: the same server at C=1" in text
    # its own server at C=1 is not its rival there: the runner-up is another server
    other = runner_up(data, chosen, 0)
    assert other is not None and other.number == 6
    assert support_note(data, chosen, 1).startswith(" It rests on 2 launches;")


def test_the_table_and_its_json_name_the_configurations_a_figure_pools():
    data = study()
    row = next(r for r in build_table(data).rows if r.number == 10)
    assert shared_note(data, data.trial(10)) in row.marks
    assert "C=1 pooled with trial(s) 7, 11" in shared_note(data, data.trial(10))
    assert shared_note(data, data.trial(6)) == ""
    [entry] = [e for e in table_json(build_table(data)) if e["number"] == 10]
    assert entry["objectives"]["output_tok_s@c1"]["launches"] == 4
    assert entry["objectives"]["output_tok_s@c1"]["pooled_with"] == [7, 11]
    assert entry["objectives"]["agg_output_tok_s@c32"]["pooled_with"] == []
