"""Print the seconds one more launch of a study takes, as its own launched trials measured them.

    python3 launch_seconds.py STORAGE STUDY   ->  e.g. "136" (nothing before a warm launch)

The longest of its last `RECENT` warm launches (autospec's `seconds.total`: preflight, launch,
benchmark and teardown), plus `MARGIN_S`, rounded up. A study's first launch on each machine
is left out: a fresh machine's first server is ready in about 165 s against 55-90 s later
(H100, 2026-12-07), and studies_in_turn.sh reserves for it apart. run_study.sh stops autospec
starting a trial this long before its deadline, so a trial that starts can finish: a fixed
guess of 110 s cut the sampled space's launches of 111-144 s.
"""

from __future__ import annotations

import math
import sys

import optuna

from autospec.records import read_trials

RECENT = 8
MARGIN_S = 5.0


def launch_seconds(storage: str, study_name: str) -> int | None:
    """The seconds to reserve for one more warm launch of `study_name`; None without one."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seen: set[str | None] = set()
    totals = []
    for t in read_trials(optuna.load_study(study_name=study_name, storage=storage)):
        if not t.launched or t.record is None:
            continue
        first_here = t.machine not in seen
        seen.add(t.machine)
        total = t.record.seconds.get("total")
        if total and not first_here:
            totals.append(float(total))
    return math.ceil(max(totals[-RECENT:]) + MARGIN_S) if totals else None


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python3 launch_seconds.py STORAGE STUDY")
    seconds = launch_seconds(sys.argv[1], sys.argv[2])
    if seconds is not None:
        print(seconds)
