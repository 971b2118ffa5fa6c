"""Replay a `--sampler model` study against recorded launches, without a server (tests and
benchmarks/real_landscape.py).

Each launch the sampler asks for is answered with the trial record stored for that
configuration (a fixture of real launches, or records a test makes up), told to the
study as the study loop tells it (`TrialStore.tell`). The sampler sees exactly what it
sees in a study: the records' start-up facts, per-level summaries and objective values.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna

from autospec.config import SearchSpace, load_search_space
from autospec.model import hypervolume_ratio
from autospec.records import TrialRecord, TrialStore
from autospec.space import calibration_points, suggest, to_distribution_params
from autospec.study.proposing.samplers import ModelSampler

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def key(candidate: Mapping[str, Any]) -> str:
    return json.dumps({k: candidate[k] for k in sorted(candidate)})


def load_grid(name: str) -> tuple[SearchSpace, dict[str, TrialRecord]]:
    """A measured grid fixture: its search space and one trial record per configuration."""
    data = json.loads((FIXTURES / name).read_text())
    space = load_search_space(str(Path(__file__).resolve().parents[2] / data["space"]))
    records = {}
    for row in data["launches"]:
        record = TrialRecord.from_attrs(row["attrs"], row.get("values"), {})
        assert record is not None
        records[key(record.candidate)] = record
    return space, records


def replay(
    space: SearchSpace,
    records: Mapping[str, TrialRecord],
    launches: int,
    *,
    seed: int = 0,
    accepts: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] = lambda flags: {},
) -> list[dict[str, Any]]:
    """The candidates a model-driven study of `space` launches, in order (the space's
    calibration points first, as the study queues them), each answered with its record
    from `records` (a configuration without one fails at init)."""
    maximize = [o.direction == "maximize" for o in space.objectives]
    sampler = ModelSampler(space, dict, accepts, seed=seed)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize" if m else "minimize" for m in maximize], sampler=sampler)
    store = TrialStore(study, maximize, [])
    for point in calibration_points(space):  # as the study queues them, before the sampler's first choice
        study.enqueue_trial(to_distribution_params(point, space))
    launched: list[dict[str, Any]] = []
    for _ in range(launches):
        trial = study.ask()
        candidate = suggest(trial, space)
        record = records.get(key(candidate))
        if record is None:
            record = TrialRecord("kv_pool_too_small", candidate, reason="no such launch recorded", launched=True)
        store.tell(trial, record)
        launched.append(candidate)
    return launched


def launches_to_reach(
    found: Sequence[Sequence[float]], every: Sequence[Sequence[float]], maximize: Sequence[bool], share: float = 0.95
) -> int | None:
    """How many of `found`'s first launches reach `share` of `every`'s hypervolume (None: never)."""
    return next((k for k in range(1, len(found) + 1) if hypervolume_ratio(found[:k], every, maximize) >= share), None)


def random_reach_rate(every: Sequence[Sequence[float]], maximize: Sequence[bool], k: int, share: float = 0.95) -> float:
    """The share of all k-subsets of `every` (random search's k distinct launches, counted
    exactly) whose hypervolume reaches `share` of `every`'s."""
    subsets = list(itertools.combinations(range(len(every)), k))
    reached = sum(hypervolume_ratio([every[i] for i in s], every, maximize) >= share for s in subsets)
    return reached / len(subsets)


def check_model_beats_random(
    space: SearchSpace, records: Mapping[str, TrialRecord], within: int, share: float = 0.95
) -> tuple[int, float]:
    """Replay the model sampler against measured `records`: it reaches `share` of the grid's
    hypervolume within `within` launches, every launch of the way is a measured configuration,
    and a random subset of as many launches reaches it less often than not. Returns (launches,
    random rate)."""
    every = [r.values for r in records.values()]
    maximize = [o.direction == "maximize" for o in space.objectives]
    launched = replay(space, records, within)
    measured = [records[key(c)].values for c in itertools.takewhile(lambda c: key(c) in records, launched)]
    k = launches_to_reach(measured, every, maximize, share)
    assert k is not None, f"{within} launches reach {hypervolume_ratio(measured, every, maximize):.3f}: {launched}"
    assert len({key(c) for c in launched[:k]}) == k, launched
    rate = random_reach_rate(every, maximize, k, share)
    assert rate < 0.5, f"the model needs {k} launches; {rate:.0%} of random {k}-subsets of {len(every)} also reach {share}"
    return k, rate


def check_grid_reads_as_measured(space: SearchSpace, records: Mapping[str, TrialRecord], *, complete: bool = True) -> None:
    """What src makes of a measured grid fixture: the space's grid (`autospec.space.grid`)
    is exactly the measured configurations (holds them, where not `complete`), and the model reads each record
    (`observation_from_record`) with the start-up facts, accept lengths and objective
    values the record holds."""
    from autospec.model import observation_from_record
    from autospec.space import grid

    grid_keys = {key(c) for c in grid(space)}
    assert (grid_keys == set(records)) if complete else (set(records) <= grid_keys)
    for record in records.values():
        obs = observation_from_record(record, base_flags=space.server.flags)
        assert obs is not None and obs.started
        assert obs.max_running_requests == record.startup["max_running_requests"]
        assert obs.max_total_num_tokens == record.startup["max_total_num_tokens"]
        for c, level in record.bench.items():
            assert obs.value("accept_length", c) == level["accept_length"]
        for objective, value in zip(space.objectives, record.values or ()):
            assert obs.value(objective.metric, objective.concurrency) == value


def unpacked_storage(folder: Path, fixture: str) -> str:
    """The gzipped SQLite study `fixture` (under tests/fixtures) unpacked into `folder`, as a
    storage URL."""
    path = folder / "study.db"
    path.write_bytes(gzip.decompress((FIXTURES / fixture).read_bytes()))
    return f"sqlite:///{path}"


def pareto_json(study: str, storage: str) -> dict:
    """What `autospec pareto --json` prints for `study`."""
    from autospec.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["pareto", "--study", study, "--storage", storage, "--json"]) == 0
    return json.loads(out.getvalue())
