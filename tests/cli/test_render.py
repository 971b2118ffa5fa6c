"""The progress display: what a user sees while a study runs."""

from __future__ import annotations

import io

from autospec.cli.render import Progress, short_label, table
from autospec.records import TrialRecord


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_progress_reports_trials_best_so_far_and_answers_without_launch():
    out = Pipe()
    p = Progress([("output_tok_s@c1", "maximize"), ("ttft_ms_p99@c32", "minimize")], stream=out)
    p.study_started("s", 0, 2, measured={5: [120.0, 650.0]})  # an earlier run's trial
    cand = {"speculative_num_steps": 3, "mem_fraction_static": 0.84}
    p.trial_started(0, 1, 2, cand)
    p.phase("bench c=1")
    p.trial_finished(0, TrialRecord("ok", cand, launched=True, values=[200.0, 900.0]), 1, 2)
    p.trial_started(1, 2, 2, cand)
    p.trial_finished(1, TrialRecord("rejected", cand, reason="SGLang says no"), 1, 2)
    p.trial_started(2, 2, 2, cand)
    p.trial_finished(2, TrialRecord("ok", cand, launched=True, values=[150.0, 700.0]), 2, 2)
    # best so far respects each objective's direction (the earlier run's 650 ms beats 700 ms),
    # and each figure names the launch it comes from
    assert p._best() == "out@c1 200.0 (trial 0), ttft_ms_p99@c32 650.0 (trial 5)"
    p.finished()
    lines = out.getvalue().splitlines()
    assert lines[0] == "study s: measuring 2 configurations"
    assert lines[1].startswith("trial 1/2 (#0) steps=3 mem=0.84 | ok out@c1 200.0 ttft_ms_p99@c32 900.0 (")
    assert lines[1].endswith(") | 1/2 done")
    assert lines[2].endswith("| rejected: SGLang says no")
    assert lines[3].endswith("| 2/2 done")
    assert lines[4].startswith("2/2 trials in ")  # what to deploy comes from the pooled front, after


def test_short_labels_keep_the_concurrency():
    assert short_label("agg_output_tok_s@c32") == "agg@c32"
    assert short_label("output_tok_s@c1") == "out@c1"
    assert short_label("ttft_ms_p99@c4") == "ttft_ms_p99@c4"


def test_table():
    text = table(["a", "bb"], [[1, "x"], [22, None]], align_right=[True, False])
    assert text.splitlines() == [" a  bb", "--  --", " 1  x", "22"]
