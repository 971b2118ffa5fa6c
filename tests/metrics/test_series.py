"""Per-position figures stored with a level summary pair across launches."""

from __future__ import annotations

import pytest

from autospec.metrics import summarize
from autospec.request_records import LevelResult, RequestRecord, request_id


def record(position: int, latency: float, tokens: int = 100, ok: bool = True, start: float = 0.0) -> RequestRecord:
    return RequestRecord(
        ok=ok,
        error_kind=None if ok else "timeout",
        t_sent=start,
        t_first=start + 0.01,
        t_done=start + latency,
        chunk_times=(start + 0.01, start + latency),
        completion_tokens=tokens if ok else 0,
        position=position,
        request_id=request_id(position, position % 3),
    )


def test_c1_summary_keys_each_requests_speed_by_its_id_and_leaves_failed_ones_out() -> None:
    records = (record(0, 1.0), record(1, 0.5), record(2, 2.0, ok=False), record(3, 0.25))
    summary = summarize(LevelResult(records, wall_s=4.0, concurrency=1))
    assert summary.request_speeds == {"0.0": 100.0, "1.1": 200.0, "3.0": 400.0}
    assert summary.wave_speeds == {}
    assert summary.as_dict()["request_speeds"] == summary.request_speeds


def test_c2_summary_keys_every_request_and_complete_waves() -> None:
    records = (
        record(0, 1.0),
        record(1, 1.0),
        record(2, 0.5, start=1.0),
        record(3, 0.5, tokens=50, start=1.0),
        record(4, 1.0, ok=False, start=1.5),
        record(5, 1.0, start=1.5),
        record(6, 1.0, start=2.5),  # its partner never ran: an incomplete wave
    )
    summary = summarize(LevelResult(records, wall_s=4.0, concurrency=2))
    # each successful request done by the last send (t=2.5), the failed one left out, and 6
    # (sent last) and 5 (done at 2.5 exactly counts; its wave partner failed) as they stand
    assert summary.request_speeds == {"0.0": 100.0, "1.1": 100.0, "2.2": 200.0, "3.0": 100.0, "5.2": 100.0}
    assert summary.wave_speeds == {"0": pytest.approx(200.0), "1": pytest.approx(300.0)}


def test_records_without_ids_give_no_series() -> None:
    old = RequestRecord(ok=True, error_kind=None, t_sent=0.0, t_first=0.1, t_done=1.0, completion_tokens=10)
    summary = summarize(LevelResult((old,), wall_s=1.0, concurrency=1))
    assert summary.request_speeds == {}


def test_c2_requests_still_running_at_the_last_send_are_left_out_as_they_drain() -> None:
    records = (
        record(0, 1.0),
        record(1, 3.0),  # still running when 2 and 3 are sent: it finishes as the batch drains
        record(2, 1.0, start=1.0),
        record(3, 0.5, start=2.0),  # the last send
    )
    summary = summarize(LevelResult(records, wall_s=4.0, concurrency=2))
    assert set(summary.request_speeds) == {request_id(0, 0), request_id(2, 2)}  # done by t=2.0
    one = summarize(LevelResult(records, wall_s=4.0, concurrency=1))  # C=1: nothing runs beside a request
    assert len(one.request_speeds) == 4
