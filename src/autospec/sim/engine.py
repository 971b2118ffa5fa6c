"""The simulator's batch scheduler, exactly as ``autospec.sim.predict`` replays it.

One coroutine (:meth:`Engine.run`) on the server's loop:

- *Admit* waiting requests (FCFS) while running < max_running_requests and the KV pool
  has room for each one's tokens; one prefill step (``prefill_seconds``) for all of
  them, during which running requests stall; each admitted request then has its first
  token.
- *Decode*: steps of ``step_seconds(batch)`` in which every running request emits k
  tokens (noise off: the deterministic accumulator of ``predict.noiseless_emit``;
  noise on: k drawn from the request's own acceptance distribution, a low-discrepancy
  sequence per request (`accepted_tokens`), with steps timed by a per-run, a per-machine
  and a per-step speed factor). Step ends follow an absolute schedule (each
  deadline is the previous deadline plus the step's duration), so Python overhead does
  not slow the simulated GPU.
- *Gathering*: requests sent together (a benchmark level starting, or the replacements
  of requests that just ended in a closed loop) reach the server spread over
  milliseconds; when slots are free and nothing or only just-finished work is pending,
  the engine waits for such a burst to complete (10 ms without an arrival, 50 ms while
  replacements for finished requests are still expected; 100 ms at most, or 80% of the
  next step while others run; all shrink with time scales below 0.5) and admits it in
  one prefill. The prefill starts, in simulated time, at its first request's arrival or
  at the last step's end, whichever is later, so gathering costs no simulated time.
  This is the closed loop predict() replays, whose clients turn around instantly.
- *Retraction* (SGLang's ``retract_decode``, simplified): before a decode step the
  running requests need room for up to ``draft tokens`` new tokens each. When the pool
  (``max_total_num_tokens``) cannot hold that, requests are retracted (fewest output
  tokens first, then longest prompt; at least one keeps running): their KV is freed,
  they go back to the front of the queue, and when readmitted their prefill covers the
  prompt and what they had generated. The scheduler logs SGLang's ``KV cache pool is
  full. Retract requests. ...`` line. ``predict()`` assumes the pool never fills (true
  for every calibrated configuration, whose running-request cap keeps it from filling).

A request the client abandons is dropped at the next step boundary, freeing its slot.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from autospec.sim import logs
from autospec.sim.config import ServerConfig
from autospec.sim.predict import noiseless_emit
from autospec.sim.profile import Profile
from autospec.sim.timing import prefill_seconds, step_seconds
from autospec.sim.variation import machine_factor

__all__ = ["Engine", "EngineStats", "Generation", "EOS_TOKEN_ID"]

DECODE_LOG_INTERVAL = 40  # SGLang's decode_log_interval default (0.5.16 server_args line)
# Gathering windows (real seconds) at time scales >= GATHER_FULL_SCALE; faster scales shrink
# them in proportion, so a near-zero --sim-time-scale answers at once.
GATHER_CAP_S = 0.100  # longest wait for arrivals to gather while nothing runs
BURST_QUIET_S = 0.010  # a fresh burst (a level starting) ended after this long without arrivals
REPLACEMENT_QUIET_S = 0.050  # replacements of finished requests: allow this client turnaround
GATHER_FULL_SCALE = 0.5
STALL_RESET_S = 1.0  # behind schedule by more than this (SIGSTOP, starved): do not replay missed steps
GOLDEN_RATIO_STEP = (math.sqrt(5.0) - 1.0) / 2.0  # the rotation of `accepted_tokens`' draws
EOS_TOKEN_ID = 2  # "matched" in finish_reason when a request stops at its simulated EOS
VOCAB = tuple(f" w{i}" for i in range(512))

# SGLang's new-token-ratio tracker (sglang 0.5.23 scheduler_components/new_token_ratio_tracker.py,
# environ.py defaults): it starts at 0.7, decays to 0.7 * 0.14 over 600 decode steps, and is
# re-estimated after a retraction; only its value in the retraction line matters here.
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600
RETRACT_DECODE_STEPS = 20


@dataclass(eq=False)
class Generation:
    """One request inside the engine; the HTTP side observes it through ``on_step``."""

    rid: str
    prompt_tokens: int
    max_new_tokens: int
    stop_at: int  # completion length at which it ends (max_new_tokens, or an earlier EOS)
    accept_mean: float
    accept_cdf: list[float] | None  # cumulative P(k <= i+1); None = noiseless
    on_step: Callable[[Generation, str], None]  # (generation, new text)
    created: float = field(default_factory=time.perf_counter)
    arrived: float = 0.0  # loop time at which the engine received it
    token_state: int = 1
    completion_tokens: int = 0
    verify_ct: int = 0
    accumulator: float = 0.0
    draw_phase: float | None = None  # noise on: where its sequence of acceptance draws starts
    histogram: list[int] | None = None
    text: str = ""
    finished: bool = False
    aborted: bool = False
    stopped_at_eos: bool = False
    events: int = 0

    def next_words(self, count: int) -> str:
        """``count`` generated tokens as words `` w<N>`` (a seeded LCG per request)."""
        state = self.token_state
        words = []
        for _ in range(count):
            state = (state * 1103515245 + 12345) & 0x7FFFFFFF
            words.append(VOCAB[(state >> 7) % len(VOCAB)])
        self.token_state = state
        return "".join(words)

    @property
    def remaining(self) -> int:
        return self.stop_at - self.completion_tokens

    @property
    def kv_tokens(self) -> int:
        """KV-pool tokens this request holds while running (prompt + generated)."""
        return self.prompt_tokens + self.completion_tokens

    def finish_reason(self) -> dict[str, Any] | None:
        """SGLang's ``meta_info.finish_reason``: None while running."""
        if not self.finished:
            return None
        if self.stopped_at_eos:
            return {"type": "stop", "matched": EOS_TOKEN_ID}
        return {"type": "length", "length": self.completion_tokens}


