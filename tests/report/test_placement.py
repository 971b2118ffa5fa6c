"""Where the launches ran (`autospec.report.placement`): per hardware class, hosts, slots
and front members; shown only when a study ran on more than one host, slot or class."""

from __future__ import annotations

from autospec.report.data import StudyData, TrialView, parse_objective
from autospec.report.placement import placement_json, placement_lines


def _trial(number, host, hardware, slot=None, kind="front"):
    worker = {"host": host, "hardware": hardware, **({"slot": {"index": slot, "gpus": [slot]}} if slot is not None else {})}
    return TrialView(
        number=number,
        state="complete",
        kind=kind,
        flags={"x": number},
        values=[float(number)],
        measured=True,
        outcome="ok",
        launched=True,
        worker=worker,
    )


def _data(*trials):
    return StudyData("s", [parse_objective("output_tok_s@c1", "maximize")], list(trials))


def test_one_worker_on_one_gpu_set_needs_no_section():
    data = _data(_trial(0, "a", "NVIDIA H200 x1"), _trial(1, "a", "NVIDIA H200 x1", kind="dominated"))
    assert placement_lines(data) == []
    assert placement_json(data) == [{"hardware": "NVIDIA H200 x1", "launches": 2, "hosts": ["a"], "slots": [], "front": [0]}]


def test_hosts_slots_and_classes_are_listed_and_mixed_classes_are_flagged():
    data = _data(
        _trial(0, "a", "NVIDIA H200 x1", 0),
        _trial(1, "a", "NVIDIA H200 x1", 1, kind="dominated"),
        _trial(2, "b", "NVIDIA H100 x1", 0),
    )
    lines = placement_lines(data)
    assert lines[0] == "NVIDIA H100 x1: 1 launches on b (1 slots); front trials: 2"
    assert lines[1].startswith("NVIDIA H200 x1: 2 launches on a (2 slots); front trials:")
    assert "not comparable one to one" in lines[-1]
