"""The public, noiseless prediction: what the benchmark would measure against the sim.

`predict()` replays the simulator server's scheduler exactly (noise off) for a closed-loop
benchmark of identical requests, and reports the same figures the benchmark client
computes (docs/architecture.md, "Per-request output speed").

The scheduler (shared contract with `autospec.sim.server`):
    loop:
      if requests wait and running < max_running_requests:
          admit up to the free slots (FCFS); one prefill step of
          prefill_seconds(cfg, admitted * input_len, admitted) -- running requests stall;
          each admitted request gets its first token at the end of that step
      elif/then if requests run:
          one decode step of step_seconds(cfg, running); each request emits
          k = floor(acc + accept_length) tokens (acc keeps the fraction, starts at 0),
          at most its remaining max_tokens -- see `noiseless_emit`
      a finished request's worker sends its next request at that instant, until
      num_requests were sent.
Because requests arrive only when others finish, admissions happen only at those
instants; between them the batch is constant, so the replay advances whole stretches of
decode steps at once.

Noiseless means without the three kinds of variation the server adds with noise on
(`autospec.sim.variation`): every request runs at the model's accept length, which is
the mean of the per-request accept lengths (`acceptance.request_accept_length`) over
prompts and over a launch's first ``climb_window`` positions (NGRAM's climb averages zero
there), at the reference machine's speed (factor 1) and without the launch's factor. So
a figure here is the mean truth that launches scatter around, not what one launch of
one request stream reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autospec.sim.acceptance import accept_length
from autospec.sim.arguments import resolve_args
from autospec.sim.config import ArgumentRejected, ServerConfig
from autospec.sim.memory import init_outcome
from autospec.sim.profile import Profile
from autospec.sim.timing import prefill_seconds, step_seconds

__all__ = ["Prediction", "exhaustive_optimum", "noiseless_emit", "predict"]

METRICS = ("per_request_tok_s", "aggregate_tok_s", "decode_tok_s")


@dataclass(frozen=True)
class Prediction:
    """Expected benchmark figures for one configuration at one concurrency level.

    `init` is "ok", an InitOutcome status, or "rejected" (SGLang refused the flags;
    `message` holds its wording). Speeds are 0 unless init == "ok"."""

    init: str
    message: str
    accept_length: float
    max_running_requests: int
    max_total_num_tokens: int
    per_request_tok_s: float  # mean over requests of completion tokens / (done - sent)
    aggregate_tok_s: float  # all completion tokens / (last done - first sent)
    ttft_s: float  # mean time to first token, queueing included
    decode_tok_s: float  # mean of (tokens - 1) / (done - first token)

    @property
    def ok(self) -> bool:
        return self.init == "ok"


def noiseless_emit(acc: float, accept_len: float, remaining: int) -> tuple[int, float]:
    """Tokens one request emits in a noiseless decode step, and its new accumulator.

    acc' = acc + accept_len; k = floor(acc'); the fraction carries over; k is capped
    by `remaining` (and is at least 1 while tokens remain)."""
    total = acc + accept_len
    k = max(math.floor(total + 1e-9), 1)
    return min(k, remaining), max(total - k, 0.0)


def _steps_to_finish(remaining: int, acc: float, e: float) -> int:
    """Smallest number of noiseless steps after which `remaining` tokens were emitted."""
    if remaining <= 0:
        return 0
    s = max(math.ceil((remaining - acc) / e - 1e-9), 1)
    while s > 1 and math.floor(acc + (s - 1) * e + 1e-9) >= remaining:
        s -= 1
    while math.floor(acc + s * e + 1e-9) < remaining:
        s += 1
    return s


@dataclass
class _Cohort:
    """Requests admitted in the same prefill step: they stay in lockstep."""

    sent: list[float]
    first: float
    remaining: int
    acc: float = 0.0


def predict(
    profile: Profile,
    flags: Mapping[str, Any],
    concurrency: int,
    workload: str = "synthetic",
    *,
    input_len: int = 32,
    output_len: int = 1000,
    num_requests: int | None = None,
    temperature: float = 0.0,
) -> Prediction:
    """Noiseless benchmark figures for `flags` on `profile` at `concurrency` closed-loop
    workers sending `num_requests` (default 2*concurrency, at least 4) identical requests."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if output_len < 1:
        raise ValueError(f"output_len must be >= 1, got {output_len}")
    try:
        cfg = resolve_args(profile, flags)
    except ArgumentRejected as exc:
        return Prediction("rejected", str(exc), 0.0, 0, 0, 0.0, 0.0, 0.0, 0.0)
    init = init_outcome(profile, cfg)
    e = accept_length(profile, cfg, workload, temperature)
    if not init.ok:
        return Prediction(init.status, init.message, e, init.max_running_requests, init.max_total_num_tokens, 0.0, 0.0, 0.0, 0.0)
    n_total = num_requests if num_requests is not None else max(2 * concurrency, 4)
    records = _replay(profile, cfg, init.max_running_requests, e, concurrency, n_total, input_len, output_len)
    per_req = sum(output_len / (done - sent) for sent, _, done in records) / len(records)
    span = max(done for _, _, done in records) - min(sent for sent, _, _ in records)
    ttft = sum(first - sent for sent, first, _ in records) / len(records)
    if output_len > 1:
        decode = sum((output_len - 1) / (done - first) for _, first, done in records) / len(records)
    else:
        decode = 0.0
    return Prediction(
        "ok", "", e, init.max_running_requests, init.max_total_num_tokens, per_req, output_len * len(records) / span, ttft, decode
    )