@dataclass
class EngineStats:
    """Cumulative counters for /server_info and the decode log."""

    decode_tokens: int = 0  # tokens emitted by decode (verify) steps since launch
    verify_steps: int = 0  # per-request verify passes since launch
    completed: int = 0  # finished requests (not aborted)
    retracted: int = 0  # requests retracted because the KV pool was full
    last_gen_throughput: float = 0.0
    scheduled_seconds: float = 0.0  # simulated GPU time of all steps (prefill + decode)
    busy_seconds: float = 0.0  # real time with requests waiting or running
    emitted_tokens: int = 0
    max_lag_seconds: float = 0.0  # worst lateness of a step's end against its schedule


class StepDurations:
    """Real seconds of simulated steps: the profile's step times at the time scale, times
    the per-run speed factor (drawn once, here, from `rng` when noise is on), the
    machine's (a fixed function of its name, `variation.machine_factor`, when noise is on)
    and, for each step, a per-step factor (drawn from `rng` when noise is on and the
    profile has one). A factor above 1 is a slower launch or machine."""

    def __init__(
        self,
        profile: Profile,
        cfg: ServerConfig,
        *,
        time_scale: float,
        noise: bool,
        rng: random.Random,
        machine: str | None = None,
    ) -> None:
        self.profile = profile
        self.cfg = cfg
        self.scale = time_scale
        self.rng = rng
        launch = math.exp(rng.gauss(0.0, profile.run_sigma)) if noise and profile.run_sigma else 1.0
        self.run_factor = launch * (machine_factor(machine, profile.machine_sigma) if noise else 1.0)
        self.step_sigma = profile.step_sigma if noise else 0.0
        self._step_cache: dict[int, float] = {}

    def nominal_step(self, batch: int) -> float:
        """A decode step of `batch` requests, without the per-step factor."""
        base = self._step_cache.get(batch)
        if base is None:
            base = step_seconds(self.profile, self.cfg, batch)
            self._step_cache[batch] = base
        return base * self.scale * self.run_factor

    def jitter(self, seconds: float) -> float:
        """`seconds` times a fresh per-step factor (unchanged when noise is off)."""
        if self.step_sigma:
            return seconds * math.exp(self.rng.gauss(0.0, self.step_sigma))
        return seconds

    def prefill(self, tokens: int, seqs: int) -> float:
        """A prefill step of `tokens` over `seqs` requests, per-step factor included."""
        base = prefill_seconds(self.profile, self.cfg, tokens, seqs)
        return self.jitter(base * self.scale * self.run_factor)


