"""Chaos, small: `benchmarks/chaos.py` with one SIGKILL of the tuner at each moment of a
trial (launch, benchmark, teardown, storage write), every server forking a child that
leaves its process group. The same command run after each kill must end with exactly the
target number of launched trials, every trial finished before a kill unchanged, a retry
for every trial a kill interrupted, and no simulator process left. The long run (>= 20
kills at random moments) is `python benchmarks/chaos.py`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]

CHAOS = Path(__file__).resolve().parents[2] / "benchmarks" / "chaos.py"


def load_chaos():
    spec = importlib.util.spec_from_file_location("autospec_bench_chaos", CHAOS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_sigkill_at_each_moment_of_a_trial_loses_nothing_and_leaves_nothing(tmp_path):
    chaos = load_chaos()
    moments = ("launch", "benchmark", "teardown", "storage_write")
    lines: list[str] = []
    # kills in the first, second, first and second trial a round launches: the second
    # leaves a measured trial behind that later kills must not change
    result = chaos.run_chaos(tmp_path, kills=4, trials=4, seed=3, moments=moments, nths=(1, 2), log=lines.append)

    assert result.kills == 4, lines
    assert dict(result.moments) == {m: 1 for m in moments}
    assert result.final_exit == 0, lines
    assert result.launched == 4
    assert result.trials_lost == 0, result.lost_detail
    assert result.checked_complete >= 1 and result.checked_finished >= 4
    assert result.retries_missing == 0
    assert result.leftover_processes == 0, result.leftover_detail
    events = (tmp_path / "studies" / "chaos-events.log").read_text()
    assert "was running when the tuner stopped; failed it" in events
    assert "stopped leftover server of trial" in events