def _replay(
    profile: Profile, cfg: ServerConfig, mrr: int, e: float, concurrency: int, n_total: int, input_len: int, output_len: int
) -> list[tuple[float, float, float]]:
    """(sent, first token, done) per request, from the scheduler loop in the docstring."""
    t = 0.0
    sent_count = min(concurrency, n_total)
    waiting: list[float] = [0.0] * sent_count
    running: list[_Cohort] = []
    records: list[tuple[float, float, float]] = []

    def finish(cohort: _Cohort, now: float) -> None:
        nonlocal sent_count
        for sent in cohort.sent:
            records.append((sent, cohort.first, now))
            if sent_count < n_total:
                sent_count += 1
                waiting.append(now)

    while waiting or running:
        busy = sum(len(c.sent) for c in running)
        if waiting and busy < mrr:
            n = min(len(waiting), mrr - busy)
            admitted, waiting = waiting[:n], waiting[n:]
            t += prefill_seconds(profile, cfg, n * input_len, n)
            cohort = _Cohort(admitted, t, output_len - 1)
            if cohort.remaining == 0:
                finish(cohort, t)
            else:
                running.append(cohort)
            continue
        batch = sum(len(c.sent) for c in running)
        steps = min(_steps_to_finish(c.remaining, c.acc, e) for c in running)
        t += steps * step_seconds(profile, cfg, batch)
        still: list[_Cohort] = []
        for c in running:
            total = c.acc + steps * e
            emitted = math.floor(total + 1e-9)
            if emitted >= c.remaining:
                finish(c, t)
            else:
                c.remaining -= emitted
                c.acc = max(total - emitted, 0.0)
                still.append(c)
        running = still
    return records


def exhaustive_optimum(
    profile: Profile,
    space: Iterable[Mapping[str, Any]],
    concurrency: int,
    metric: str,
    **workload: Any,
) -> tuple[dict[str, Any], float]:
    """The flags in `space` with the highest `metric` ("per_request_tok_s",
    "aggregate_tok_s" or "decode_tok_s") at `concurrency`; `workload` goes to predict().
    Infeasible candidates are skipped; ValueError if none is feasible."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    best: tuple[dict[str, Any], float] | None = None
    for flags in space:
        pred = predict(profile, flags, concurrency, **workload)
        if not pred.ok:
            continue
        value = getattr(pred, metric)
        if best is None or value > best[1]:
            best = (dict(flags), value)
    if best is None:
        raise ValueError("no feasible configuration in the space; widen it or use another profile")
    return best