class DecodeLog:
    """SGLang's ``Decode batch`` line, one every DECODE_LOG_INTERVAL decode steps, over
    the tokens and verify passes since the previous line; each line also sets
    ``stats.last_gen_throughput``."""

    def __init__(
        self,
        log: logs.SglangLog,
        stats: EngineStats,
        *,
        speculative: bool,
        draft_tokens: int,
        cuda_graph_max_bs: int,
        max_total_tokens: int,
    ) -> None:
        self.log = log
        self.stats = stats
        self.speculative = speculative
        self.draft_tokens = draft_tokens
        self.cuda_graph_max_bs = cuda_graph_max_bs
        self.max_total_tokens = max_total_tokens
        self._tokens = 0
        self._verify = 0
        self._steps = 0
        self._start = time.perf_counter()

    def step(self, *, batch: int, tokens: int, kv_tokens: int, queued: int) -> None:
        """Count one decode step of `batch` verify passes emitting `tokens`; write the line
        when the interval is complete (`kv_tokens` and `queued` as after the step)."""
        self._tokens += tokens
        self._verify += batch
        self._steps += 1
        if self._steps >= DECODE_LOG_INTERVAL:
            self._write(batch, kv_tokens, queued)

    def _write(self, batch: int, kv_tokens: int, queued: int) -> None:
        now = time.perf_counter()
        elapsed = max(now - self._start, 1e-9)
        throughput = self._tokens / elapsed
        self.stats.last_gen_throughput = throughput
        accept_len = accept_rate = None
        if self.speculative:
            accept_len = self._tokens / max(self._verify, 1)
            accept_rate = (accept_len - 1.0) / max(self.draft_tokens - 1, 1)
        self.log.rank(
            logs.decode_batch(
                running=batch,
                tokens=kv_tokens,
                token_usage=kv_tokens / self.max_total_tokens,
                accept_len=accept_len,
                accept_rate=accept_rate,
                cuda_graph=batch <= self.cuda_graph_max_bs,
                gen_throughput=throughput,
                queued=queued,
            )
        )
        self._tokens = self._verify = self._steps = 0
        self._start = now


def retraction_split(
    running: list[Generation], kv_tokens: int, draft_tokens: int, max_total_tokens: int
) -> tuple[list[Generation], list[Generation]]:
    """(kept, retracted): `running` split so that the kept requests, with `draft_tokens`
    new tokens each, fit in `max_total_tokens` with `kv_tokens` held now (at least one is
    kept). Kept ones stay in `running`'s order; retracted ones are in retraction order."""
    # SGLang keeps the requests with the most output (then the shortest prompt) and
    # retracts from the other end (schedule_batch._get_decode_retraction_order, "length").
    keep = sorted(running, key=lambda g: (g.completion_tokens, -g.prompt_tokens), reverse=True)
    retracted: list[Generation] = []
    while len(keep) > 1 and kv_tokens + len(keep) * draft_tokens > max_total_tokens:
        gen = keep.pop()
        kv_tokens -= gen.kv_tokens
        retracted.append(gen)
    kept = set(keep)
    return [g for g in running if g in kept], retracted


