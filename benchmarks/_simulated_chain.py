"""The product's trial chain (`autospec.study.chain.TrialChain`) without processes or HTTP:
a simulated launcher and a simulated bench plugged into its seams, on a simulated clock.

    chain = simulated_chain(space, gate=gate, layout=layout, profile=profile, noise=0.02, seed=1)
    record = chain.run(0, candidate)          # TrialChain.run: verdict, launch, bench, teardown

Everything the chain decides is the product's: the gate's verdict and learning, the flags
(fixed flags a reference point unsets are dropped), the precision goals and caps, the race's
`stop_level`/`level_done` hooks, the record's values, intervals and constraints. What is
simulated:

- `SimulatedLauncher.start`: the simulator's own start-up in-process (`_simulated.simulate_launch`:
  its argument parser, resolver, memory model and log lines; the launcher's `parse_startup`
  and `classify_failure` on that log), the log written where the chain asks; the clock
  advances by the modelled load + warmup, or to the point of death plus a failed teardown.
  Nothing is spawned, so `on_spawn` is never called (no server record for recovery to act on).
- `SimulatedBench.levels`: per-request `RequestRecord`s from the simulator's noiseless
  scheduler replay (`autospec.sim.predict`), a closed loop of C workers, its times warped
  by a server speed that varies over time (`SpeedWarp`: a lognormal factor of relative
  spread `noise` per second) and by one speed factor per launch (`launch_noise`: the
  between-launch spread). With `noise` on, each request also carries the simulator's
  per-request effect, the same in every launch (`autospec.sim.request_accept_length`: a
  fixed function of the request's prompt and its position in the launch, NGRAM's climb
  included): its decode time scales by the model's accept length over the request's, and
  the closed loop of C workers is re-run on those durations, the server running at most its
  `max_running_requests` of them at once (the rest queue). Records name their request
  (`position`, `request_id`), so two launches pair as a server's do. The product's
  `summarize` forms each level's figures and intervals,
  and the precision loop's rule (`autospec.bench.stop_rule`, with the race's hook) is
  consulted before each send past the floor, at most every `check_every_s` of simulated
  time, as `run_level_precise_with` does.
- Teardown: `TEARDOWN_SECONDS` on the clock.

So ``record.seconds`` are modelled GPU seconds, not wall time.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _simulated import FAILED_TEARDOWN_SECONDS, TEARDOWN_SECONDS, PredictedOracle, SimLaunch, verify_steps

from autospec.bench import LevelPlan, PrecisionGoal, Stop, stop_rule
from autospec.bench.adaptive import precision_info
from autospec.launcher import LaunchError, LaunchRequest, StartupFacts, TeardownReport, parse_startup
from autospec.launcher.launch import OnSpawn
from autospec.metrics import LevelSummary, summarize
from autospec.request_records import LevelResult, RequestRecord, request_id
from autospec.sim import accept_length, init_outcome, request_accept_length, resolve_args
from autospec.sim.predict import _replay as replay_requests  # the noiseless per-request replay
from autospec.sim.profile import Profile
from autospec.study.chain import ChainHooks, TrialChain

__all__ = ["closed_loop", "SimClock", "SimulatedBench", "SimulatedLauncher", "SimulatedServer", "SpeedWarp", "simulated_chain"]


class SimClock:
    """A clock that moves only when the simulated launcher or bench says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += max(float(seconds), 0.0)


def _teardown(seconds: float) -> TeardownReport:
    """A clean stop that took `seconds` (nothing was spawned)."""
    return TeardownReport(
        seconds=seconds,
        signal_sent="TERM",
        killed_after_timeout=False,
        leftover_pids=(),
        gpu_memory_released=True,
        gpu_wait_seconds=0.0,
        port_released=True,
        processes_seconds=seconds,
    )


