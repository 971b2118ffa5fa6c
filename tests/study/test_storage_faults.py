"""A storage that goes away in the middle of a trial: a real PostgreSQL server of the
test's own is stopped while the tuner benchmarks a server, and started again.

- Back within the patience: the tuner waits, stores the trial and reaches its target.
- Away for longer: the tuner stops like SIGTERM does (server torn down, one-line
  message, exit 1) and keeps the trial's result in a pending file; the same command,
  once the storage is back, stores that result and goes on.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

STUDY = "away"

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def bench_started(tmp_path: Path, number: int = 0) -> bool:
    """Trial `number`'s server answered readiness and got a benchmark request."""
    log = tmp_path / "studies" / f"{STUDY}-trials" / f"trial-{number:04d}" / "server.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    marker = 'GET /health_generate HTTP/1.1" 200'
    return marker in text and "POST /generate" in text.split(marker, 1)[1]


def argv(space: Path, tmp_path: Path, url: str, *extra: str) -> list[str]:
    return [
        "optimize",
        "--space",
        str(space),
        "--study",
        STUDY,
        "--storage",
        url,
        "--studies-dir",
        str(tmp_path / "studies"),
        "--trials",
        "2",
        "--seed",
        "3",
        "--no-learn",
        "--sim",
        "--sim-load-seconds",
        "0.1",
        "--quiet",
        *extra,
    ]


def launched(url: str) -> list[optuna.trial.FrozenTrial]:
    study = optuna.load_study(study_name=STUDY, storage=url)
    return [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched")]


@pytest.fixture
def slow_space(tmp_path: Path) -> Path:
    """Every candidate launches; a benchmark takes a few seconds (256 tokens at C=1)."""
    from simspace import sim_space_text

    path = tmp_path / "slow.toml"
    path.write_text(sim_space_text().replace("output_len = 24", "output_len = 256"))
    return path


def test_a_storage_back_within_the_patience_delays_the_trial_but_loses_nothing(tmp_path, slow_space, postgres_instance, tuners):
    (tmp_path / "studies").mkdir()
    url = postgres_instance.server.url("postgres")
    tuner = tuners(argv(slow_space, tmp_path, url)).start()
    tuner.wait_until(lambda: bench_started(tmp_path), "the first server to be benchmarked")
    postgres_instance.stop()
    events_log = tmp_path / "studies" / f"{STUDY}-events.log"
    # away until the tuner has needed it (the trial's result is due) and is retrying
    tuner.wait_until(lambda: "is not answering" in events_log.read_text(), "the tuner to find the storage away")
    postgres_instance.start()
    assert tuner.wait() == 0, tuner.stderr
    assert len(launched(url)) == 2
    assert "retrying to" in events_log.read_text()
    assert tuners.leftovers() == {}


def test_a_storage_away_for_longer_stops_the_run_and_the_next_run_stores_the_kept_result(
    tmp_path, slow_space, postgres_instance, tuners
):
    (tmp_path / "studies").mkdir()
    url = postgres_instance.server.url("postgres")
    first = tuners(argv(slow_space, tmp_path, url, "--storage-patience", "3")).start()
    first.wait_until(lambda: bench_started(tmp_path), "the first server to be benchmarked")
    postgres_instance.stop()
    assert first.wait() == 1
    err = first.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("autospec: error:"), first.stderr
    assert "did not answer for 3 s" in err[0] and "kept in" in err[0] and "run" in err[0]
    assert tuners.leftovers() == {}  # the server was torn down
    (pending,) = (tmp_path / "studies").glob(f"{STUDY}-pending/trial-*.json")

    postgres_instance.start()
    second = tuners(argv(slow_space, tmp_path, url)).start()
    assert second.wait() == 0, second.stderr
    trials = launched(url)
    assert len(trials) == 2
    assert trials[0].number == 0 and trials[0].user_attrs["outcome"] == "ok" and trials[0].values[0] > 0
    assert not pending.exists()
    events = (tmp_path / "studies" / f"{STUDY}-events.log").read_text()
    assert "recorded trial 0 (measured while the storage was away)" in events