def new_token_ratio_after_retraction(running: list[Generation]) -> float:
    """SGLang's new-token ratio re-estimated over the requests still running."""
    decoded = sum(g.completion_tokens for g in running)
    budget = sum(g.max_new_tokens for g in running)
    return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(running)) / (budget + 1))


def accepted_tokens(gen: Generation, rng: random.Random) -> int:
    """Tokens `gen` emits in one verify step (at least 1, at most what it has left): from
    the noiseless accumulator, or drawn from its acceptance distribution.

    The draws of one request are a low-discrepancy sequence (a golden-ratio rotation from
    a phase drawn with `rng` at its first step): single steps vary as the distribution
    says, but a request's mean settles at its own mean within a few steps, instead of
    scattering by sd/sqrt(steps). So launches sent the same stream differ by their speed
    factors, not by sampling luck, as on the H200, where launches of one configuration
    agreed within 1-2% although single requests differed by 13-19% (issue 37)."""
    if gen.accept_cdf is None:
        k, gen.accumulator = noiseless_emit(gen.accumulator, gen.accept_mean, gen.remaining)
        return k
    if gen.draw_phase is None:
        gen.draw_phase = rng.random()
    u = (gen.draw_phase + gen.verify_ct * GOLDEN_RATIO_STEP) % 1.0
    k = bisect.bisect_left(gen.accept_cdf, u) + 1
    return min(k, len(gen.accept_cdf), gen.remaining)


