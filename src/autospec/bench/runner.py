"""Closed-loop concurrency levels: the load shape, separate from the client.

A level with concurrency C runs C workers. Each worker sends a request, waits for
it to end (success or failure), then sends the next, until the level's request
count has been sent or its duration has elapsed (whichever is set; both: the first
reached). Requests still in flight at the deadline finish and count. Warmup
requests run first, through min(C, warmup) workers, with prompts of their own
(seed + 1), and the measured phase starts after the last of them ended; their
records carry `warmup=True` and the metrics leave them out. With a `warmup_cap` above
`warmup_requests` the warm-up goes on, one request at a time past its floor, while the
per-request rate of the warm-up so far still trends (`autospec.metrics.warmup.settled`:
MSER truncation and a trend test), up to the cap; metadata ``warmup`` says how many were
sent and whether the rate settled (a level that never settled is flagged in its summary,
and its comparisons do not decide: `autospec.metrics.paired`). A plan with `freeze_gc` then
asks the server to freeze its garbage collectors before measuring (metadata
``gc_frozen``: whether it did).

A plan with `stagger` (at C > 1) starts the measured phase *phase-spread*: worker i's first
request asks for ceil(L (i + 1) / C) of the workload's L output tokens (`ramp=True` on its
record), so from then on the workers' requests end evenly spread over one request latency,
as under steady traffic, instead of in lockstep waves (identical requests started together,
C prefills at once). The metrics count the ramp requests' tokens in the aggregate and leave
them out of per-request figures (`autospec.metrics.summary`). Studies start in lockstep:
on SGLang 0.5.16 / H200 phase-spread C=32 levels were no narrower (docs/benchmarking.md).

Measured prompts are `prompts(workload, n)[i]` for the i-th request sent, the same
list at every level (so levels and other clients can be fed identical prompts).

Before anything is sent, every worker's connection is opened (`BenchClient.connect_lanes`:
a `GET /v1/models` per new connection), so no measured request pays for connecting.

A level may also be *open-ended* (`extend`, used by the precision loop in
`autospec.bench.adaptive`): after the plan's request count was sent, every further send
asks `extend(sent, records)` first, and the level stops sending at the first "no" (or
at `max_requests`); requests in flight then finish and count, as at a deadline.

If `max_consecutive_errors` requests in a row fail (a dead server), the level stops
sending; the records say why. Cancelling the task running a level (or Ctrl-C in
`run_levels`) closes every in-flight stream before the cancellation propagates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from autospec.bench.client import BenchClient
from autospec.bench.workloads import Prompt, Workload, prompts
from autospec.errors import ConfigError
from autospec.metrics.warmup import settled
from autospec.request_records import LevelResult, RequestRecord


def default_num_requests(concurrency: int) -> int:
    """The hand-tuning sweep's request count per level (docs/simulator.md): 2 x concurrency, 4 at
    concurrency 1."""
    return 4 if concurrency == 1 else 2 * concurrency


@dataclass(frozen=True)
class LevelPlan:
    """One level: concurrency plus a request count or a duration (neither: the
    default count `default_num_requests(concurrency)`), warmup requests, and whether to
    freeze the server's garbage collectors after them (`BenchClient.freeze_gc`)."""

    concurrency: int
    num_requests: int | None = None
    duration_s: float | None = None
    warmup_requests: int = 0
    freeze_gc: bool = False
    warmup_output_len: int = 0  # output tokens of a warmup request; 0: the workload's own
    stagger: bool = False  # a phase-spread start (module docstring)
    #: warm up past `warmup_requests` while the per-request rate still trends, up to this many
    #: warmup requests in all (`autospec.metrics.warmup`); at most `warmup_requests`: a fixed count
    warmup_cap: int = 0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}; use a positive level")
        if self.num_requests is not None and self.num_requests < 1:
            raise ConfigError(f"num_requests must be at least 1, got {self.num_requests}; pass a positive count")
        if self.duration_s is not None and self.duration_s <= 0:
            raise ConfigError(f"duration must be positive, got {self.duration_s}; pass seconds > 0")
        if self.warmup_requests < 0:
            raise ConfigError(f"warmup_requests must be >= 0, got {self.warmup_requests}; use 0 for none")

    @property
    def request_limit(self) -> int | None:
        """Requests to send in the measured phase (None: duration only)."""
        if self.num_requests is not None:
            return self.num_requests
        if self.duration_s is not None:
            return None
        return default_num_requests(self.concurrency)


@dataclass(frozen=True)
class Progress:
    """Passed to `on_progress` after every request (an optional observer)."""

    concurrency: int
    phase: str  # "warmup" | "measure"
    completed: int
    total: int | None
    record: RequestRecord


