"""The precision loop: the pure stopping rule, then one open-ended level against the
fake server for each way a level stops (target, cap, ceiling, failed, external)."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from autospec.bench import (
    BenchClient,
    Figure,
    LevelPlan,
    PrecisionGoal,
    Stop,
    Workload,
    figure_state,
    run_level_precise,
    run_level_with,
    stop_rule,
)
from autospec.bench.records import LevelResult, RequestRecord
from autospec.errors import ConfigError
from autospec.metrics import PRECISE_SLICES, LevelSummary, summarize

from .fake_server import Reply

WORKLOAD = Workload("synthetic", output_len=6)


def _record(i: int, speed: float = 100.0) -> RequestRecord:
    t0 = float(i)
    return RequestRecord(
        ok=True,
        error_kind=None,
        t_sent=t0,
        t_first=t0 + 0.01,
        t_done=t0 + 10 / speed,
        chunk_times=(t0 + 0.01, t0 + 10 / speed),
        chunk_tokens=(1, 9),
        completion_tokens=10,
    )


def summary_of(**changes) -> LevelSummary:
    """A C=1 summary of 10 requests, with fields replaced (cis merged)."""
    base = summarize(LevelResult(tuple(_record(i) for i in range(10)), 10.0, 1))
    cis = {**base.cis, **changes.pop("cis", {})}
    return dataclasses.replace(base, cis=cis, **changes)


def goal(*figures: Figure, floor: int = 4, ceiling: int = 100, cap_s: float = 60.0) -> PrecisionGoal:
    return PrecisionGoal(figures or (Figure("output_tok_s", 0.02),), min_requests=floor, max_requests=ceiling, cap_s=cap_s)


PRECISE = {"output_tok_s": (99.0, 101.0)}  # +-1% around 100
WIDE = {"output_tok_s": (90.0, 110.0)}  # +-10%


# --------------------------------------------------------------- the pure rule


def test_target_reached_stops_with_the_intervals_in_the_detail() -> None:
    stop = stop_rule(summary_of(output_tok_s=100.0, cis=PRECISE), goal(), elapsed_s=1.0, sent=10)
    assert stop is not None and stop.reason == "target"
    assert "output_tok_s +-1.00% (precise, target +-2.00%)" in stop.detail


def test_a_precise_level_goes_on_to_the_studys_stream_but_the_cap_still_stops_it() -> None:
    precise = summary_of(output_tok_s=100.0, cis=PRECISE)
    stream = dataclasses.replace(goal(), stream_requests=23)
    assert stop_rule(precise, stream, elapsed_s=1.0, sent=10) is None  # earlier launches measured 23
    assert stop_rule(precise, stream, elapsed_s=1.0, sent=23).reason == "target"  # type: ignore[union-attr]
    assert stop_rule(precise, dataclasses.replace(stream, cap_s=1.5), elapsed_s=1.0, sent=10).reason == "cap"  # type: ignore[union-attr]


def test_below_the_floor_it_always_continues() -> None:
    assert stop_rule(summary_of(output_tok_s=100.0, cis=PRECISE), goal(floor=20), elapsed_s=1.0, sent=10) is None
    assert stop_rule(summary_of(output_tok_s=100.0, cis=WIDE), goal(floor=20), elapsed_s=999.0, sent=19) is None


def test_a_wide_interval_continues_while_time_and_requests_are_left() -> None:
    assert stop_rule(summary_of(output_tok_s=100.0, cis=WIDE), goal(), elapsed_s=10.0, sent=10) is None


def test_the_cap_stops_before_a_slice_that_would_pass_it() -> None:
    wide = summary_of(output_tok_s=100.0, cis=WIDE)
    assert stop_rule(wide, goal(cap_s=60.0), elapsed_s=58.9, sent=10) is None
    stop = stop_rule(wide, goal(cap_s=60.0), elapsed_s=59.5, sent=10)  # one more second would pass 60 s
    assert stop is not None and stop.reason == "cap" and stop.detail.startswith("59.5 s of 60.0 s measured")
    zero = stop_rule(wide, goal(cap_s=0.0), elapsed_s=0.0, sent=4)  # no budget: the floor only
    assert zero is not None and zero.reason == "cap"


def test_the_cap_leaves_room_for_the_drain() -> None:
    # Requests of 3 s each (median): stopping at 56.5 s sends nothing more, and what is in
    # flight ends by about 59.5 s; one more second of sending would end past 60 s.
    slow = summary_of(output_tok_s=100.0, cis=WIDE, e2e_ms_p50=3000.0)
    assert stop_rule(slow, goal(cap_s=60.0), elapsed_s=55.9, sent=10) is None
    stop = stop_rule(slow, goal(cap_s=60.0), elapsed_s=56.5, sent=10)
    assert stop is not None and stop.reason == "cap"


def test_the_ceiling_stops_a_level_that_is_still_wide() -> None:
    stop = stop_rule(summary_of(output_tok_s=100.0, cis=WIDE), goal(ceiling=50), elapsed_s=1.0, sent=50)
    assert stop == Stop("ceiling", stop.detail) and stop.detail.startswith("50 requests sent (ceiling 50)")


def test_a_failed_level_stops_first() -> None:
    failing = summary_of(output_tok_s=100.0, cis=PRECISE, failed_reason="3 of 10 requests failed")
    assert stop_rule(failing, goal(), elapsed_s=1.0, sent=10) == Stop("failed", "3 of 10 requests failed")


def test_the_external_hook_stops_a_level_and_its_text_is_kept() -> None:
    seen: list[LevelSummary] = []

    def race(summary: LevelSummary) -> str | None:
        seen.append(summary)
        return "dominated by trial 3" if summary.output_tok_s < 150 else None

    wide = summary_of(output_tok_s=100.0, cis=WIDE)
    assert stop_rule(wide, goal(), 1.0, 10, race) == Stop("external", "dominated by trial 3")
    assert seen == [wide]
    assert stop_rule(summary_of(output_tok_s=200.0, cis=WIDE), goal(), 1.0, 10, race) is None  # hook: go on
    assert stop_rule(wide, goal(floor=20), 1.0, 10, race) is None and len(seen) == 2  # not asked below the floor


def test_a_constraint_is_settled_once_its_interval_is_on_one_side_of_the_bound() -> None:
    p99 = Figure("ttft_ms_p99", 0.02, high=2000.0)
    surely_over = summary_of(ttft_ms_p99=2600.0, cis={"ttft_ms_p99": (2500.0, math.nan)})  # no upper bound known
    surely_under = summary_of(ttft_ms_p99=1500.0, cis={"ttft_ms_p99": (1000.0, 1900.0)})  # +-30%, but below 2000
    straddling = summary_of(ttft_ms_p99=1900.0, cis={"ttft_ms_p99": (1700.0, 2100.0)})
    assert figure_state(surely_over, p99)[0] == "settled"
    assert figure_state(surely_under, p99)[0] == "settled"
    assert figure_state(straddling, p99)[0] == "wide"
    assert stop_rule(surely_under, goal(p99), 1.0, 10).reason == "target"  # type: ignore[union-attr]
    assert stop_rule(straddling, goal(p99), 1.0, 10) is None


def test_a_short_steady_window_keeps_the_aggregate_measuring() -> None:
    agg = Figure("agg_output_tok_s", 0.02)
    narrow = {"agg_output_tok_s": (990.0, 1010.0)}
    short = summary_of(agg_output_tok_s=1000.0, cis=narrow, steady_short=True, steady_share=0.3)
    steady = dataclasses.replace(
        short, steady_short=False, steady_share=0.8, agg_ci_method="batch-means", steady_slices=PRECISE_SLICES
    )
    assert figure_state(short, agg)[0] == "steady-short" and stop_rule(short, goal(agg), 1.0, 10) is None
    assert figure_state(steady, agg)[0] == "precise" and stop_rule(steady, goal(agg), 1.0, 10).reason == "target"  # type: ignore[union-attr]


@pytest.mark.parametrize(("method", "slices"), [("short-window", 1), ("batch-means", 3), ("batch-means", PRECISE_SLICES - 1)])
def test_a_narrow_aggregate_interval_on_few_waves_is_thin_not_precise(method: str, slices: int) -> None:
    """A window of few waves can look precise by luck (+-1.1% while running, +-13.5% once
    drained, in a quick start): the level measures on, and stops at its cap, not at target."""
    agg = Figure("agg_output_tok_s", 0.02)
    narrow = {"agg_output_tok_s": (990.0, 1010.0)}
    thin = summary_of(
        agg_output_tok_s=1000.0, cis=narrow, steady_short=False, steady_share=0.8, agg_ci_method=method, steady_slices=slices
    )
    assert figure_state(thin, agg)[0] == "thin"
    assert stop_rule(thin, goal(agg), 1.0, 10) is None
    assert stop_rule(thin, goal(agg, cap_s=1.5), 1.0, 10).reason == "cap"  # type: ignore[union-attr]
    repeats = dataclasses.replace(thin, agg_ci_method="repeats")
    assert figure_state(repeats, agg)[0] == "precise"  # runs are independent: their spread is known
    # nor does a thin interval settle a constraint, however far beyond its bound it lies
    slo = Figure("agg_output_tok_s", 0.02, low=1500.0)
    assert figure_state(thin, slo)[0] == "thin" and stop_rule(thin, goal(slo), 1.0, 10) is None
    assert figure_state(repeats, slo)[0] == "settled"


def test_figures_without_an_interval_do_not_hold_a_level_back() -> None:
    s = summary_of(output_tok_s=100.0, cis=PRECISE, accept_length=None)
    figures = (Figure("output_tok_s"), Figure("accept_length"), Figure("itl_ms_p99"))
    assert [figure_state(s, f)[0] for f in figures] == ["precise", "unmeasurable", "unmeasurable"]
    assert stop_rule(s, goal(*figures), 1.0, 10).reason == "target"  # type: ignore[union-attr]


def test_unknown_intervals_are_not_precise() -> None:
    s = summary_of(output_tok_s=100.0, cis={"output_tok_s": (math.nan, math.nan)})
    assert figure_state(s, Figure("output_tok_s"))[0] == "unknown"
    assert stop_rule(s, goal(), 1.0, 10) is None


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: Figure("speed"), "unknown metric"),
        (lambda: Figure("output_tok_s", 0.0), r"target_rel_ci must be in \(0, 1\)"),
        (lambda: PrecisionGoal((), min_requests=10, max_requests=5, cap_s=1.0), "min_requests"),
        (lambda: PrecisionGoal((), min_requests=1, max_requests=5, cap_s=-1.0), "cap_s"),
    ],
)
def test_bad_goals(make, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        make()


# ------------------------------------------------ one open-ended level, end to end


def _precise(url: str, plan: LevelPlan, level_goal: PrecisionGoal, **kw):
    return asyncio.run(run_level_precise(url, WORKLOAD, plan, level_goal, **kw))


def test_a_level_that_is_precise_at_its_floor_stops_there(fake_server) -> None:
    # 40 ms per request: a few ms of scheduling jitter is well inside +-99% at 3 requests.
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2, delay_s=0.02))
    run = _precise(server.url, LevelPlan(2, warmup_requests=1), goal(Figure("output_tok_s", 0.99), floor=4))
    assert run.stop.reason == "target" and run.summary.stop_reason == "target"
    assert run.summary.n_requests == 4 and len(server.bodies) == 1 + 4  # warmup + the floor
    info = run.summary.precision
    assert info is not None and info["stop"] == "target" and info["min_requests"] == 4 and info["checks"] == 1
    assert info["targets"] == {"output_tok_s": 0.99} and 0 <= info["rel_ci"]["output_tok_s"] <= 0.99
    assert run.summary.as_dict()["precision"]["stop"] == "target"


def test_no_budget_stops_at_the_floor_with_cap(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    run = _precise(server.url, LevelPlan(2), goal(Figure("output_tok_s", 1e-9), floor=6, cap_s=0.0))
    assert run.stop.reason == "cap" and run.summary.n_requests == 6


def test_an_unreachable_target_with_time_left_runs_to_the_ceiling(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    run = _precise(server.url, LevelPlan(3), goal(Figure("output_tok_s", 1e-9), floor=3, ceiling=12, cap_s=3600.0))
    assert run.stop.reason == "ceiling" and run.summary.n_requests == 12 and len(server.bodies) == 12
    assert run.result.metadata["sent"] == 12


def test_a_failing_level_stops_with_failed(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(kind="status") if n % 2 else Reply(tokens=6))
    run = _precise(server.url, LevelPlan(2), goal(Figure("output_tok_s", 1e-9), floor=4, cap_s=3600.0))
    assert run.stop.reason == "failed" and "requests failed" in run.stop.detail
    assert run.summary.failed and run.summary.stop_reason == "failed"


def test_the_callers_hook_stops_a_level_early(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    asked: list[int] = []

    def hook(summary: LevelSummary) -> str | None:
        asked.append(summary.n_ok)
        return "clearly dominated"

    run = _precise(server.url, LevelPlan(2), goal(Figure("output_tok_s", 1e-9), floor=4, cap_s=3600.0), should_stop=hook)
    assert run.stop == Stop("external", "clearly dominated")
    assert run.summary.stop_reason == "external" and run.summary.precision["detail"] == "clearly dominated"  # type: ignore[index]
    assert run.summary.n_requests == 4 and len(asked) == 1 and asked[0] >= 1  # asked once, at the floor


def test_a_noisy_level_keeps_measuring_past_its_floor_until_precise(fake_server) -> None:
    # Requests alternate between two speeds (a factor 2): the t interval of 2 requests is
    # far wider than +-25%, so the level goes on until it has enough of them.
    server = fake_server(lambda n, body: Reply(tokens=4, per_event=1, delay_s=0.004 if n % 2 else 0.008))
    level_goal = dataclasses.replace(goal(Figure("output_tok_s", 0.25), floor=2, ceiling=400, cap_s=3600.0), check_every_s=1e-6)
    run = _precise(server.url, LevelPlan(1), level_goal)
    assert run.stop.reason == "target"
    assert run.summary.n_requests > 2
    assert run.summary.precision["rel_ci"]["output_tok_s"] <= 0.25  # type: ignore[index]
    assert run.summary.precision["checks"] >= 2  # type: ignore[index]


def test_open_ended_levels_need_a_request_count_and_room_above_it(fake_server) -> None:
    server = fake_server()

    async def attempt(plan: LevelPlan, max_requests: int | None) -> None:
        async with BenchClient(server.url, WORKLOAD) as client:
            await run_level_with(client, plan, extend=lambda sent, records: True, max_requests=max_requests)

    with pytest.raises(ConfigError, match="needs a request count, not a duration"):
        asyncio.run(attempt(LevelPlan(2, duration_s=1.0), 10))
    with pytest.raises(ConfigError, match=r"max_requests \(3\) must be at least the level's 4 requests"):
        asyncio.run(attempt(LevelPlan(2, num_requests=4), 3))
    assert server.bodies == []