class Engine:
    """The batch scheduler (module docstring); ``run()`` is the loop, ``submit()`` feeds it."""

    def __init__(
        self,
        *,
        profile: Profile,
        cfg: ServerConfig,
        max_running: int,
        max_total_tokens: int,
        time_scale: float,
        noise: bool,
        rng: random.Random,
        log: logs.SglangLog,
        on_complete: Callable[[Generation], None],
        disable_cuda_graph: bool = False,
        stall: tuple[int, float] | None = None,
        machine: str | None = None,
    ) -> None:
        self.profile = profile
        self.cfg = cfg
        self.max_running = max(1, max_running)
        self.max_total_tokens = max(1, max_total_tokens)
        self.scale = time_scale
        self.rng = rng
        self.log = log
        self.on_complete = on_complete
        self.speculative = cfg.speculative_algorithm is not None
        self.draft_tokens = cfg.speculative_num_draft_tokens if self.speculative else 1
        self.cuda_graph_max_bs = 0 if disable_cuda_graph else cfg.cuda_graph_max_bs
        self.durations = StepDurations(profile, cfg, time_scale=time_scale, noise=noise, rng=rng, machine=machine)
        self.waiting: deque[Generation] = deque()
        self.running: list[Generation] = []
        self.kv_tokens = 0
        self.new_token_ratio = INIT_NEW_TOKEN_RATIO
        self.stats = EngineStats()
        self.decode_log = DecodeLog(
            log,
            self.stats,
            speculative=self.speculative,
            draft_tokens=self.draft_tokens,
            cuda_graph_max_bs=self.cuda_graph_max_bs,
            max_total_tokens=self.max_total_tokens,
        )
        self._arrived = asyncio.Event()
        self.busy = True
        self.busy_since = 0.0
        self.window = min(1.0, time_scale / GATHER_FULL_SCALE)  # factor on the gathering windows
        self.stall = stall  # the stall_after_requests fault: (completed requests, seconds), once

    # -- requests in and out
    def submit(self, gen: Generation) -> None:
        gen.arrived = asyncio.get_running_loop().time()
        self.waiting.append(gen)
        self._arrived.set()

    @staticmethod
    def abort(gen: Generation) -> None:
        """Drop the request at the next step boundary (its slot is freed then)."""
        if not gen.finished:
            gen.aborted = True

    # -- the loop
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()  # end of the last simulated step (the schedule's anchor)
        self.busy_since = deadline
        freed = 0  # slots freed at the last step's end
        while True:
            free = self.max_running - len(self.running)
            # Replacements of the requests that ended at the last step (closed loop), beyond
            # those already queued.
            target = min(free, len(self.waiting) + freed)
            if not self.running and not self.waiting:
                await self._idle(loop)
                if loop.time() - deadline > GATHER_CAP_S * self.window:
                    freed = 0  # too late to be replacements: a fresh burst
            if (freed or not self.running) and len(self.waiting) < free:
                # Requests sent together reach us spread over milliseconds: gather them into
                # one prefill, as predict() assumes (its clients turn around instantly).
                cap = GATHER_CAP_S * self.window if not self.running else 0.8 * self.durations.nominal_step(len(self.running))
                await self._gather(loop, loop.time() + cap, target if freed else 0, free)
            freed = 0
            admitted = self._admit()
            if admitted:
                deadline, freed = await self._prefill(loop, deadline, admitted)
                continue
            self._drop_aborted()
            if not self.running:
                continue
            self._retract_if_full()
            if loop.time() - deadline > STALL_RESET_S:
                deadline = loop.time()
            deadline, freed = await self._decode(loop, deadline)

    async def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        self.stats.busy_seconds += loop.time() - self.busy_since
        self.busy = False
        self._arrived.clear()
        await self._arrived.wait()
        self.busy = True
        self.busy_since = loop.time()

    async def _gather(self, loop: asyncio.AbstractEventLoop, until: float, expected: int, slots: int) -> None:
        """Wait for arrivals until `slots` requests wait or `until` passes; once one waits,
        stop when none arrives for REPLACEMENT_QUIET_S (fewer than `expected` wait) or
        BURST_QUIET_S (at least `expected` wait)."""
        while len(self.waiting) < slots:
            timeout = until - loop.time()
            if self.waiting:
                quiet = REPLACEMENT_QUIET_S if len(self.waiting) < expected else BURST_QUIET_S
                timeout = min(timeout, quiet * self.window)
            if timeout <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout)
            except asyncio.TimeoutError:
                return

    def _admit(self) -> list[Generation]:
        """Waiting requests that get a slot and fit in the KV pool, in FCFS order (the
        first one is admitted even if it does not fit, when nothing else runs)."""
        admitted: list[Generation] = []
        reserved = self.kv_tokens
        while self.waiting and len(self.running) + len(admitted) < self.max_running:
            gen = self.waiting[0]
            if gen.aborted:
                self.waiting.popleft()
                continue
            if (self.running or admitted) and reserved + gen.kv_tokens > self.max_total_tokens:
                break
            self.waiting.popleft()
            admitted.append(gen)
            reserved += gen.kv_tokens
        return admitted

    async def _prefill(self, loop: asyncio.AbstractEventLoop, deadline: float, admitted: list[Generation]) -> tuple[float, int]:
        """One prefill step for `admitted`: starts when the previous step ended or when its
        first request arrived, whichever is later. Returns (new deadline, slots freed)."""
        deadline = max(deadline, min(g.arrived for g in admitted))
        tokens = sum(g.kv_tokens for g in admitted)
        duration = self.durations.prefill(tokens, len(admitted))
        if self.stall is not None and self.stats.completed >= self.stall[0]:
            duration += self.stall[1] * self.scale
            self.stall = None
        deadline += duration
        self.stats.scheduled_seconds += duration
        await _sleep_until(loop, deadline, self.stats)
        self.log.rank(
            logs.prefill_batch(
                new_seq=len(admitted),
                new_token=tokens,
                token_usage=self.kv_tokens / self.max_total_tokens,
                running=len(self.running),
                queued=len(self.waiting),
                cuda_graph=len(self.running) + len(admitted) <= self.cuda_graph_max_bs,
                input_throughput=tokens / duration if duration > 0 else 0.0,
            )
        )
        freed = 0
        for gen in admitted:
            if gen.aborted:
                continue
            self.kv_tokens += gen.kv_tokens
            self._emit(gen, 1)
            if gen.finished:
                self._retire(gen)
                freed += 1
            else:
                self.running.append(gen)
        return deadline, freed

    def _drop_aborted(self) -> None:
        """Free the slots of requests abandoned since the last step."""
        still = []
        for gen in self.running:
            if gen.aborted:
                self.kv_tokens -= gen.kv_tokens
            else:
                still.append(gen)
        self.running = still

    def _retract_if_full(self) -> None:
        """Retract requests until the next decode step fits in the KV pool (module docstring)."""
        if len(self.running) <= 1 or self.kv_tokens + len(self.running) * self.draft_tokens <= self.max_total_tokens:
            self.new_token_ratio = max(self.new_token_ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO)
            return
        self.running, retracted = retraction_split(self.running, self.kv_tokens, self.draft_tokens, self.max_total_tokens)
        tokens_gained = sum(g.kv_tokens for g in retracted)
        self.kv_tokens -= tokens_gained
        self.waiting.extendleft(reversed(retracted))
        self.stats.retracted += len(retracted)
        old_ratio = self.new_token_ratio
        self.new_token_ratio = new_token_ratio_after_retraction(self.running)
        self.log.rank(
            logs.kv_retraction(
                retracted=len(retracted),
                tokens_gained=tokens_gained,
                old_ratio=old_ratio,
                new_ratio=self.new_token_ratio,
                mamba_gained=len(retracted) if self._hybrid_state else None,
            )
        )

    @property
    def _hybrid_state(self) -> bool:
        """True for a hybrid (recurrent-state) model, whose retraction line also counts state slots."""
        return bool(self.profile.fixed_state_gb or self.profile.spec_state_gb)

    async def _decode(self, loop: asyncio.AbstractEventLoop, deadline: float) -> tuple[float, int]:
        """One decode step for every running request. Returns (new deadline, slots freed)."""
        running = self.running
        duration = self.durations.jitter(self.durations.nominal_step(len(running)))
        deadline += duration
        self.stats.scheduled_seconds += duration
        await _sleep_until(loop, deadline, self.stats)
        step_tokens = 0
        freed = 0
        still: list[Generation] = []
        for gen in running:
            if gen.aborted:
                self.kv_tokens -= gen.kv_tokens
                freed += 1
                continue
            k = accepted_tokens(gen, self.rng)
            gen.verify_ct += 1
            if gen.histogram is not None:
                gen.histogram[min(k - 1, len(gen.histogram) - 1)] += 1
            step_tokens += k
            self._emit(gen, k)
            if gen.finished:
                self._retire(gen)
                freed += 1
            else:
                still.append(gen)
        self.running = still
        self.stats.decode_tokens += step_tokens
        self.stats.verify_steps += len(running)
        self.decode_log.step(batch=len(running), tokens=step_tokens, kv_tokens=self.kv_tokens, queued=len(self.waiting))
        return deadline, freed

    def _emit(self, gen: Generation, count: int) -> None:
        if count <= 0:
            return
        new_text = gen.next_words(count)
        gen.text += new_text
        gen.completion_tokens += count
        self.kv_tokens += count
        self.stats.emitted_tokens += count
        if gen.completion_tokens >= gen.stop_at:
            gen.finished = True
        gen.events += 1
        try:
            gen.on_step(gen, new_text)
        except Exception as exc:
            gen.aborted = True
            self.log.info(f"[http_server] Error: {exc!r}")

    def _retire(self, gen: Generation) -> None:
        self.kv_tokens -= gen.kv_tokens
        self.stats.completed += 1
        self.on_complete(gen)


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float, stats: EngineStats) -> None:
    delay = deadline - loop.time()
    await asyncio.sleep(delay if delay > 0 else 0)
    lag = loop.time() - deadline
    if lag > stats.max_lag_seconds:
        stats.max_lag_seconds = lag
