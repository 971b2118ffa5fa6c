"""How far a study's request stream runs at each level, so launches measure the same positions (pure).

Every launch of a study sends the same requests in the same order (`autospec.request_records.request_id`),
and comparisons pair them position by position (`autospec.metrics.paired`). The precision loop
stops a level when its intervals are narrow enough, so without a common floor two launches
measure different counts, and only the shorter one's positions pair: on SGLang 0.5.16 / H200
(2026-12-04, the trained 8B-shaped pair at temperature 0) a paired C=1 ratio rested on 7
matched requests while 16 were left out. Where the rate climbs over a launch (NGRAM's cache),
the positions past the shorter launch must not enter a comparison either.

`stream_lengths` gives each level the request count the study's earlier launches measured
there (the upper median over launches that measured per-position figures): a new launch
does not stop for its precision target before it (`autospec.bench.adaptive.PrecisionGoal.stream_requests`;
its time cap and ceiling still stop it), so it pairs with most earlier ones over all their
positions. The median, not the largest count, so that one long launch does not set it; and
not a hard floor: on the H100 (2026-12-06) the first launch of a fresh machine, whose time
cap follows its longer start (145 s against 70 s), measured 1,092 C=32 requests, which as a
floor kept later launches measuring for 50 s against their 21 s cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from autospec.records.stored import StoredTrial

__all__ = ["stream_lengths"]


def _measured(level: Mapping[str, object]) -> int | None:
    """The level's measured request count, where it holds per-position figures."""
    if not (level.get("request_speeds") or level.get("wave_speeds")):
        return None
    n = level.get("n_requests")
    return n if isinstance(n, int) and n > 0 else None


def stream_lengths(trials: Iterable[StoredTrial]) -> dict[int, int]:
    """Level (concurrency) -> the upper median of the measured request counts of the
    launches in `trials` that measured it with per-position figures; levels none measured
    are absent."""
    counts: dict[int, list[int]] = {}
    for trial in trials:
        record = trial.record
        if record is None or not record.launched:
            continue
        for concurrency, level in record.bench.items():
            n = _measured(level) if isinstance(level, Mapping) else None
            if n is not None:
                counts.setdefault(int(concurrency), []).append(n)
    return {c: sorted(ns)[len(ns) // 2] for c, ns in counts.items()}
