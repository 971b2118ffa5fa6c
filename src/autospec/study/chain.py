"""One trial: candidate -> verdict -> launch -> benchmark -> metrics -> teardown.

`TrialChain.run` never lets a server outlive it: every path that started a process
stops it (TERM to the group, KILL after a timeout, wait for GPU memory and port)
before returning or re-raising. Failures of the *configuration* (rejected, OOM at
init, crash, too many request errors) become a `TrialRecord` with an outcome;
only KeyboardInterrupt (after teardown) and bugs propagate.

Three seams let the in-process benchmarks (benchmarks/_simulated_chain.py) run this
chain without processes or HTTP: `launcher` is anything with Launcher's `start`
(`ServerStarter`, returning a `ServerHandle`), `bench` measures the levels (`LevelBench`;
None: `HttpBench`, the benchmark client over HTTP) and `clock` is what the record's
seconds and the precision loop's caps are read from (`time.monotonic`; a simulated
launcher and bench advance a clock of their own).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autospec.bench import (
    AcceptTracker,
    BenchClient,
    Figure,
    LevelPlan,
    PrecisionGoal,
    Workload,
    run_level_precise_with,
    run_level_with,
)
from autospec.config import SearchSpace
from autospec.feasibility.gate import FeasibilityGate
from autospec.feasibility.verdict import Verdict
from autospec.launcher import LaunchError, LaunchRequest, StartupFacts, TeardownReport
from autospec.launcher.launch import OnSpawn
from autospec.metrics import LevelSummary, metric_value, summarize, with_accept_length
from autospec.records import DUPLICATE, OK, TrialRecord
from autospec.study.files import StudyLayout
from autospec.study.slots import crowded_out

__all__ = ["TrialChain", "ChainHooks", "HttpBench", "LevelBench", "ServerHandle", "ServerStarter"]

#: after a level whose requests failed, how long the chain waits for the server's process to exit
#: before it classifies the launch: a crashing server's connections drop a moment before its
#: process is gone (seen with the simulator's crash_after_requests fault on a loaded machine),
#: and a launch classified in that moment read as a failed benchmark, not a crash
CRASH_GRACE_S = 5.0


@dataclass
class ChainHooks:
    """Observer callbacks; all optional. `phase` names: preflight, launch, bench c=N,
    teardown. `measured(record)` is called when the benchmark is over and before the
    server is torn down (the record holds the trial's values by then), so that work for
    the next trial can overlap the teardown.

    `stop_level(concurrency, summary)` is asked while a level's precision loop runs
    (after its floor, at most once per second, with the summary of the records so far):
    a text stops that level early (stored as stop reason "external" with the text as
    its detail), None lets it go on; e.g. for racing configurations that are clearly
    dominated (`autospec.study.racing`). `level_done(concurrency, summary)` is called
    with each level's final summary, and may answer the summary to keep instead (the
    race adds how the drained level judged its stop); None keeps it as it is."""

    phase: Callable[[str], None] = lambda name: None
    spawned: Callable[[dict[str, Any]], None] = lambda info: None
    measured: Callable[[TrialRecord], None] = lambda record: None
    stop_level: Callable[[int, LevelSummary], str | None] = lambda concurrency, summary: None
    level_done: Callable[[int, LevelSummary], LevelSummary | None] = lambda concurrency, summary: None


class ServerHandle(Protocol):
    """What the chain uses of a started server (`autospec.launcher.RunningServer`)."""

    @property
    def argv(self) -> list[str]: ...
    @property
    def startup(self) -> StartupFacts: ...
    @property
    def url(self) -> str: ...
    @property
    def log_path(self) -> Path | None: ...
    def stop(self) -> TeardownReport: ...
    def runtime_events(self) -> dict[str, int]: ...
    def check_alive(self, grace_s: float = 0.0) -> None: ...


class ServerStarter(Protocol):
    """What the chain uses of a launcher (`autospec.launcher.Launcher`): start a server
    ready, or raise the classified `LaunchError`."""

    def start(self, req: LaunchRequest, on_spawn: OnSpawn | None = None) -> ServerHandle: ...


class LevelBench(Protocol):
    """How a trial's levels are measured on its running server.

    `levels` measures `plans` in order and yields each level's summary as the level
    ends; it calls `hooks.phase(f"bench c={C}")` before a level, runs the precision loop
    where `goals` holds a goal for the level (asking `hooks.stop_level(C, summary)` while
    it runs), and counts the goals' caps from `origin` (a reading of the chain's clock).
    The chain stops iterating after a level that failed or killed the server."""

    def levels(
        self, server: Any, plans: Sequence[LevelPlan], goals: Mapping[int, PrecisionGoal], hooks: ChainHooks, origin: float
    ) -> AsyncGenerator[LevelSummary, None]: ...


@dataclass(frozen=True)
class HttpBench:
    """The benchmark client over HTTP (the product's `LevelBench`): every level through
    one client; accept length from the server where the responses carry none."""

    workload: Workload
    timeout_s: float
    max_error_rate: float

    async def levels(
        self, server: Any, plans: Sequence[LevelPlan], goals: Mapping[int, PrecisionGoal], hooks: ChainHooks, origin: float
    ) -> AsyncGenerator[LevelSummary, None]:
        async with BenchClient(server.url, self.workload, timeout_s=self.timeout_s) as client:
            await client.resolve_model()
            tracker = AcceptTracker(client, getattr(server, "log_path", None))
            for plan in plans:
                c = plan.concurrency
                hooks.phase(f"bench c={c}")
                await tracker.begin()
                goal = goals.get(c)
                if goal is not None:
                    precise = await run_level_precise_with(
                        client, plan, goal, origin=origin, should_stop=functools.partial(hooks.stop_level, c)
                    )
                    result, summary = precise.result, precise.summary
                else:
                    result = await run_level_with(client, plan)
                    summary = summarize(result, max_error_rate=self.max_error_rate)
                estimate = await tracker.end(result)
                if estimate is not None:
                    summary = with_accept_length(summary, estimate.value, estimate.source)
                yield summary


def _quiet_interrupts(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The benchmark loop's exception handler: a stop signal (KeyboardInterrupt, raised in a
    task by the study's signal policy) propagates out of `asyncio.run` and ends the trial as
    interrupted; the task that held it is not reported again when collected ("Task exception
    was never retrieved", 75 lines on SGLang 0.5.16 / H100 when SIGTERM came mid-level)."""
    if not isinstance(context.get("exception"), KeyboardInterrupt):
        loop.default_exception_handler(context)


def _interval_entry(summary: LevelSummary, metric: str) -> dict[str, Any]:
    """`TrialRecord.intervals`' entry for one figure of a level."""
    interval = summary.cis.get(metric)
    known = interval is not None and all(math.isfinite(x) for x in interval)
    return {
        "value": metric_value(summary, metric),
        "ci95": [float(interval[0]), float(interval[1])] if known and interval is not None else None,
        "method": summary.agg_ci_method if metric == "agg_output_tok_s" else None,
    }


@dataclass
class TrialChain:
    space: SearchSpace
    launcher: ServerStarter
    gate: FeasibilityGate
    command: Sequence[str]
    layout: StudyLayout
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float | None = None
    shared_gpu: bool = False  # the slot shares its GPU with another slot (`slots.crowded_out`)
    bench: LevelBench | None = None  # None: `HttpBench` over the space's workload
    clock: Callable[[], float] = time.monotonic  # the record's seconds and the caps' clock

    def workload(self) -> Workload:
        return self.space.workload

    def plans(self) -> list[LevelPlan]:
        """One plan per level; each warms up with `warmup_requests` waves of C requests
        (of `warmup_output_len` tokens, default the workload's): the first requests at a new
        batch size pay for kernel compilation (measured on SGLang 0.5.16 / H200: TTFT p99
        2.5 s at C=32 on a configuration's first launch, 64-77 ms on its relaunches), and past
        them, up to `warmup_cap` requests, while the rate still trends (NGRAM's cache climbs
        over the first 25 C=1 requests there)."""
        b = self.space.bench
        return [
            LevelPlan(
                concurrency=c,
                num_requests=b.num_requests(c),
                warmup_requests=b.warmup_requests * c,
                freeze_gc=b.freeze_gc,
                warmup_output_len=b.warmup_output_len,
                warmup_cap=b.warmup_cap if b.warmup_requests else 0,
            )
            for c in b.concurrency
        ]

    def run(
        self,
        number: int,
        candidate: Mapping[str, Any],
        hooks: ChainHooks | None = None,
        relaunch: bool = False,
        env: Mapping[str, str] | None = None,
        stream: Mapping[int, int] | None = None,
    ) -> TrialRecord:
        """Run one trial. `relaunch`: launch it even though the same server was measured
        before (a confirmation relaunch, `autospec optimize --confirm K`); `env`: added to
        the chain's environment for this trial's server; `stream`: per level, the request
        count the study's stream runs to there (`autospec.records.stream`): the level does
        not stop for its target before it, so that the launch pairs with the earlier ones."""
        hooks = hooks or ChainHooks()
        t0 = self.clock()
        # None unsets a fixed flag (a reference point leaves it to SGLang: `proposing.references`)
        flags = {k: v for k, v in {**self.space.server.flags, **candidate}.items() if v is not None}
        hooks.phase("preflight")
        verdict = self.gate.verdict(flags, reuse=not relaunch)
        seconds = {"preflight": self.clock() - t0}
        if not verdict.ok:
            return self._finish(self._answered(candidate, verdict, seconds), t0)

        self.layout.trial_dir(number).mkdir(parents=True, exist_ok=True)
        request = LaunchRequest(
            command=tuple(self.command),
            flags=flags,
            log_path=self.layout.server_log(number),
            env={**self.env, **(env or {})},
            ready_timeout_s=self.ready_timeout_s or self.space.server.ready_timeout_s,
        )
        record = TrialRecord(
            outcome=OK,
            candidate=dict(candidate),
            resolved=dict(verdict.resolved),
            launched=True,
            seconds=seconds,
            log_path=str(request.log_path),
        )
        hooks.phase("launch")
        t_launch = self.clock()
        server = None
        spawned: dict[str, Any] = {}

        def on_spawn(pid: int, pgid: int, argv: list, port: int) -> None:
            spawned.update(pid=pid, pgid=pgid, argv=argv, port=port)
            hooks.spawned(dict(spawned))

        try:
            try:
                server = self.launcher.start(request, on_spawn=on_spawn)
            except LaunchError as err:
                record.seconds["launch"] = self.clock() - t_launch
                self._launch_failed(record, err, verdict.resolved, spawned.get("argv"))
                return self._finish(record, t0)
            record.seconds["launch"] = self.clock() - t_launch
            record.server_args = list(server.argv)
            record.startup = server.startup.as_dict()
            self._bench(number, server, record, hooks, stream or {})
            hooks.measured(record)
        finally:
            if server is not None:
                hooks.phase("teardown")
                report = server.stop()
                record.teardown = report.as_dict()
                record.seconds["teardown"] = report.seconds
        if record.outcome == OK:
            self.gate.learn_success(verdict.resolved, record.startup or {})
        return self._finish(record, t0)

    def _answered(self, candidate: Mapping[str, Any], verdict: Verdict, seconds: dict[str, float]) -> TrialRecord:
        """The record of a candidate the gate answered without a launch (a duplicate carries
        the measurement it repeats)."""
        record = TrialRecord(
            outcome=verdict.status,
            candidate=dict(candidate),
            reason=verdict.reason,
            resolved=dict(verdict.resolved),
            seconds=seconds,
        )
        source = self.gate.measurement_of(verdict.resolved) if verdict.status == DUPLICATE else None
        if source is not None:
            record.values = list(source.values) if source.values is not None else None
            record.constraints = dict(source.constraints)
            record.duplicate_of = source.number
            record.bench = source.bench
        return record

    def _launch_failed(self, record: TrialRecord, err: LaunchError, resolved: Mapping[str, Any], argv: list[str] | None) -> None:
        """Record a server that did not start, and teach the gate its failure (unless other
        servers crowded this slot's shared GPU: then it is not this configuration's limit)."""
        record.outcome, record.reason, record.server_args = err.kind, str(err), argv
        facts = err.startup.as_dict() if err.startup is not None else {}
        if any(v is not None for v in facts.values()):  # e.g. the free memory before the weights
            record.startup = facts
        if err.teardown is not None:
            record.teardown = err.teardown.as_dict()
            record.seconds["teardown"] = err.teardown.seconds
        others = crowded_out(err.kind, record.teardown) if self.shared_gpu else None
        if others is None:
            self.gate.learn_failure(resolved, err.kind)
        else:
            record.reason += (
                f"; other servers held {others:,.0f} MiB of this slot's shared GPU: not taken as "
                "this configuration's memory limit"
            )

    def goals(self, launch_s: float, stream: Mapping[int, int] | None = None) -> dict[int, PrecisionGoal]:
        """The precision loop's goal per level that feeds an objective or a constraint
        (none with `[bench] precision = false`). Figures: each objective's metric with
        its target (`target_rel_ci`, else [bench]'s), each constraint's with its bounds.
        Time cap: the trial may spend `share x launch_s` measuring (`share_of_launch` of
        the level's objectives, else [bench] `max_share_of_launch`), split evenly over
        the levels; a level's cap is cumulative (what earlier levels left unused passes
        on), counted from the start of the trial's benchmark. `stream`: the study's stream
        per level (`PrecisionGoal.stream_requests`)."""
        b = self.space.bench
        if not b.precision:
            return {}
        figures: dict[int, list[Figure]] = {}
        shares: dict[int, float] = {}
        for o in self.space.objectives:
            figures.setdefault(o.concurrency, []).append(
                Figure(o.metric, o.target_rel_ci if o.target_rel_ci is not None else b.target_rel_ci)
            )
            share = o.share_of_launch if o.share_of_launch is not None else b.max_share_of_launch
            shares[o.concurrency] = max(shares.get(o.concurrency, 0.0), share)
        for c in self.space.constraints:
            figures.setdefault(c.concurrency, []).append(Figure(c.metric, b.target_rel_ci, low=c.min, high=c.max))
            shares[c.concurrency] = max(shares.get(c.concurrency, 0.0), b.max_share_of_launch)
        goals: dict[int, PrecisionGoal] = {}
        level_caps = [
            shares.get(level, b.max_share_of_launch) * max(launch_s, 0.0) / len(b.concurrency) for level in b.concurrency
        ]
        cap = 0.0
        for level, level_cap in zip(b.concurrency, level_caps, strict=True):
            cap += level_cap
            if level in figures:
                goals[level] = PrecisionGoal(
                    figures=tuple(figures[level]),
                    min_requests=b.num_requests(level),
                    max_requests=b.max_requests_at(level),
                    cap_s=cap,
                    max_error_rate=b.max_error_rate,
                    stream_requests=(stream or {}).get(level, 0),
                )
        return goals

    def _bench(self, number: int, server: Any, record: TrialRecord, hooks: ChainHooks, stream: Mapping[int, int]) -> None:
        t_bench = self.clock()
        goals = self.goals(float(record.seconds.get("launch") or 0.0), stream)
        summaries = asyncio.run(self._measure(server, record, hooks, goals, t_bench))
        record.seconds["bench"] = self.clock() - t_bench
        events = server.runtime_events()
        if events:
            record.startup = {**(record.startup or {}), "runtime_events": dict(events)}
        self.layout.bench_json(number).write_text(json.dumps(record.bench, indent=1, default=str))
        if record.outcome != OK:
            return
        measured = {spec.name: metric_value(summaries[spec.concurrency], spec.metric) for spec in self.space.measured_specs}
        missing = [name for name, v in measured.items() if not math.isfinite(v)]
        if missing:
            record.outcome = "bench_failed"
            record.reason = f"{', '.join(missing)} could not be measured (no successful request reported it)"
            return
        record.values = [measured[o.name] for o in self.space.objectives]
        record.intervals = {
            spec.name: _interval_entry(summaries[spec.concurrency], spec.metric) for spec in self.space.measured_specs
        }
        for c in self.space.constraints:
            record.constraints[c.name] = c.violation(measured[c.name])
        if any(v > 0 for v in record.constraints.values()):
            record.outcome = "constraint_violated"
            broken = [k for k, v in record.constraints.items() if v > 0]
            record.reason = f"violates {', '.join(broken)}"

    def level_bench(self) -> LevelBench:
        """The chain's `bench`, else the benchmark client over HTTP."""
        b = self.space.bench
        return self.bench or HttpBench(self.workload(), b.request_timeout_s, b.max_error_rate)

    async def _measure(
        self, server: Any, record: TrialRecord, hooks: ChainHooks, goals: dict[int, PrecisionGoal], t_bench: float
    ) -> dict[int, LevelSummary]:
        """Every level through the chain's `LevelBench`. Stops after a level that failed
        or killed the server."""
        asyncio.get_running_loop().set_exception_handler(_quiet_interrupts)
        summaries: dict[int, LevelSummary] = {}
        levels = self.level_bench().levels(server, self.plans(), goals, hooks, t_bench)
        async with contextlib.aclosing(levels):
            async for measured in levels:
                c = measured.concurrency
                summary = hooks.level_done(c, measured) or measured
                summaries[c] = summary
                record.bench[c] = summary.as_dict()
                try:  # a server that dies mid-level fails its requests before its process has exited
                    server.check_alive(grace_s=CRASH_GRACE_S if summary.failed_reason else 0.0)
                except LaunchError as err:
                    record.outcome, record.reason = err.kind, str(err)
                    break
                if summary.failed_reason:
                    record.outcome, record.reason = "bench_failed", f"c={c}: {summary.failed_reason}"
                    break
        return summaries

    def _finish(self, record: TrialRecord, t0: float) -> TrialRecord:
        record.seconds["total"] = self.clock() - t0
        return record
