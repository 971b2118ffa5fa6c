"""Are the steady aggregate's intervals as wide as the figures actually scatter?

Runs ``autospec bench --sim --adaptive`` (one simulator server, default profile, NEXTN
3 steps; C=32, 64 requests of 256 output tokens, the quick start's floor: a steady
window of about one wave) ``--runs`` times in a row on the same server, with
``--records``, and forms each run's steady aggregate and its 95% interval from the
records. The runs share the server (its per-launch speed factor), so the scatter of
their figures is what one run's interval should cover. Per method it prints the mean
claimed half-width, the observed half-width (1.96 x the runs' standard deviation) and
their ratio (1.0: calibrated; below 1: too narrow), and how many runs' intervals hold
the runs' mean:

- shipped     what `autospec.metrics.steady_window` reports (the short-window method
              in a window under 3 waves)
- slices-t    the baseline: a plain Student-t over the same sub-wave slices (their
              spread counts each wave's prefill as noise)
- bootstrap   the per-request bootstrap alone (blind to what requests of one wave share)

    .venv/bin/python benchmarks/interval_calibration.py [--runs 8] [--requests 64]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from autospec.bench.records import RequestRecord
from autospec.metrics import stats, steady_window
from autospec.metrics.steady import SHORT_SLICES, _relative_interval, _slice_rates, _TokenCurves

FLAGS = ("speculative_algorithm=NEXTN", "speculative_num_steps=3", "speculative_eagle_topk=1", "speculative_num_draft_tokens=4")


def run_bench(runs: int, requests: int, out: Path) -> None:
    cmd = [sys.executable, "-m", "autospec", "bench", "--sim", "--concurrency", "32", "--num-requests", str(requests)]
    cmd += ["--warmup", "32", "--input-len", "32", "--output-len", "256", "--adaptive", "--max-repeats", str(runs)]
    cmd += ["--target-ci", "0.000001", "--records", str(out), "--quiet"]
    for flag in FLAGS:
        cmd += ["--flag", flag]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def load_runs(path: Path) -> list[list[RequestRecord]]:
    names = {f.name for f in dataclasses.fields(RequestRecord)}
    runs: dict[int, list[RequestRecord]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items() if k in names}
        record = RequestRecord(**fields)
        if not record.warmup:
            runs.setdefault(int(row.get("repeat", 0)), []).append(record)
    return [runs[k] for k in sorted(runs)]


def halves(records: list[RequestRecord]) -> tuple[float, dict[str, float]]:
    """(the run's steady rate, half-width per method)."""
    window = steady_window(records, 32)
    assert window is not None
    curves = _TokenCurves(records)
    rates = _slice_rates(curves, window.start, window.end, SHORT_SLICES)
    lo, hi = stats.t_interval(rates)
    first = np.array([r.t_first if r.ok and r.t_first is not None else math.inf for r in records])
    ends = np.array([r.t_done if r.t_done is not None else r.t_sent for r in records])
    streamed = np.clip(np.minimum(ends, window.end) - np.maximum(first, window.start), 0.0, None)
    tokens = curves.between(window.start, window.end)
    inside = streamed > 0
    b_lo, b_hi = _relative_interval(tokens[inside], streamed[inside], window.rate)
    return window.rate, {
        "shipped": (window.interval[1] - window.interval[0]) / 2,
        "slices-t": (hi - lo) / 2,
        "bootstrap": (b_hi - b_lo) / 2,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--requests", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        run_bench(args.runs, args.requests, path)
        measured = [halves(r) for r in load_runs(path)]
    figures = [rate for rate, _ in measured]
    mean = statistics.fmean(figures)
    observed = 1.96 * statistics.stdev(figures)
    print(f"{len(figures)} runs of {args.requests} requests at C=32: steady aggregate {mean:,.1f} tok/s")
    print(f"{'method':<10}  {'claimed':>8}  {'observed':>8}  {'ratio':>6}  hold the mean")
    for method in ("shipped", "slices-t", "bootstrap"):
        claimed = statistics.fmean(h[method] for _, h in measured)
        held = sum(abs(rate - mean) <= h[method] for rate, h in measured)
        print(
            f"{method:<10}  {claimed / mean:>8.2%}  {observed / mean:>8.2%}  {claimed / observed:>6.2f}  {held}/{len(measured)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
