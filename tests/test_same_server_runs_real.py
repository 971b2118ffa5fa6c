"""Four C=32 levels one after another on one real server (SGLang 0.5.16 on an H200, the
8B-shaped target, NGRAM with 8 draft tokens; tests/fixtures/real_8b_c32_same_server_runs.json.gz,
its "about" says how they were measured; docs/validation/2026-12-03-h200-8b-launches-of-one-configuration.md),
replayed through the steady window: the runs accept drafts alike, yet their
aggregates differ beyond their own intervals. The server's step time drifts from minute to
minute, so a 15-second level cannot pin its configuration's figure to +-3% however it is
sliced, and only more launches or longer levels narrow it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from autospec.metrics import BATCH_MEANS, summarize
from autospec.metrics.relaunch import LaunchFigure
from autospec.records.confirming import launches_disagree
from autospec.request_records import LevelResult, RequestRecord

FIXTURE = Path(__file__).parent / "fixtures" / "real_8b_c32_same_server_runs.json.gz"
RUNS = json.loads(gzip.decompress(FIXTURE.read_bytes()))["runs"]


def level(run: dict) -> LevelResult:
    records = tuple(
        RequestRecord(
            ok=True, error_kind=None, t_sent=s, t_first=f, t_done=d, chunk_times=(f, d), completion_tokens=k, spec_verify_ct=v
        )
        for s, f, d, k, v in run["records"]
    )
    return LevelResult(records, 0.0, 32)


def test_runs_that_accept_alike_on_one_server_still_disagree_beyond_their_intervals():
    waved = {n: run for n, run in RUNS.items() if run["agg_ci_method"] == BATCH_MEANS}
    assert len(waved) == 3  # the first run's window held one wave only
    summaries = {n: summarize(level(run)) for n, run in waved.items()}
    accepts = [s.accept_length for s in summaries.values()]
    assert max(accepts) / min(accepts) < 1.01  # acceptance alike to 1%
    for n, s in summaries.items():  # the replay, with two timestamps a request, agrees with the device's figure
        assert s.agg_output_tok_s == pytest.approx(waved[n]["agg_output_tok_s"], rel=0.025)
        assert s.agg_ci_method == BATCH_MEANS
    device = [
        LaunchFigure(r["agg_output_tok_s"], (r["agg_output_tok_s_ci"][1] - r["agg_output_tok_s_ci"][0]) / 2)
        for r in waved.values()
    ]
    assert launches_disagree(device)
    values = [f.value for f in device]
    assert (max(values) - min(values)) / min(values) > 0.10
