"""The trial chain's seams (`TrialChain.launcher`, `.bench`, `.clock`): what the in-process
benchmarks plug in. The chain keeps its own rules around them: the record's seconds are
read from the clock, the levels' summaries go through `level_done` into the record, the
values and intervals come from the summaries, and a failed level ends the measuring (the
bench's generator is closed)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from autospec.bench import LevelPlan, PrecisionGoal
from autospec.config import parse_search_space
from autospec.feasibility.gate import FeasibilityGate
from autospec.feasibility.verdict import Verdict
from autospec.launcher import LaunchRequest, StartupFacts, TeardownReport
from autospec.metrics import LevelSummary, summarize
from autospec.request_records import LevelResult, RequestRecord
from autospec.study.chain import ChainHooks, TrialChain
from autospec.study.files import StudyLayout

SPACE = {
    "server": {"flags": {"model_path": "m", "speculative_algorithm": "EAGLE"}},
    "params": {"speculative_num_steps": {"type": "int", "low": 1, "high": 5}},
    "bench": {"concurrency": [1, 4]},
    "objectives": [
        {"metric": "output_tok_s", "concurrency": 1},
        {"metric": "agg_output_tok_s", "concurrency": 4},
    ],
}
LOAD_S, TEARDOWN_S, LEVEL_S = 100.0, 5.0, 7.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class OpenGate(FeasibilityGate):
    def verdict(self, flags: Mapping[str, Any], reuse: bool = True) -> Verdict:
        return Verdict(status="ok", reason="", source="static", rule=None, resolved=dict(flags))


@dataclass
class Server:
    clock: Clock
    argv: list[str] = field(default_factory=lambda: ["server"])
    startup: StartupFacts = field(default_factory=lambda: StartupFacts(max_running_requests=4))
    url: str = "test://"
    log_path: Path | None = None
    stops: int = 0

    def stop(self) -> TeardownReport:
        self.stops += 1
        self.clock.now += TEARDOWN_S
        return TeardownReport(TEARDOWN_S, "TERM", False, (), True, 0.0, True)

    def runtime_events(self) -> dict[str, int]:
        return {}

    def check_alive(self, grace_s: float = 0.0) -> None:
        return None


@dataclass
class Starter:
    clock: Clock
    servers: list[Server] = field(default_factory=list)

    def start(self, req: LaunchRequest, on_spawn: Any = None) -> Server:
        self.clock.now += LOAD_S
        self.servers.append(Server(self.clock))
        return self.servers[-1]


def level(concurrency: int, seconds_per_request: float, n: int = 8) -> LevelSummary:
    """A closed loop of `concurrency` identical requests of 100 tokens."""
    records = []
    for i in range(n):
        sent = (i // concurrency) * seconds_per_request
        records.append(
            RequestRecord(
                True, None, sent, sent + 0.1, sent + seconds_per_request, chunk_times=(sent + 0.1,), completion_tokens=100
            )
        )
    return summarize(LevelResult(tuple(records), 0.0, concurrency))


@dataclass
class ScriptedBench:
    """Yields the summaries it was given, one per plan, advancing the clock per level."""

    clock: Clock
    summaries: dict[int, LevelSummary]
    goals: dict[int, PrecisionGoal] = field(default_factory=dict)
    origin: float | None = None
    measured: list[int] = field(default_factory=list)
    closed: bool = False

    async def levels(
        self, server: Any, plans: Sequence[LevelPlan], goals: Mapping[int, PrecisionGoal], hooks: ChainHooks, origin: float
    ) -> AsyncGenerator[LevelSummary, None]:
        self.goals, self.origin = dict(goals), origin
        try:
            for plan in plans:
                hooks.phase(f"bench c={plan.concurrency}")
                self.clock.now += LEVEL_S
                self.measured.append(plan.concurrency)
                yield self.summaries[plan.concurrency]
        finally:
            self.closed = True


def make_chain(tmp_path: Path, summaries: dict[int, LevelSummary]) -> tuple[TrialChain, ScriptedBench, Starter]:
    clock = Clock()
    bench, starter = ScriptedBench(clock, summaries), Starter(clock)
    chain = TrialChain(
        space=parse_search_space(SPACE),
        launcher=starter,
        gate=OpenGate(),
        command=("server",),
        layout=StudyLayout(folder=tmp_path, name="s", studies_dir=tmp_path),
        bench=bench,
        clock=clock,
    )
    return chain, bench, starter


def test_seconds_values_and_intervals_come_through_the_seams(tmp_path: Path) -> None:
    summaries = {1: level(1, 2.0), 4: level(4, 4.0)}
    chain, bench, starter = make_chain(tmp_path, summaries)
    kept: list[int] = []

    def level_done(concurrency: int, summary: LevelSummary) -> LevelSummary | None:
        kept.append(concurrency)
        return None

    record = chain.run(0, {"speculative_num_steps": 3}, ChainHooks(level_done=level_done))

    assert record.outcome == "ok", record.reason
    assert record.seconds == {
        "preflight": 0.0,
        "launch": LOAD_S,
        "bench": 2 * LEVEL_S,
        "teardown": TEARDOWN_S,
        "total": LOAD_S + 2 * LEVEL_S + TEARDOWN_S,
    }
    assert record.values == [summaries[1].output_tok_s, summaries[4].agg_output_tok_s]
    assert record.intervals["output_tok_s@c1"]["ci95"] == list(summaries[1].cis["output_tok_s"])
    assert kept == [1, 4] and set(record.bench) == {1, 4}
    assert starter.servers[0].stops == 1
    # the goals' caps count from the bench's start on the chain's clock, from the launch's seconds
    assert bench.origin == 1000.0 + LOAD_S
    assert set(bench.goals) == {1, 4} and bench.goals[4].cap_s == chain.goals(LOAD_S)[4].cap_s


def test_a_failed_level_ends_the_measuring_and_closes_the_bench(tmp_path: Path) -> None:
    failed = level(1, 2.0, n=0)  # no request: the level failed
    assert failed.failed_reason
    chain, bench, starter = make_chain(tmp_path, {1: failed, 4: level(4, 4.0)})

    record = chain.run(0, {"speculative_num_steps": 3})

    assert record.outcome == "bench_failed" and record.reason.startswith("c=1: ")
    assert bench.measured == [1] and bench.closed
    assert starter.servers[0].stops == 1
    assert record.seconds["bench"] == LEVEL_S


def test_the_studys_stream_reaches_the_levels_goals(tmp_path: Path) -> None:
    chain, bench, _ = make_chain(tmp_path, {1: level(1, 2.0), 4: level(4, 4.0)})
    chain.run(0, {"speculative_num_steps": 3}, stream={1: 23})
    assert bench.goals[1].stream_requests == 23 and bench.goals[4].stream_requests == 0
    assert bench.goals[1].cap_s < bench.goals[4].cap_s  # the stream takes no time of the later levels


@dataclass
class InterruptedBench:
    """Two stop signals: the first arrives inside a request's task mid-level, the second while
    `asyncio.run` cancels the tasks left (as the study's signal policy raises them)."""

    async def levels(
        self, server: Any, plans: Sequence[LevelPlan], goals: Mapping[int, PrecisionGoal], hooks: ChainHooks, origin: float
    ) -> AsyncGenerator[LevelSummary, None]:
        async def request() -> None:
            raise KeyboardInterrupt

        async def stream() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                raise KeyboardInterrupt from None

        loop = asyncio.get_running_loop()
        streaming = loop.create_task(stream())
        await asyncio.sleep(0)
        assert not streaming.done()
        await loop.create_task(request())
        yield level(1, 2.0)


def test_a_stop_signal_mid_level_tears_down_and_leaves_no_task_traceback(tmp_path: Path, caplog) -> None:
    chain, _, starter = make_chain(tmp_path, {})
    chain.bench = InterruptedBench()
    with pytest.raises(KeyboardInterrupt):
        chain.run(0, {"speculative_num_steps": 3})
    gc.collect()  # a task holding an unretrieved exception reports it when collected
    assert starter.servers[0].stops == 1
    assert "never retrieved" not in caplog.text  # asyncio logs it
