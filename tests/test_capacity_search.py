"""The capacity search (`autospec.metrics.capacity`): which levels it measures, where it stops,
and how a level's summary is judged against the bounds."""

from __future__ import annotations

import pytest

from autospec.metrics.capacity import CapacitySearch, SloBound, broken_bounds


def _search_against(threshold: int, start: int = 1, limit: int = 256) -> tuple[CapacitySearch, list[int]]:
    """Run the search against a server whose bound holds up to `threshold` concurrent requests."""
    search = CapacitySearch(start, limit)
    measured: list[int] = []
    level = search.next()
    while level is not None:
        assert level not in measured, f"level {level} measured twice"
        measured.append(level)
        search.record(level, level <= threshold)
        level = search.next()
    return search, measured


@pytest.mark.parametrize("threshold", [1, 2, 3, 5, 8, 9, 13, 31, 100, 255])
def test_the_capacity_is_the_threshold_and_the_next_level_was_measured_and_broke(threshold):
    search, measured = _search_against(threshold)
    assert search.capacity == threshold
    assert search.first_broken == threshold + 1
    assert threshold in measured and threshold + 1 in measured
    assert search.results[threshold] is True and search.results[threshold + 1] is False


def test_doubling_then_bisection_measures_few_levels():
    _, measured = _search_against(13)
    assert measured == [1, 2, 4, 8, 16, 12, 14, 13]


def test_every_level_up_to_the_limit_holding_ends_at_the_limit_without_a_broken_level():
    search, measured = _search_against(10_000, limit=48)
    assert measured == [1, 2, 4, 8, 16, 32, 48]
    assert search.capacity == 48 and search.first_broken is None


def test_a_first_level_that_breaks_leaves_no_capacity_and_looks_below_it():
    search, measured = _search_against(0, start=1)
    assert measured == [1] and search.capacity is None and search.first_broken == 1
    search, measured = _search_against(2, start=8)
    assert measured == [8, 4, 2, 3]
    assert search.capacity == 2 and search.first_broken == 3


def test_a_start_outside_the_range_is_refused():
    with pytest.raises(ValueError, match=r"start 9 must be within 1\.\.limit 8"):
        CapacitySearch(9, 8)


def test_bounds_judge_a_level_summary():
    bound = SloBound("ttft_ms_p99", 2000.0)
    assert bound.problem({"ttft_ms_p99": 1999.0}) is None
    assert bound.problem({"ttft_ms_p99": 2000.0}) is None
    assert bound.problem({"ttft_ms_p99": 2100.5}) == "ttft_ms_p99 2100.5 > 2000"
    assert bound.problem({"ttft_ms_p99": None}) == "ttft_ms_p99 not measured"
    both = (bound, SloBound("tpot_ms_p99", 40.0))
    assert broken_bounds({"ttft_ms_p99": 100.0, "tpot_ms_p99": 30.0, "failed_reason": None}, both) == []
    assert broken_bounds({"ttft_ms_p99": 100.0, "tpot_ms_p99": 41.0}, both) == ["tpot_ms_p99 41.0 > 40"]
    failed = broken_bounds({"ttft_ms_p99": 100.0, "tpot_ms_p99": 30.0, "failed_reason": "3 of 4 requests failed"}, both)
    assert failed == ["level failed: 3 of 4 requests failed"]


def _curve(capacity, first_broken, stopped, levels):
    points = [{"concurrency": c, "holds": ok, "broken": [] if ok else ["ttft_ms_p99 9.0 > 8"]} for c, ok in levels]
    bounds = [{"metric": "ttft_ms_p99", "max": 8.0}]
    return {"bounds": bounds, "capacity": capacity, "first_broken": first_broken, "stopped": stopped, "points": points}


@pytest.mark.parametrize(
    ("capacity", "first_broken", "levels", "says"),
    [
        (None, None, [], "stopped by SIGTERM after 0 finished levels: no capacity known under ttft_ms_p99 <= 8"),
        (8, None, [(1, True), (8, True)], "stopped by SIGTERM after 2 finished levels: capacity C>=8 so far under"),
        (
            8,
            16,
            [(8, True), (16, False)],
            "after 2 finished levels: capacity between C=8 and C=15 (C=8 held, C=16 broke) under ttft_ms_p99 <= 8",
        ),
        (None, 4, [(4, False)], "after 1 finished level: C=4 broke, no lower level measured under"),
    ],
)
def test_a_stopped_search_says_what_its_finished_levels_show(capacity, first_broken, levels, says):
    from autospec.report.capacity import summary_line

    assert says in summary_line(_curve(capacity, first_broken, "SIGTERM", levels))


def test_a_search_stopped_after_it_settled_reports_the_capacity_and_timeout_is_named():
    from autospec.report.capacity import summary_line

    settled = _curve(13, 14, "SIGTERM", [(13, True), (14, False)])
    assert summary_line(settled).startswith("capacity C=13 under ttft_ms_p99 <= 8; C=14 breaks it")
    assert summary_line(_curve(None, None, "timeout", [])).startswith("stopped at --timeout after 0 finished levels")
