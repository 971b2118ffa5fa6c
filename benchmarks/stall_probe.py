"""Are the C=32 throughput stalls on a real server the server's or the client's?

Reads what tools/gpu/stall_probe.sh wrote on the GPU machine and puts the client's and
the server's view of the same seconds side by side:

    .venv/bin/python benchmarks/stall_probe.py OUT/probe

- client: output tokens received per wall-clock second (every streamed chunk of every
  request of the one-client C=32 run, `chunk_tokens` at `chunk_times`);
- server: decode steps completed in that second (SGLang logs one "Decode batch" line per
  `--decode-log-interval` = 10 steps) and the throughput those lines report, and prefill
  batches started.

If the server completed fewer decode steps in the seconds the client saw fewer tokens, the
stall is the server's (it stepped less often), not the measurement's.
"""

from __future__ import annotations

import collections
import datetime
import json
import re
import statistics
import sys
from pathlib import Path

LINE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] (Decode|Prefill) batch")
GEN = re.compile(r"gen throughput \(token/s\): ([\d.]+)")
STEPS_PER_LINE = 10


def main(folder: Path) -> int:
    wall0, mono0 = map(float, (folder / "clock").read_text().split())
    split = int((folder / "split").read_text())
    tokens: collections.Counter[int] = collections.Counter()
    for line in (folder / "one-client.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("warmup"):
            continue
        for t, n in zip(r.get("chunk_times") or [], r.get("chunk_tokens") or []):
            tokens[int(wall0 + (t - mono0))] += n
    steps: collections.Counter[int] = collections.Counter()
    gen: dict[int, list[float]] = collections.defaultdict(list)
    prefills: collections.Counter[int] = collections.Counter()
    for line in (folder / "server.log").read_text().splitlines()[:split]:
        m = LINE.match(line)
        if not m:
            continue
        second = int(
            datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
        )
        if m.group(2) == "Decode":
            steps[second] += STEPS_PER_LINE
            g = GEN.search(line)
            if g:
                gen[second].append(float(g.group(1)))
        else:
            prefills[second] += 1
    seconds = sorted(tokens)[1:-1]  # the first and last seconds are partial
    client = [tokens[s] for s in seconds]
    server = [steps[s] for s in seconds]
    median = statistics.median(client)
    dips = [s for s in seconds if tokens[s] < 0.75 * median]
    full = [s for s in seconds if tokens[s] >= 0.9 * median]
    variation = statistics.pstdev(client) / statistics.mean(client)
    print(
        f"{len(seconds)} whole seconds of the one-client C=32 run; client tokens/s median {median:,.0f}, "
        f"min {min(client):,}, max {max(client):,} (coefficient of variation {variation:.1%})"
    )
    print(f"correlation of client tokens/s with server decode steps/s: {statistics.correlation(client, server):.2f}")
    for name, group in (("dip seconds (< 75% of the median)", dips), ("full seconds (>= 90%)", full)):
        if not group:
            continue
        print(
            f"{name}: {len(group)}; server decode steps/s median {statistics.median(steps[s] for s in group):.0f}, "
            f"reported gen throughput median {statistics.median(g for s in group for g in gen[s]):,.0f} tok/s, "
            f"prefill batches/s median {statistics.median(prefills[s] for s in group):.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
