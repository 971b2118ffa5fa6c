"""`autospec import`: add earlier measurements to a study as completed trials.

    autospec import --study NAME --from results.jsonl [--set mem_fraction_static=0.85]
    autospec import --study NAME --from-study OLD [--from-storage URL]

The study is created (from --space, default "default") when it does not exist yet.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from autospec.cli.common import add_study_command, load_space, open_existing_study, parse_flag_overrides
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna

    from autospec.config import SearchSpace
    from autospec.study.storage import StorageHandle


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "import",
        help="add earlier measurements (bench_speculative.py JSONL, another study) to a study",
        description="Add prior measurements to a study as completed trials, so the sampler starts from what you "
        "already know: SGLang's scripts/playground/bench_speculative.py JSONL output (--from), or the "
        "trials of another autospec study with the same objectives (--from-study).",
        space=True,
        existing=False,  # it may create the study: the name is required
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--from", dest="from_file", metavar="FILE", help="bench_speculative.py --output JSONL file")
    source.add_argument("--from-study", metavar="NAME", help="another autospec study")
    p.add_argument("--from-storage", metavar="URL", help="storage of --from-study (default: <studies-dir>/<NAME>.db)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of a search-space parameter the file does not record, e.g. mem_fraction_static=0.85",
    )
    p.set_defaults(handler=run)


def _target(args: argparse.Namespace) -> tuple[StorageHandle, optuna.Study, SearchSpace]:
    import optuna

    from autospec.study.storage import SPACE_SOURCE_KEY, open_storage, open_study, study_exists

    handle = open_storage(args.storage, args.study, Path(args.studies_dir))
    spec = args.space
    if spec is None and study_exists(handle, args.study):
        existing = optuna.load_study(study_name=args.study, storage=handle.storage)
        spec = existing.user_attrs.get(SPACE_SOURCE_KEY)
        if spec is None or not Path(spec).exists():
            raise UsageError(f"study {args.study!r} does not say which search-space file it was made from; pass --space")
    space = load_space(spec)
    study = open_study(handle, args.study, space, optuna.samplers.RandomSampler())
    return handle, study, space


def _source_study(args: argparse.Namespace) -> tuple[StorageHandle, optuna.Study]:
    return open_existing_study(
        args.from_study, args.from_storage, Path(args.studies_dir), name_flag="--from-study", storage_flag="--from-storage"
    )


def run(args: argparse.Namespace) -> int:
    import optuna

    from autospec.records import TrialStore
    from autospec.report.importing import plan_from_bench_speculative, plan_from_study, read_bench_speculative, trials_to_add

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.from_storage and not args.from_study:
        raise UsageError("--from-storage goes with --from-study NAME")
    fixed = parse_flag_overrides(args.set)
    if args.from_file:
        path = Path(args.from_file)
        if not path.is_file():
            raise UsageError(f"--from {args.from_file}: no such file; pass the --output file of bench_speculative.py")
        records = read_bench_speculative(path.read_text().splitlines(), path.name)
        handle, study, space = _target(args)
        plan = plan_from_bench_speculative(records, space, path.name, fixed)
        source = str(path)
    else:
        if args.set:
            raise UsageError("--set applies to --from FILE only; trials of a study carry their own parameters")
        source_handle, source_study = _source_study(args)
        handle, study, space = _target(args)
        if source_study.study_name == study.study_name and source_handle.description == handle.description:
            raise UsageError("--from-study names the study being imported into; pick another study")
        plan = plan_from_study(source_study, space, source_handle.description)
        source = f"study {source_study.study_name} ({source_handle.description})"
    store = TrialStore(study, [o.direction == "maximize" for o in space.objectives], [c.name for c in space.constraints])
    ready, skipped = trials_to_add(plan, space, store.imported_keys())
    added = [store.add_measured(t.params, t.distributions, t.record, t.markers) for t in ready]
    print(
        f"imported {len(added)} trial(s) from {source} into study {study.study_name} ({handle.description})"
        + (f": numbers {', '.join(map(str, added))}" if added else "")
    )
    for line in skipped:
        print(f"  skipped {line}")
    return 0