ProgressCallback = Callable[[Progress], None]


class _PromptFeed:
    """Prompt i of a workload, generated in growing blocks (prefix-stable)."""

    def __init__(self, workload: Workload, initial: int) -> None:
        self._workload = workload
        self._prompts: list[Prompt] = prompts(workload, max(1, initial))

    def __getitem__(self, index: int) -> Prompt:
        if index >= len(self._prompts):
            self._prompts = prompts(self._workload, max(index + 1, 2 * len(self._prompts)))
        return self._prompts[index]


async def _closed_loop(
    client: BenchClient,
    feed: _PromptFeed,
    *,
    workers: int,
    limit: int | None,
    deadline: float | None,
    warmup: bool,
    max_consecutive_errors: int,
    on_record: Callable[[RequestRecord, int], None],
    extend_after: int | None = None,
    extend: Callable[[int], bool] | None = None,
    output_len: int | None = None,
    ramp_len: Callable[[int], int | None] | None = None,
) -> int:
    """`ramp_len(lane)`: the output length of that worker's first request where it is
    shortened (a ramp request), else None."""
    sent = 0
    completed = 0
    consecutive_errors = 0
    closed = False

    def next_index() -> int | None:
        nonlocal sent, closed
        if closed or (limit is not None and sent >= limit):
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        if consecutive_errors >= max_consecutive_errors:
            return None
        if extend is not None and extend_after is not None and sent >= extend_after and not extend(sent):
            closed = True
            return None
        sent += 1
        return sent - 1

    async def worker(lane: int) -> None:
        nonlocal completed, consecutive_errors
        first = ramp_len(lane) if ramp_len is not None else None
        while (index := next_index()) is not None:
            record = await client.send(feed[index], warmup=warmup, lane=lane, output_len=first or output_len, position=index)
            if first is not None:
                record, first = dataclasses.replace(record, ramp=True), None
            completed += 1
            consecutive_errors = 0 if record.ok else consecutive_errors + 1
            on_record(record, completed)

    tasks = [asyncio.create_task(worker(lane)) for lane in range(workers)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return sent


ExtendCallback = Callable[[int, Sequence[RequestRecord]], bool]


def _rates(records: Sequence[RequestRecord]) -> list[float]:
    """Output tok/s of each successful request in completion order (the warm-up's trend)."""
    out = []
    for r in records:
        latency = (r.t_done if r.t_done is not None else r.t_sent) - r.t_sent
        if r.ok and r.completion_tokens > 0 and latency > 0:
            out.append(r.completion_tokens / latency)
    return out


def _ramp_lengths(output_len: int, workers: int) -> Callable[[int], int | None]:
    """A phase-spread start's first output lengths: worker i gets ceil(L (i + 1) / C),
    None where that is the whole L (no ramp at C = 1)."""

    def length(lane: int) -> int | None:
        tokens = math.ceil(output_len * (lane + 1) / workers)
        return tokens if tokens < output_len else None

    return length


def _request_bounds(plan: LevelPlan, open_ended: bool, max_requests: int | None) -> tuple[int | None, int | None]:
    """(floor, limit) of the requests a level sends: the plan's count both times, or for
    an `open_ended` level that count as the floor and `max_requests` as the limit."""
    floor = plan.request_limit
    if not open_ended:
        return floor, floor
    if plan.duration_s is not None or floor is None:
        raise ConfigError("an open-ended level needs a request count, not a duration; drop duration_s")
    if max_requests is None or max_requests < floor:
        raise ConfigError(f"max_requests ({max_requests}) must be at least the level's {floor} requests")
    return floor, max_requests


async def _warm_up(
    client: BenchClient,
    plan: LevelPlan,
    stop_after: int,
    observer: Callable[[str, int | None], Callable[[RequestRecord, int], None]],
    records: Sequence[RequestRecord],
) -> dict[str, Any]:
    """Send the level's warm-up (module docstring); the metadata it adds (adaptive only)."""
    warm_workload = dataclasses.replace(client.workload, seed=client.workload.seed + 1)
    adaptive = plan.warmup_cap > plan.warmup_requests
    limit = plan.warmup_cap if adaptive else plan.warmup_requests
    sent = await _closed_loop(
        client,
        _PromptFeed(warm_workload, limit),
        output_len=plan.warmup_output_len or None,
        workers=min(plan.concurrency, plan.warmup_requests),
        limit=limit,
        deadline=None,
        warmup=True,
        max_consecutive_errors=stop_after,
        on_record=observer("warmup", None if adaptive else plan.warmup_requests),
        extend_after=plan.warmup_requests if adaptive else None,
        extend=(lambda n: not settled(_rates(records))) if adaptive else None,
    )
    if not adaptive:
        return {}
    return {"warmup": {"sent": sent, "cap": plan.warmup_cap, "settled": settled(_rates(records))}}


async def run_level_with(
    client: BenchClient,
    plan: LevelPlan,
    *,
    on_progress: ProgressCallback | None = None,
    max_consecutive_errors: int | None = None,
    extend: ExtendCallback | None = None,
    max_requests: int | None = None,
) -> LevelResult:
    """Run one level through an open `BenchClient` (see `run_level`).

    With `extend`, the plan's request count is a floor: each send beyond it first asks
    `extend(sent so far, records so far)` (warmup records included, in completion
    order), and none is sent after the first False or beyond `max_requests`."""
    workload = client.workload
    records: list[RequestRecord] = []
    floor, limit = _request_bounds(plan, extend is not None, max_requests)
    stop_after = max_consecutive_errors or max(8, 2 * plan.concurrency)
    start = time.perf_counter()
    await client.connect_lanes(plan.concurrency)

    def observer(phase: str, total: int | None) -> Callable[[RequestRecord, int], None]:
        def on_record(record: RequestRecord, completed: int) -> None:
            records.append(record)
            if on_progress is not None:
                on_progress(Progress(plan.concurrency, phase, completed, total, record))

        return on_record

    warmed = await _warm_up(client, plan, stop_after, observer, records) if plan.warmup_requests else {}
    frozen = await client.freeze_gc() if plan.freeze_gc else None
    deadline = None if plan.duration_s is None else time.perf_counter() + plan.duration_s
    sent = await _closed_loop(
        client,
        _PromptFeed(workload, floor or 4 * plan.concurrency),
        workers=plan.concurrency if limit is None else min(plan.concurrency, limit),
        limit=limit,
        deadline=deadline,
        warmup=False,
        max_consecutive_errors=stop_after,
        on_record=observer("measure", floor if extend is None else None),
        extend_after=floor if extend is not None else None,
        extend=(lambda n: extend(n, records)) if extend is not None else None,
        ramp_len=_ramp_lengths(workload.output_len, plan.concurrency) if plan.stagger else None,
    )
    return LevelResult(
        records=tuple(records),
        wall_s=time.perf_counter() - start,
        concurrency=plan.concurrency,
        api=workload.api,
        metadata={
            "workload": workload.as_dict(),
            "plan": dataclasses.asdict(plan),
            "model": client.model,
            "base_url": client.base_url,
            "sent": sent,
            **warmed,
            **({"gc_frozen": frozen} if frozen is not None else {}),
        },
    )


async def run_level(
    base_url: str,
    workload: Workload,
    plan: LevelPlan,
    *,
    model: str | None = None,
    timeout_s: float = 600,
    transport: httpx.AsyncBaseTransport | None = None,
    on_progress: ProgressCallback | None = None,
) -> LevelResult:
    """Run one closed-loop level against `base_url`; per-request failures become
    records, never exceptions. Cancellation closes every stream and propagates."""
    levels = await run_levels_async(
        base_url, workload, [plan], model=model, timeout_s=timeout_s, transport=transport, on_progress=on_progress
    )
    return levels[plan.concurrency]


async def run_levels_async(
    base_url: str,
    workload: Workload,
    plans: Sequence[LevelPlan],
    *,
    model: str | None = None,
    timeout_s: float = 600,
    transport: httpx.AsyncBaseTransport | None = None,
    on_progress: ProgressCallback | None = None,
) -> dict[int, LevelResult]:
    """Run levels one after another over one connection pool; keyed by concurrency."""
    _check_distinct(plans)
    results: dict[int, LevelResult] = {}
    async with BenchClient(
        base_url,
        workload,
        model=model,
        timeout_s=timeout_s,
        transport=transport,
    ) as client:
        await client.resolve_model()
        for plan in plans:
            results[plan.concurrency] = await run_level_with(client, plan, on_progress=on_progress)
    return results


def run_levels(base_url: str, workload: Workload, plans: Sequence[LevelPlan], **kw: Any) -> dict[int, LevelResult]:
    """Synchronous wrapper of `run_levels_async` (runs its own event loop; `kw` are its keywords)."""
    return asyncio.run(run_levels_async(base_url, workload, plans, **kw))


def _check_distinct(plans: Sequence[LevelPlan]) -> None:
    seen: set[int] = set()
    for plan in plans:
        if plan.concurrency in seen:
            raise ConfigError(f"concurrency {plan.concurrency} is listed twice; list each level once")
        seen.add(plan.concurrency)
