"""Steady-state aggregate throughput of a closed-loop level (pure).

A level at concurrency C starts with C requests at once (ramp-up: they are all in
prefill together, and on a fresh server the first batch of that size may also pay
for kernel compilation) and ends with a drain (no request replaces those that
finish). Neither happens in a server under steady load, and in a short level they
weigh a lot: measured on SGLang 0.5.16, 64 requests at C=32 gave 10,063 tok/s where
15-second levels gave 16,530-17,606. The steady window leaves both out:

    start  C requests are in flight, and as many requests are receiving output at
           once as ever before the drain (the server's batch has formed: min(C, what
           it admits at once)); the first time that count rises to its peak
    end    the last time that count rises to its peak before the drain begins (the
           first request to end after the last one was sent: from then on fewer than C
           are in flight)

One-off stalls are left out as well: a server that meets a batch shape for the first
time may stop for seconds (measured on SGLang 0.5.16 / H200, triton attention, NGRAM:
prefill batches of 17 new requests beside 15 running took 4 s, once, in the middle of
a C=32 level), which a server under steady load paid long ago. The window, cut into
slices of one wave, starts after the longest run of slices that delivered under
`STALL_SHARE` of the median slice's rate, if such slices after it add up to under half
that run, what follows holds `MIN_SLICES` waves and lasts at least as long as everything
the stall cut off (`transient_s`): a stall that recurs (a periodic pause, a new server
meeting batch shapes again and again) stays in the window and in its interval, and so
does a later hiccup of a slice or so (a loaded host).

Starting and ending where the batch forms makes the window span whole cycles of
prefill and decode: with identical requests the batches stay in lockstep (waves), and
a window from the first wave's first tokens to the last wave's first tokens holds as
many prefills as decodes, so it reads neither high nor low. With requests that drift
apart (varied lengths) the count is at its peak most of the time and the window ends
just before the drain. A run with a single wave has one rise; its window then ends at
the drain (a decode without its prefill: it reads a little high, and its share is small).

Tokens are counted where they arrived inside [start, end]: each output event's tokens
spread evenly over the time since the request's previous event (the first event's at
its arrival), or, where the records carry no per-event counts (`chunk_tokens`), one
token at the first output and the rest spread evenly until the request ended; so a
request straddling either edge counts pro rata. Failed requests hold a slot (they
count as in flight) but bring no tokens.

The interval combines two. A paired bootstrap over the requests that received output
inside the window, each with its tokens there and its time there since its first output:
the window's rate is (mean number of requests receiving output) x sum(tokens) /
sum(time), the first factor measured exactly, so the ratio's relative spread is applied
to the rate. And an interval over time, which sees what requests of one wave share (their
batch, its stalls), which the bootstrap cannot (`method` says which):

    batch-means   the window cut into equal slices of at least one wave (the median
                  request latency, a closed loop's period; 3 to 30 slices), a Student-t
                  interval by overlapping batch means (batches of one slice, starting at
                  `OBM_STEPS` offsets per slice: half again the degrees of freedom of the
                  disjoint slices); the wider of it and the bootstrap
    short-window  a window under 3 waves (sim C=32 at its floor of two waves holds one):
                  `SHORT_SLICES` equal sub-wave slices, a Student-t half-width over their
                  rates with their spread taken robustly (median absolute deviation: the
                  prefill every wave repeats lowers a slice or two, which is no noise in a
                  window of whole cycles) unless a slice stalled (under `STALL_SHARE` of
                  the median: then their standard deviation), widened by
                  sqrt((1 + r) / (1 - r)) for their lag-1 autocorrelation r, and added in
                  quadrature to the bootstrap's. It cannot see how waves differ beyond
                  that, so reports flag it, the race does not compare it and it never
                  meets a precision target. docs/figures.md ("Confidence") has its
                  calibration against the simulator and real SGLang 0.5.16 records

A window with no interval over time keeps the bootstrap's, and the other way round (only a
window with one request and no time has none). On SGLang 0.5.16 / H200 (NGRAM, 16 draft
tokens, C=32) the bootstrap alone said +-1% after windows of 1.3-3 s. The interval
describes how fast requests were served (acceptance, step times), not the launch-to-launch
noise of a server (docs/figures.md, "Confidence"). `slices` (whole waves the window
holds) says how far the interval can be trusted: a precision target counts as met, and
the race compares it, only with `PRECISE_SLICES` of them. `share` (the window's share of
the level's run) says how much of the run was steady; a window below `MIN_SHARE` of the
run is flagged (`short`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autospec.metrics import stats

if TYPE_CHECKING:
    from autospec.request_records import RequestRecord

__all__ = [
    "BATCH_MEANS",
    "MIN_SHARE",
    "PRECISE_SLICES",
    "SHORT_WINDOW",
    "STALL_SHARE",
    "SteadyWindow",
    "steady_window",
    "tokens_between",
]

MIN_SHARE = 0.5
MIN_SLICES = 3  # batch means need this many slices of one wave each for an interval
PRECISE_SLICES = 10  # whole waves a window holds before its interval may meet a precision target
SHORT_SLICES = 10  # sub-wave slices of a window too short for batch means
BATCH_MEANS = "batch-means"
SHORT_WINDOW = "short-window"
MAX_SLICES = 30
OBM_STEPS = 8  # offsets per slice at which overlapping batch means start a batch
STALL_SHARE = 0.5  # a slice of one wave that delivered under this share of the median slice's rate stalled
MAX_STALL_SLICES = 400  # slices the stall search cuts the window into at most (each at least one wave)


@dataclass(frozen=True)
class SteadyWindow:
    """The full-concurrency window of one run, and the throughput inside it."""

    start: float
    end: float
    run_start: float
    run_end: float
    tokens: float  # output tokens that arrived inside [start, end]
    interval: tuple[float, float]  # 95% interval of `rate`
    requests: int = 0  # requests that received output inside the window
    transient_s: float = 0.0  # seconds at full concurrency before `start` left out: a one-off stall
    slices: int = 0  # whole waves (one median request latency each) the window holds
    method: str | None = None  # how `interval` was formed over time: BATCH_MEANS or SHORT_WINDOW

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 0.0)

    @property
    def run_seconds(self) -> float:
        return max(self.run_end - self.run_start, 0.0)

    @property
    def share(self) -> float:
        """The share of the level's run at full concurrency (the window and a one-off stall
        left out before it; 0 when there is no window)."""
        return (self.seconds + self.transient_s) / self.run_seconds if self.run_seconds > 0 else 0.0

    @property
    def short(self) -> bool:
        """Too little of the run was at full concurrency to trust the figure."""
        return self.share < MIN_SHARE

    @property
    def rate(self) -> float:
        """Output tokens per second inside the window (NaN without a window)."""
        return self.tokens / self.seconds if self.seconds > 0 else math.nan


def _end(record: RequestRecord) -> float:
    return record.t_done if record.t_done is not None else record.t_sent


class _TokenCurves:
    """Every record's cumulative output-token curve, evaluated for all records at once.

    A record's curve: the first event's tokens at its arrival, then each later event's
    tokens spread evenly since the event before it (without per-event counts: the
    remaining tokens spread evenly until done). Failed records have none."""

    def __init__(self, records: Sequence[RequestRecord]) -> None:
        self.n = len(records)
        point_t: list[float] = []
        point_n: list[float] = []
        point_r: list[int] = []
        seg_s: list[np.ndarray] = []
        seg_e: list[np.ndarray] = []
        seg_n: list[np.ndarray] = []
        seg_r: list[np.ndarray] = []
        for i, r in enumerate(records):
            if not r.ok or r.t_first is None or r.completion_tokens <= 0:
                continue
            if r.chunk_tokens and r.chunk_times:
                times = np.asarray(r.chunk_times, dtype=float)
                tokens = np.asarray(r.chunk_tokens, dtype=float)
            else:
                times = np.array([r.t_first, max(_end(r), r.t_first)])
                tokens = np.array([1.0, r.completion_tokens - 1.0])
            point_t.append(float(times[0]))
            point_n.append(float(tokens[0]))
            point_r.append(i)
            seg_s.append(times[:-1])
            seg_e.append(times[1:])
            seg_n.append(tokens[1:])
            seg_r.append(np.full(times.size - 1, i))
        start = np.concatenate(seg_s) if seg_s else np.empty(0)
        end = np.concatenate(seg_e) if seg_e else np.empty(0)
        count = np.concatenate(seg_n) if seg_n else np.empty(0)
        owner = np.concatenate(seg_r) if seg_r else np.empty(0, dtype=int)
        instant = end <= start  # an event at the same instant as the one before: a point
        self._point_t = np.concatenate([np.asarray(point_t, dtype=float), end[instant]])
        self._point_n = np.concatenate([np.asarray(point_n, dtype=float), count[instant]])
        self._point_r = np.concatenate([np.asarray(point_r, dtype=int), owner[instant]]).astype(int)
        keep = ~instant & (count != 0)
        self._start, self._end, self._count, self._owner = start[keep], end[keep], count[keep], owner[keep]

    def upto(self, t: float) -> np.ndarray:
        """Per record: tokens that arrived at or before `t`."""
        out = np.bincount(self._point_r, weights=self._point_n * (self._point_t <= t), minlength=self.n)
        if self._count.size:
            share = np.clip((t - self._start) / (self._end - self._start), 0.0, 1.0)
            out = out + np.bincount(self._owner, weights=self._count * share, minlength=self.n)
        return out

    def total_upto(self, times: np.ndarray) -> np.ndarray:
        """All records' tokens that arrived at or before each of `times` (vectorised: a
        segment with slope k from s to e adds k (t - s) once t > s, less k (t - e) once t > e)."""
        times = np.asarray(times, dtype=float)
        order = np.argsort(self._point_t)
        points = np.concatenate([[0.0], np.cumsum(self._point_n[order])])
        out = points[np.searchsorted(self._point_t[order], times, side="right")]
        slope = self._count / (self._end - self._start)
        for edge, sign in ((self._start, 1.0), (self._end, -1.0)):
            order = np.argsort(edge)
            k = np.concatenate([[0.0], np.cumsum(slope[order])])
            ke = np.concatenate([[0.0], np.cumsum(slope[order] * edge[order])])
            n = np.searchsorted(edge[order], times, side="left")
            out = out + sign * (times * k[n] - ke[n])
        return out

    def between(self, a: float, b: float) -> np.ndarray:
        """Per record: tokens that arrived in (a, b]."""
        return self.upto(b) - self.upto(a) if b > a else np.zeros(self.n)


def tokens_between(record: RequestRecord, a: float, b: float) -> float:
    """Output tokens of a successful `record` that arrived in (a, b]: the first event's
    tokens at its arrival, each later event's spread evenly since the one before it
    (without per-event counts: one token at the first output, the others spread evenly
    until done). Failed records bring none."""
    return float(_TokenCurves([record]).between(a, b).sum())


def _sweep(events: list[tuple[float, int]]) -> list[tuple[float, int, int]]:
    """(time, step, count after it) for +1/-1 events, ends before starts at one instant."""
    out: list[tuple[float, int, int]] = []
    level = 0
    for t, step in sorted(events, key=lambda e: (e[0], e[1])):
        level += step
        out.append((t, step, level))
    return out


def steady_window(records: Sequence[RequestRecord], concurrency: int) -> SteadyWindow | None:
    """The steady window of one run's measured records (None without records).

    A run that never had C requests in flight, or whose drain began before its ramp-up
    ended, has an empty window (share 0, rate NaN)."""
    if not records:
        return None
    run_start = min(r.t_sent for r in records)
    run_end = max(_end(r) for r in records)
    empty = SteadyWindow(run_start, run_start, run_start, run_end, 0.0, stats.NAN_INTERVAL)
    in_flight = _sweep([(r.t_sent, 1) for r in records] + [(_end(r), -1) for r in records])
    full = next((t for t, _, level in in_flight if level >= concurrency), None)
    if full is None:
        return empty
    last_sent = max(r.t_sent for r in records)
    drain = min((_end(r) for r in records if _end(r) > last_sent), default=run_end)
    firsts = [(r.t_first, _end(r)) for r in records if r.t_first is not None and _end(r) >= r.t_first]
    streaming = [
        (t, step, level)
        for t, step, level in _sweep([(first, 1) for first, _ in firsts] + [(done, -1) for _, done in firsts])
        if t <= drain
    ]
    peak = max((level for t, _, level in streaming if t >= full), default=0)
    rises = [t for t, step, level in streaming if step > 0 and level == peak and t >= full]
    if not rises:
        return empty
    formed = rises[0]
    end = rises[-1] if rises[-1] > formed else drain
    if end <= formed:
        return empty
    curves = _TokenCurves(records)
    cycle = _cycle(records)
    start = _after_one_off_stall(curves, formed, end, cycle)
    tokens = curves.between(start, end)
    first = np.array([r.t_first if r.ok and r.t_first is not None else math.inf for r in records])
    ends = np.array([_end(r) for r in records])
    streamed = np.clip(np.minimum(ends, end) - np.maximum(first, start), 0.0, None)
    inside = streamed > 0
    rate = float(tokens.sum()) / (end - start)
    slices = _whole_slices(start, end, cycle)
    method = BATCH_MEANS if slices >= MIN_SLICES else SHORT_WINDOW
    per_request = _relative_interval(tokens[inside], streamed[inside], rate)
    if method == BATCH_MEANS:
        interval = _wider(per_request, _batch_means_interval(curves, start, end, slices))
    else:
        interval = _short_window_interval(curves, start, end, per_request, rate)
    return SteadyWindow(
        start,
        end,
        run_start,
        run_end,
        float(tokens.sum()),
        interval,
        int(inside.sum()),
        transient_s=start - formed,
        slices=slices,
        method=method,
    )


def _after_one_off_stall(curves: _TokenCurves, start: float, end: float, cycle: float) -> float:
    """Where the window [start, end] begins once a one-off stall is left out (module
    docstring): the end of the longest run of consecutive slices (each at least one
    `cycle` long) that delivered under STALL_SHARE of the median slice's rate, if the
    slices that did so after it add up to under half that run (more is a stall that
    recurs) and the rest holds MIN_SLICES cycles and lasts at least as long as what it
    leaves out; otherwise `start`. A later slice or two of a host's hiccup stays in the
    window and in its interval."""
    if not (math.isfinite(cycle) and cycle > 0):
        return start
    count = min(int((end - start) // cycle), MAX_STALL_SLICES)
    if count < 2 * MIN_SLICES:
        return start
    edges = np.linspace(start, end, count + 1)
    delivered = np.diff(curves.total_upto(edges))
    low = delivered < STALL_SHARE * float(np.median(delivered))
    if not low.any():
        return start
    first, last = _longest_run(low)
    if 2 * int(low[last + 1 :].sum()) >= last - first + 1:
        return start
    after = float(edges[last + 1])
    return after if end - after >= max(after - start, MIN_SLICES * cycle) else start


def _longest_run(flags: np.ndarray) -> tuple[int, int]:
    """(first, last) index of the longest run of consecutive True values (the latest of
    equally long ones); `flags` holds at least one True."""
    best, run_start = (0, -1), None
    for i, flag in enumerate(flags):
        if flag and run_start is None:
            run_start = i
        if run_start is not None and (not flag or i == len(flags) - 1):
            stop = i if flag else i - 1
            if stop - run_start >= best[1] - best[0]:
                best = (run_start, stop)
            run_start = None
    return best


def _cycle(records: Sequence[RequestRecord]) -> float:
    """The median latency of a successful request (ramp requests, shortened, left out): in
    a closed loop, one wave's period."""
    spans = [_end(r) - r.t_sent for r in records if r.ok and not r.ramp and _end(r) > r.t_sent]
    return float(np.median(spans)) if spans else math.inf


