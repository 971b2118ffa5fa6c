"""The progress display: what a user sees while a study runs."""

from __future__ import annotations

import io

from autospec.cli.render import Progress, table
from autospec.study.records import TrialRecord


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_progress_reports_trials_best_so_far_and_answers_without_launch():
    out = Pipe()
    p = Progress([("output_tok_s@c1", "maximize"), ("ttft_ms_p99@c32", "minimize")], stream=out)
    p.study_started("s", 0, 2, measured=[[120.0, 650.0]])  # an earlier run's trial
    cand = {"speculative_num_steps": 3, "mem_fraction_static": 0.84}
    p.trial_started(0, 1, 2, cand)
    p.phase("bench c=1")
    p.trial_finished(0, TrialRecord("ok", cand, launched=True, values=[200.0, 900.0]), 1, 2)
    p.trial_started(1, 2, 2, cand)
    p.trial_finished(1, TrialRecord("rejected", cand, reason="SGLang says no"), 1, 2)
    p.trial_started(2, 2, 2, cand)
    p.trial_finished(2, TrialRecord("ok", cand, launched=True, values=[150.0, 700.0]), 2, 2)
    lines = out.getvalue().splitlines()
    assert lines[0] == "study s: measuring 2 configurations"
    assert "trial 1/2 (#0) steps=3 mem=0.84 | ok output_tok_s@c1=200.0 ttft_ms_p99@c32=900.0" in lines[1]
    assert "rejected: SGLang says no" in lines[2]
    # best so far respects each objective's direction; the rejection is counted, not launched
    assert lines[3].endswith("2/2 done, best output_tok_s@c1=200.0 ttft_ms_p99@c32=650.0 | without launch: 1 rejected")


def test_table():
    text = table(["a", "bb"], [[1, "x"], [22, None]], align_right=[True, False])
    assert text.splitlines() == [" a  bb", "--  --", " 1  x", "22"]