@dataclass
class SimulatedServer:
    """A started simulator as the chain sees it (`ServerHandle`); `launch` is what
    `simulate_launch` answered, `speed` the launch's speed factor (`launch_noise`)."""

    launch: SimLaunch
    clock: SimClock
    log_path: Path | None
    speed: float = 1.0
    url: str = "sim://in-process"
    requests: int = 0  # generation requests sent so far in this launch (the simulator's position)
    _report: TeardownReport | None = None

    @property
    def argv(self) -> list[str]:
        return list(self.launch.argv)

    @property
    def startup(self) -> StartupFacts:
        return self.launch.startup

    def stop(self) -> TeardownReport:
        if self._report is None:
            self.clock.advance(TEARDOWN_SECONDS)
            self._report = _teardown(TEARDOWN_SECONDS)
        return self._report

    def runtime_events(self) -> dict[str, int]:
        return {}

    def check_alive(self, grace_s: float = 0.0) -> None:
        return None


@dataclass
class SimulatedLauncher:
    """Starts the simulator in-process (`ServerStarter`); see the module docstring."""

    oracle: PredictedOracle
    clock: SimClock
    rng: random.Random
    launch_noise: float = 0.0

    def start(self, req: LaunchRequest, on_spawn: OnSpawn | None = None) -> SimulatedServer:
        launch = self.oracle.launch(req.flags, command=req.command, log_path=req.log_path)
        if req.log_path is not None:
            Path(req.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(req.log_path).write_text(launch.log_text)
        self.clock.advance(launch.seconds)
        if not launch.ok:
            error: LaunchError = launch.error
            self.clock.advance(FAILED_TEARDOWN_SECONDS)
            error.teardown = _teardown(FAILED_TEARDOWN_SECONDS)
            error.startup = parse_startup(launch.log_text)  # what the launcher keeps of a failed start
            raise error
        speed = 1.0 + self.launch_noise * self.rng.gauss(0.0, 1.0) if self.launch_noise else 1.0
        return SimulatedServer(launch, self.clock, req.log_path, max(speed, 0.05))


class SpeedWarp:
    """Replay time -> measured time of a server whose speed varies: each `SEGMENT_S` of
    replay time lasts that times a lognormal factor (relative spread `sigma`, drawn from
    `rng` as the level reaches it), over the launch's `speed`. Monotone, so the replay's
    schedule (its batches, its running-request cap, its closed loop) is kept; the
    aggregate's slices and the requests' speeds scatter as a server's do."""

    SEGMENT_S = 1.0

    def __init__(self, rng: random.Random, sigma: float, speed: float = 1.0) -> None:
        self.rng, self.sigma, self.speed = rng, sigma, speed
        self._starts = [0.0]  # warped start of each segment
        self._factors: list[float] = []

    def __call__(self, t: float) -> float:
        if not self.sigma:
            return t / self.speed
        k = max(int(t // self.SEGMENT_S), 0)
        while len(self._factors) <= k:
            factor = math.exp(self.sigma * self.rng.gauss(0.0, 1.0))
            self._factors.append(factor)
            self._starts.append(self._starts[-1] + self.SEGMENT_S * factor)
        return (self._starts[k] + (t - k * self.SEGMENT_S) * self._factors[k]) / self.speed


@dataclass
class SimulatedBench:
    """Measures levels from the simulator's replay (`LevelBench`); see the module docstring."""

    oracle: PredictedOracle
    clock: SimClock
    rng: random.Random
    noise: float = 0.0
    _replays: dict[tuple[str, int, int, int], list[tuple[float, float, float]]] = field(default_factory=dict)

    async def levels(
        self, server: Any, plans: Sequence[LevelPlan], goals: Mapping[int, PrecisionGoal], hooks: ChainHooks, origin: float
    ) -> AsyncGenerator[LevelSummary, None]:
        for plan in plans:
            hooks.phase(f"bench c={plan.concurrency}")
            yield self.level(server, plan, goals.get(plan.concurrency), hooks, origin)

    def level(
        self, server: SimulatedServer, plan: LevelPlan, goal: PrecisionGoal | None, hooks: ChainHooks, origin: float
    ) -> LevelSummary:
        """One level: warmup on the clock, then the measured requests (open-ended under a goal)."""
        c, flags = plan.concurrency, server.launch.flags or {}
        output_len = self.oracle.space.workload.output_len
        if plan.warmup_requests:
            warm = self._replay(flags, c, plan.warmup_requests, plan.warmup_output_len or output_len)
            self.clock.advance(max(d for _, _, d in warm) / server.speed)
            server.requests += plan.warmup_requests
        ceiling = goal.max_requests if goal is not None else (plan.num_requests or 0)
        records = self._records(server, flags, c, ceiling, output_len)
        max_error_rate = goal.max_error_rate if goal is not None else self.oracle.space.bench.max_error_rate
        if goal is None:
            kept = list(records)
            self.clock.now = max(self.clock.now, max(r.t_done or 0.0 for r in kept))
            return summarize(LevelResult(tuple(kept), 0.0, c, metadata={"sent": len(kept)}), max_error_rate=max_error_rate)
        return self._precise(records, goal, c, hooks, origin)

    def _precise(
        self, records: Iterator[RequestRecord], goal: PrecisionGoal, c: int, hooks: ChainHooks, origin: float
    ) -> LevelSummary:
        """`run_level_precise_with` on the clock: the rule before each send past the floor,
        at most every `check_every_s`, on the requests done by then; a stop ends the
        sending, the requests in flight drain."""
        kept: list[RequestRecord] = []
        pending: list[tuple[float, int]] = []  # (t_done, index) of the requests in flight
        done: list[RequestRecord] = []
        stop: Stop | None = None
        checks, last_look = 0, -math.inf
        summary: LevelSummary | None = None
        for record in records:
            now = record.t_sent
            if len(kept) >= goal.min_requests and now - last_look >= goal.check_every_s:
                last_look, checks, fresh = now, checks + 1, len(done)
                while pending and pending[0][0] <= now:
                    done.append(kept[heapq.heappop(pending)[1]])
                if summary is None or len(done) != fresh:
                    result = LevelResult(tuple(done), 0.0, c)
                    summary = summarize(result, max_error_rate=goal.max_error_rate, intervals=goal.metrics)
                stop = stop_rule(summary, goal, now - origin, len(kept), lambda s: hooks.stop_level(c, s))
                if stop is not None:
                    break
            heapq.heappush(pending, (record.t_done or 0.0, len(kept)))
            kept.append(record)
        sent = len(kept)
        self.clock.now = max(self.clock.now, max(r.t_done or 0.0 for r in kept))
        final = summarize(LevelResult(tuple(kept), 0.0, c, metadata={"sent": sent}), max_error_rate=goal.max_error_rate)
        if stop is None:
            stop = (
                Stop("failed", final.failed_reason)
                if final.failed_reason
                else Stop("ceiling", f"{sent} requests sent (ceiling {goal.max_requests})")
            )
        info = precision_info(final, goal, stop, elapsed_s=self.clock.now - origin, checks=checks, sent=sent)
        return dataclasses.replace(final, stop_reason=stop.reason, precision=info)

    def _records(
        self, server: SimulatedServer, flags: Mapping[str, Any], c: int, n: int, output_len: int
    ) -> Iterator[RequestRecord]:
        """Up to `n` measured requests of the replay's closed loop of `c` workers, in send
        order, made as they are asked for, their times warped (`SpeedWarp`: the server's
        speed over time, the launch's speed factor included) and counted from the clock's now."""
        replay = sorted(self._replay(flags, c, n, output_len), key=lambda r: r[0])
        cfg = resolve_args(self.oracle.profile, flags)
        wl = self.oracle.space.workload
        kind, prompt_tokens = self.oracle.prompt_workload(self.oracle.space.bench.num_requests(c))
        per_step = accept_length(self.oracle.profile, cfg, kind, wl.temperature)
        verify = verify_steps(per_step, output_len) if cfg.speculative else None
        if self.noise and cfg.speculative:
            first_request = server.requests + 1
            scales = [
                per_step
                / request_accept_length(
                    self.oracle.profile, cfg, kind, wl.temperature, prompt=f"{kind}:{i}", position=first_request + i
                )
                for i in range(len(replay))
            ]
            replay = closed_loop(replay, scales, c, init_outcome(self.oracle.profile, cfg).max_running_requests)
        server.requests += len(replay)
        warp = SpeedWarp(self.rng, self.noise, server.speed)
        start = self.clock.now
        for index, (sent, first, finished) in enumerate(replay):
            t_first = start + warp(first)
            yield RequestRecord(
                ok=True,
                error_kind=None,
                t_sent=start + warp(sent),
                t_first=t_first,
                t_done=start + warp(finished),
                chunk_times=(t_first,),
                chunk_tokens=(),  # no per-event counts: the steady window spreads the tokens evenly
                prompt_tokens=prompt_tokens,
                completion_tokens=output_len,
                spec_verify_ct=verify,
                prompt_index=index,
                position=index,
                request_id=request_id(index, index),
            )

    def _replay(self, flags: Mapping[str, Any], c: int, n: int, output_len: int) -> list[tuple[float, float, float]]:
        """(sent, first token, done) of `n` noiseless requests at concurrency `c` (cached)."""
        key = (PredictedOracle._key(flags), c, n, output_len)
        if key not in self._replays:
            profile, wl = self.oracle.profile, self.oracle.space.workload
            kind, prompt_tokens = self.oracle.prompt_workload(self.oracle.space.bench.num_requests(c))
            cfg = resolve_args(profile, flags)
            init = init_outcome(profile, cfg)
            per_step = accept_length(profile, cfg, kind, wl.temperature)
            self._replays[key] = replay_requests(
                profile, cfg, init.max_running_requests, per_step, c, n, prompt_tokens, output_len
            )
        return self._replays[key]


def closed_loop(
    replay: Sequence[tuple[float, float, float]], scales: Sequence[float], c: int, slots: int | None = None
) -> list[tuple[float, float, float]]:
    """(sent, first token, done) of `replay`'s requests (in send order) when each one's
    decode time (done - first token) is scaled by its `scales` entry: a closed loop of `c`
    workers, each sending its next request when its last one is done. A server that runs
    `slots` < `c` requests at once (`max_running_requests`) queues the rest: a request's
    first token then comes the replay's shortest time to first token after a slot frees;
    otherwise each request keeps its own. Scales of 1 give the replay's own schedule back
    (with a queue, up to how the replay batches prefills)."""
    limit = slots if slots is not None and slots < c else 0  # 0: every worker's request runs at once
    prefill = min((first - sent for sent, first, _ in replay), default=0.0)
    free = [0.0] * max(c, 1)
    running: list[float] = []  # when each busy slot frees (a queued server only)
    out: list[tuple[float, float, float]] = []
    for (sent, first, done), scale in zip(replay, scales):
        at = max(heapq.heappop(free), sent) if len(out) < c else heapq.heappop(free)
        if limit:
            admitted = max(at, heapq.heappop(running)) if len(running) >= limit else at
            t_first = admitted + prefill
        else:
            t_first = at + (first - sent)
        t_done = t_first + (done - first) * scale
        heapq.heappush(free, t_done)
        if limit:
            heapq.heappush(running, t_done)
        out.append((at, t_first, t_done))
    return out


def simulated_chain(
    *,
    profile: Profile,
    noise: float = 0.0,
    launch_noise: float = 0.0,
    seed: int | None = 0,
    oracle: PredictedOracle | None = None,
    **chain_kwargs: Any,
) -> TrialChain:
    """The product's `TrialChain` with the simulated launcher, bench and clock; the
    `chain_kwargs` are TrialChain's own (`build_run` passes them; its launcher is replaced).
    `noise`/`launch_noise`/`seed`: see the module docstring; one `random.Random(seed)`
    stream, drawn in trial order."""
    oracle = oracle or PredictedOracle(profile, chain_kwargs["space"])
    clock, rng = SimClock(), random.Random(seed)
    chain_kwargs["launcher"] = SimulatedLauncher(oracle, clock, rng, launch_noise)
    return TrialChain(**chain_kwargs, bench=SimulatedBench(oracle, clock, rng, noise), clock=clock)
