"""The model on a real landscape: every configuration of a grid measured with real SGLang 0.5.16
on a GPU. Three grids (`--grid`):

- `tiny` (default): `real-tiny-ngram-breadth` on the tiny target, CPU-bound at C=32
  (tests/fixtures/real_ngram_grid.json; docs/validation/2026-12-01-h200-model-on-real-sglang.md, "The model on real SGLang");
- `8b`: `real-8b-ngram` on the 8B-shaped target, GPU-bound, temperature 1 and top_k 4
  (tests/fixtures/real_8b_ngram_grid.json; docs/validation/2026-12-02-h200-8b-grid.md, "The 8B-shaped target");
- `standalone`: `real-8b-standalone`, the trained pair (STANDALONE, greedy) on two H100s, 25 of 30
  configurations so far (tests/fixtures/real_8b_standalone_grid.json; docs/validation/2026-12-06-h100-grid-continued.md).

    # once, from the study the H200 run left (tools/gpu/run_study.sh's study-state.tar.xz):
    .venv/bin/python benchmarks/real_landscape.py --write-fixture path/to/study-state.tar.xz --study ngram-model
    .venv/bin/python benchmarks/real_landscape.py --grid 8b --write-fixture path/to/study-state.tar.xz \
        --study real-8b-ngram --model-launches 10
    # then, without a GPU:
    .venv/bin/python benchmarks/real_landscape.py [--grid 8b]
    # a separate study of the grid's space (issue 38's default 12-launch study), valued by the grid:
    .venv/bin/python benchmarks/real_landscape.py --grid standalone --real-study path/to/study-state.tar.xz NAME

Prints the hypervolume ratio, against every configuration measured, of

- the real study's own first launches (the model chose them on the GPU; none for a grid measured in random order),
- a replay of `--sampler model` against the fixture (tests/model/replay.py: each launch
  is answered with the recorded trial of that configuration), and
- random search among the configurations (the median and the 10th percentile over 20,000
  random orders),

after 2 to 12 launches. HV ratio as in benchmarks/efficiency.py: both objectives
normalised between the worst and the best configuration measured.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import itertools
import json
import random
import statistics
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "model"))

from replay import FIXTURES, key, load_grid, replay  # noqa: E402

from autospec.config import SearchSpace  # noqa: E402
from autospec.model import hypervolume_ratio  # noqa: E402

#: grid -> (fixture, search space, the study that measured it)
GRIDS = {
    "tiny": ("real_ngram_grid.json", "src/autospec/search_spaces/real-tiny-ngram-breadth.toml", "ngram-model"),
    "8b": ("real_8b_ngram_grid.json", "src/autospec/search_spaces/real-8b-ngram.toml", "real-8b-ngram"),
    "standalone": (
        "real_8b_standalone_grid.json",
        "src/autospec/search_spaces/real-8b-standalone.toml",
        "real-8b-standalone-grid",
    ),
}


@contextlib.contextmanager
def opened_study(source: Path, study: str) -> Iterator[list[Any]]:
    """The stored trials (`autospec.records.read_trials`) of `study` in `source`, a SQLite
    file (gzipped too, as the fixtures are) or a study-state.tar.xz holding one."""
    import optuna

    from autospec.records import read_trials

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        db = source
        if source.name.endswith(".tar.xz"):
            with tarfile.open(source) as tar:
                tar.extractall(tmp, filter="data")
            db = next(Path(tmp).rglob(f"{study}.db"), Path(tmp) / f"{study}.db")
        elif source.name.endswith(".gz") and source.is_file():
            db = Path(tmp) / "study.db"
            db.write_bytes(gzip.decompress(source.read_bytes()))
        if not db.is_file():
            raise SystemExit(f"real_landscape: no {db.name} in {source}; name the study that file holds")
        try:
            loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{db}")
        except KeyError:
            raise SystemExit(f"real_landscape: {source} holds no study {study!r}; give its name") from None
        yield read_trials(loaded)


def grid_values_of(source: Path, study: str, records: Mapping[str, Any]) -> list[list[float]]:
    """The configurations another study of the grid's space launched (the default study
    run on the GPU), in launch order, each valued by the grid's own launch of it, so that
    machines and launches do not enter the comparison; configurations off the grid (no
    speculation) are left out."""
    out, seen = [], set()
    with opened_study(source, study) as trials:
        for t in trials:
            k = key(t.record.candidate) if t.launched and t.record is not None else ""
            if k in records and k not in seen:
                seen.add(k)
                out.append(records[k].values)
    return out


def write_fixture(source: Path, study: str, model_launches: int, fixture: str, space: str) -> Path:
    """The launched, measured trials of `study` (a SQLite file, or a study-state.tar.xz
    holding one) as the fixture: the first launch of each configuration, in launch order,
    with its whole trial record; the first `model_launches` were the model's choice, the
    rest filled the grid."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    with opened_study(source, study) as trials:
        for t in trials:
            if not t.has_measurement or t.record is None or t.markers.reference is not None or key(t.record.candidate) in seen:
                continue
            seen.add(key(t.record.candidate))
            attrs = t.record.to_attrs()
            attrs.pop("log_path", None)
            rows.append(
                {
                    "number": t.number,
                    "sampler": "model" if len(rows) < model_launches else "grid fill",
                    "predicted": t.markers.predicted,
                    "values": t.record.values,
                    "attrs": attrs,
                }
            )
    out = FIXTURES / fixture
    out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"space": space, "study": study, "source": str(source)})[:-1]
    out.write_text(head + ', "launches": [\n' + ",\n".join(json.dumps(r) for r in rows) + "\n]}\n")  # a launch per line
    return out


