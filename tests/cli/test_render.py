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
    # one numbering: the trial's number (as pareto and every other line names it), after the count
    assert lines[1].startswith("[1/2] trial 0 steps=3 mem=0.84 | ok out@c1 200.0 ttft_ms_p99@c32 900.0 (")
    assert lines[1].endswith("s)") and "(#" not in out.getvalue()
    assert lines[2].endswith("| rejected: SGLang says no")
    assert lines[3].startswith("[2/2] trial 2 ") and lines[3].endswith("s)")
    assert lines[4].startswith("2/2 trials in ")  # what to deploy comes from the pooled front, after


def test_short_labels_keep_the_concurrency():
    assert short_label("agg_output_tok_s@c32") == "agg@c32"
    assert short_label("output_tok_s@c1") == "out@c1"
    assert short_label("ttft_ms_p99@c4") == "ttft_ms_p99@c4"


def test_table():
    text = table(["a", "bb"], [[1, "x"], [22, None]], align_right=[True, False])
    assert text.splitlines() == [" a  bb", "--  --", " 1  x", "22"]


def _finished_line(record: TrialRecord, candidate: dict, *, simulated: bool) -> str:
    out = Pipe()
    p = Progress([("output_tok_s@c1", "maximize")], stream=out, simulated=simulated)
    p.study_started("s", 0, 3)
    p.trial_started(4, 1, 3, candidate)
    p.trial_finished(4, record, 1, 3)
    return out.getvalue().splitlines()[-1]


SGLANG_OOM = (
    "CUDA-graph capture failed (exit code -9): Exception: Capture cuda graph failed: CUDA out of memory. Tried to "
    "allocate 1.42 GiB. GPU 0 has a total capacity of 95.59 GiB of which 691.61 MiB is free. Including non-PyTorch "
    "memory, this process has 94.91 GiB memory in use. Of the all...; lower --cuda-graph-max-bs or --mem-fraction-static"
)


def test_a_simulated_launch_failure_is_one_short_line_that_says_it_was_simulated():
    cand = {"speculative_num_steps": 3, "mem_fraction_static": 0.94}
    record = TrialRecord("cuda_graph_oom", cand, reason=SGLANG_OOM, launched=True, log_path="/tmp/x/trial-0004/server.log")
    line = _finished_line(record, cand, simulated=True)
    assert line.startswith("[1/3] trial 4 steps=3 mem=0.94 | cuda_graph_oom (simulated): CUDA-graph capture failed; log ")
    assert "CUDA out of memory" not in line and "GPU 0" not in line and len(line) <= 160
    real = _finished_line(record, cand, simulated=False)
    assert "| cuda_graph_oom: CUDA-graph capture failed; log " in real and "simulated" not in real


def test_references_are_labelled_as_references():
    tuned = {"speculative_num_steps": None, "speculative_eagle_topk": None, "mem_fraction_static": None}
    record = TrialRecord("ok", {}, launched=True, values=[100.0])
    no_spec = _finished_line(record, {**tuned, "speculative_algorithm": None}, simulated=False)
    assert no_spec.startswith("[1/3] trial 4 reference: no speculation | ok out@c1 100.0")
    assert "[1/3] trial 4 reference: SGLang's defaults |" in _finished_line(record, tuned, simulated=False)
    adaptive = {**tuned, "speculative_adaptive": True}
    assert "[1/3] trial 4 reference: --speculative-adaptive |" in _finished_line(record, adaptive, simulated=False)
