from __future__ import annotations

import asyncio

import pytest

from autospec.bench import AdaptiveSettings, LevelPlan, Workload, precision_verdict, run_level_adaptive
from autospec.errors import ConfigError
from autospec.metrics import summarize_repeats

from .fake_server import Reply

WORKLOAD = Workload("synthetic", output_len=6)


def _adaptive(url: str, settings: AdaptiveSettings, plan: LevelPlan | None = None):
    plan = plan or LevelPlan(2, num_requests=4)
    return asyncio.run(run_level_adaptive(url, WORKLOAD, plan, settings))


def test_stops_once_the_interval_is_narrow_enough(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2, delay_s=0.005))
    result = _adaptive(
        server.url,
        AdaptiveSettings(target_rel_half_width=10.0, min_repeats=2, max_repeats=5),
        LevelPlan(2, num_requests=4, warmup_requests=2),
    )
    assert result.converged and len(result.results) == 2
    assert result.summary.n_repeats == 2 and result.summary.n_requests == 8
    assert result.reason.startswith("2 runs: output_tok_s +-")
    assert sum(r.warmup for r in result.results[0].records) == 2
    assert not any(r.warmup for r in result.results[1].records)  # warmup only before the first run


def test_noisy_runs_repeat_up_to_the_cap(fake_server) -> None:
    # Each run (4 requests) is alternately fast and slow: the interval stays wide.
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2, delay_s=0.002 if (n // 4) % 2 else 0.02))
    result = _adaptive(server.url, AdaptiveSettings(target_rel_half_width=0.01, max_repeats=3))
    assert not result.converged and len(result.results) == 3
    assert result.reason.startswith("cap of 3 runs reached: output_tok_s +-")
    assert result.summary.output_tok_s_ci[0] < result.summary.output_tok_s < result.summary.output_tok_s_ci[1]


def test_a_failing_level_stops_at_once(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(kind="status"))
    result = _adaptive(server.url, AdaptiveSettings())
    assert not result.converged and len(result.results) == 1
    assert result.reason.startswith("level failed: no request succeeded (http_status x4)")


def test_precision_verdict_reports_each_metric(fake_server) -> None:
    server = fake_server(lambda n, body: Reply(tokens=6, per_event=2))
    run = asyncio.run(
        run_level_adaptive(server.url, WORKLOAD, LevelPlan(1, num_requests=1), AdaptiveSettings(min_repeats=1, max_repeats=1))
    )
    precise, why = precision_verdict(summarize_repeats(run.results), AdaptiveSettings())
    assert not precise and "output_tok_s interval unknown" in why  # one request, one run


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"metrics": ("speed",)}, "unknown metric"),
        ({"target_rel_half_width": 0}, "must be positive"),
        ({"min_repeats": 3, "max_repeats": 2}, "min_repeats"),
    ],
)
def test_bad_settings(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        AdaptiveSettings(**kwargs)