#: the short names a candidate's flags are printed under
SHORT = {
    "speculative_num_steps": "steps",
    "speculative_eagle_topk": "topk",
    "speculative_num_draft_tokens": "draft",
    "speculative_ngram_max_bfs_breadth": "breadth",
}


def label(candidate: Mapping[str, Any]) -> str:
    """`steps  3, topk  1, draft  4` (the flags of `SHORT` the candidate sets)."""
    return ", ".join(f"{short} {candidate[name]:>2}" for name, short in SHORT.items() if name in candidate)


def random_ratios(values: list[list[float]], k: int, orders: int = 20_000) -> list[float]:
    rng = random.Random(0)
    return sorted(hypervolume_ratio(rng.sample(values, k), values, [True, True]) for _ in range(orders))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), default="tiny", help="which measured grid (default tiny)")
    ap.add_argument("--write-fixture", type=Path, help="a study's SQLite file or study-state.tar.xz")
    ap.add_argument("--study", help="the study's name (default: the grid's)")
    ap.add_argument("--model-launches", type=int, default=8, help="how many of the study's first launches the model chose")
    ap.add_argument(
        "--real-study",
        nargs=2,
        metavar=("SOURCE", "NAME"),
        help="another study of the grid's space (SQLite file or study-state.tar.xz, and its name): its launches, "
        "valued by the grid, are the real study's column",
    )
    args = ap.parse_args()
    fixture, space_file, study = GRIDS[args.grid]
    if args.write_fixture:
        print(f"wrote {write_fixture(args.write_fixture, args.study or study, args.model_launches, fixture, space_file)}")
    space, records = load_grid(fixture)
    data = json.loads((FIXTURES / fixture).read_text())
    every = [r.values for r in records.values()]
    maximize = [o.direction == "maximize" for o in space.objectives]
    print(f"{len(records)} configurations measured (study {data['study']})")
    for row in data["launches"]:
        c = row["attrs"]["candidate"]
        print(
            f"  trial {row['number']:>2} ({row['sampler']}): {label(c)}: {row['values'][0]:,.0f} tok/s at C=1, "
            f"{row['values'][1]:,.0f} tok/s at C=32"
        )
    real = [row["values"] for row in data["launches"] if row["sampler"] == "model"]
    if args.real_study:
        real = grid_values_of(Path(args.real_study[0]), args.real_study[1], records)
    # a grid still being measured: the replay stops where the model asks for a configuration not in it
    asked = replay(space, records, len(records))
    replayed = [records[key(c)].values for c in itertools.takewhile(lambda c: key(c) in records, asked)]
    print()
    print("| launches | the real study (model) | replay (model) | random: median | random: 10th percentile |")
    print("|---|---|---|---|---|")
    for k in range(2, len(records) + 1):
        rand = random_ratios(every, k)
        real_k = f"{hypervolume_ratio(real[:k], every, maximize):.3f}" if k <= len(real) else "-"
        replay_k = f"{hypervolume_ratio(replayed[:k], every, maximize):.3f}" if k <= len(replayed) else "-"
        print(f"| {k} | {real_k} | {replay_k} | {statistics.median(rand):.3f} | {rand[len(rand) // 10]:.3f} |")
    print()
    predictions(space, data)
    return 0


def predictions(space: SearchSpace, data: dict[str, Any], fitted: int = 4) -> None:
    """The model fitted on the study's first `fitted` launches, against every other
    configuration's measurement (real data it was not fitted to)."""
    from autospec.model import SpecModel, Target, observation_from_record
    from autospec.records import TrialRecord

    rows = data["launches"]
    records = [record for r in rows if (record := TrialRecord.from_attrs(r["attrs"], r["values"], {})) is not None]
    observations = [observation_from_record(r, base_flags=space.server.flags) for r in records[:fitted]]
    targets = [Target(o.metric, o.concurrency) for o in space.objectives]
    model = SpecModel.fit([o for o in observations if o is not None], targets, base_flags=space.server.flags)
    rest = records[fitted:]
    pred = model.predict([{**space.server.flags, **r.candidate} for r in rest])
    low, high = pred.interval(0.1, 0.9)
    print(f"fitted on the first {fitted} launches, predicting the other {len(rest)} (10-90% range):")
    print("| configuration | C=1 measured | C=1 predicted | error | C=32 measured | C=32 predicted | error |")
    print("|---|---|---|---|---|---|---|")
    errors: list[list[float]] = [[], []]
    for j, r in enumerate(rest):
        cells = []
        for i in range(len(targets)):
            assert r.values is not None
            errors[i].append(pred.point[j, i] / r.values[i] - 1.0)
            cells += [
                f"{r.values[i]:,.0f}",
                f"{pred.point[j, i]:,.0f} ({low[j, i]:,.0f}-{high[j, i]:,.0f})",
                f"{errors[i][-1]:+.0%}",
            ]
        print(f"| {label(r.candidate)} | " + " | ".join(cells) + " |")
    for i, t in enumerate(targets):
        print(
            f"{t.name}: median absolute error {statistics.median(abs(e) for e in errors[i]):.1%}, "
            f"worst {max(abs(e) for e in errors[i]):.1%}"
        )


if __name__ == "__main__":
    sys.exit(main())
