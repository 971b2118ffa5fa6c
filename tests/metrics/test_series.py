"""Per-position figures stored with a level summary pair across launches."""

from __future__ import annotations

import pytest

from autospec.metrics import summarize
from autospec.metrics.series import MIN_REQUEST_WAVES
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


def test_c2_summary_keys_complete_waves_by_number_and_a_short_level_no_request_speeds() -> None:
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
    assert summary.request_speeds == {}  # 7 requests, under MIN_REQUEST_WAVES waves of 2
    assert summary.wave_speeds == {"0": pytest.approx(200.0), "1": pytest.approx(300.0)}


def test_records_without_ids_give_no_series() -> None:
    old = RequestRecord(ok=True, error_kind=None, t_sent=0.0, t_first=0.1, t_done=1.0, completion_tokens=10)
    summary = summarize(LevelResult((old,), wall_s=1.0, concurrency=1))
    assert summary.request_speeds == {}


def test_a_long_c2_level_keys_each_steady_request_without_its_ramp_and_drain() -> None:
    # 10 requests at C=2: positions 0-1 were sent at once, 8-9 finish as the batch drains
    records = tuple(record(i, 1.0 + 0.1 * i, start=float(i // 2)) for i in range(10)) + (record(10, 1.0, ok=False, start=5.0),)
    assert len(records) >= MIN_REQUEST_WAVES * 2
    summary = summarize(LevelResult(records, wall_s=8.0, concurrency=2))
    # 11 measured: the first 2 and the last 2 positions (9 and the failed 10) are left out
    assert set(summary.request_speeds) == {request_id(i, i % 3) for i in range(2, 9)}
    assert summary.request_speeds[request_id(4, 1)] == pytest.approx(100 / 1.4, rel=1e-4)
    one = summarize(LevelResult(records, wall_s=8.0, concurrency=1))  # C=1: every successful request
    assert len(one.request_speeds) == 10