def _whole_slices(start: float, end: float, cycle: float) -> int:
    """Slices of one `cycle` (a wave) that [start, end] holds, at most MAX_SLICES."""
    if not (math.isfinite(cycle) and cycle > 0):
        return 0
    return min(int((end - start) // cycle), MAX_SLICES)


def _slice_rates(curves: _TokenCurves, start: float, end: float, count: int) -> np.ndarray:
    edges = np.linspace(start, end, count + 1)
    return np.diff(curves.total_upto(edges)) / np.diff(edges)


def _batch_means_interval(curves: _TokenCurves, start: float, end: float, slices: int) -> tuple[float, float]:
    """Student-t interval of the rate over [start, end] by overlapping batch means: batches
    of one of `slices` equal slices (each at least one wave: requests of one wave share
    their batch, so slices, not requests, are what vary independently), at every one of
    `OBM_STEPS` offsets per slice (`stats.overlapping_batch_means_interval`: over 3 slices
    3 degrees of freedom where the disjoint slices give 2). NaN with fewer than MIN_SLICES."""
    if slices < MIN_SLICES:
        return stats.NAN_INTERVAL
    return stats.overlapping_batch_means_interval(_slice_rates(curves, start, end, slices * OBM_STEPS), OBM_STEPS)


def _short_window_half(curves: _TokenCurves, start: float, end: float) -> float:
    """The over-time half-width of a window too short for batch means: a Student-t
    half-width over SHORT_SLICES equal sub-wave slices of [start, end], the slices' spread
    taken robustly (1.4826 x their median absolute deviation) so that the prefills every
    wave repeats, a few slices at a lower rate, do not count as noise, unless a slice
    stalled (under STALL_SHARE of the median slice's rate: then their standard deviation,
    since how many stalls a short window happens to hold is what moves its figure); widened by
    sqrt((1 + r) / (1 - r)) for the slices' lag-1 autocorrelation r (clipped to [0, 0.9]:
    the variance of a mean of an AR(1) series, which a drifting rate resembles). NaN for
    an empty window."""
    if end <= start:
        return math.nan
    rates = _slice_rates(curves, start, end, SHORT_SLICES)
    centre = float(np.median(rates))
    stalled = bool(np.any(rates < STALL_SHARE * centre))
    spread = float(rates.std(ddof=1)) if stalled else 1.4826 * float(np.median(np.abs(rates - centre)))
    r = min(max(stats.lag1_autocorrelation(rates), 0.0), 0.9)
    return stats.t_quantile(SHORT_SLICES - 1) * spread / math.sqrt(SHORT_SLICES) * math.sqrt((1 + r) / (1 - r))


def _short_window_interval(
    curves: _TokenCurves, start: float, end: float, per_request: tuple[float, float], rate: float
) -> tuple[float, float]:
    """A short window's interval: its over-time half-width (`_short_window_half`) and the
    per-request bootstrap's, added in quadrature (each may miss what the other sees: time
    slices the noise all requests share, requests how they differ), around `rate`."""
    over_time = _short_window_half(curves, start, end)
    boot = (per_request[1] - per_request[0]) / 2 if not any(math.isnan(x) for x in per_request) else 0.0
    if math.isnan(over_time) or not math.isfinite(rate):
        return per_request
    half = math.hypot(over_time, boot)
    return rate - half, rate + half


def _wider(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """The wider of two intervals around the same figure; the known one if only one is."""
    a_known, b_known = not any(math.isnan(x) for x in a), not any(math.isnan(x) for x in b)
    if not (a_known and b_known):
        return a if a_known else b
    return a if a[1] - a[0] >= b[1] - b[0] else b


def _relative_interval(tokens: np.ndarray, streamed: np.ndarray, rate: float) -> tuple[float, float]:
    """`rate` x the relative bootstrap interval of sum(tokens) / sum(streamed)."""
    if tokens.size < 2 or streamed.sum() <= 0 or not math.isfinite(rate):
        return stats.NAN_INTERVAL
    ratio = float(tokens.sum() / streamed.sum())
    if ratio <= 0:
        return stats.NAN_INTERVAL
    lo, hi = stats.bootstrap_ratio_ci(tokens, streamed)
    return (rate * lo / ratio, rate * hi / ratio) if math.isfinite(lo) else stats.NAN_INTERVAL
