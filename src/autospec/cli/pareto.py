"""`autospec pareto`: the Pareto front of a study as a table, or JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from autospec.cli.common import add_study_args
from autospec.cli.render import compact_params, table
from autospec.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pareto", help="show the Pareto front of a study",
                       description="Print the study's Pareto front: feasible, measured configurations no other beats on every objective.")
    add_study_args(p, space=False)
    p.add_argument("--json", action="store_true", help="print the front as JSON")
    p.set_defaults(handler=run)


def open_existing(args: argparse.Namespace):
    import optuna

    from autospec.study.storage import open_storage, study_exists

    if not args.study:
        raise UsageError("--study NAME is required; list studies with: ls studies/")
    handle = open_storage(args.storage, args.study, Path(args.studies_dir)) if args.storage else None
    if handle is None:
        path = Path(args.studies_dir) / f"{args.study}.db"
        if not path.exists():
            raise UsageError(f"no study {args.study!r}: {path} does not exist; check --study, --studies-dir or pass --storage")
        handle = open_storage(None, args.study, Path(args.studies_dir))
    if not study_exists(handle, args.study):
        raise UsageError(f"no study named {args.study!r} in {handle.description}; check --study and --storage")
    return optuna.load_study(study_name=args.study, storage=handle.storage)


def run(args: argparse.Namespace) -> int:
    from autospec.report import counts, front, front_json

    study = open_existing(args)
    if args.json:
        print(json.dumps(front_json(study), indent=2, default=str))
        return 0
    names = study.metric_names or [f"objective_{i}" for i in range(len(study.directions))]
    rows = []
    for r in front(study):
        startup = r.user_attrs.get("startup") or {}
        rows.append([r.number, compact_params(r.params), *[f"{v:.1f}" for v in r.values],
                     startup.get("max_running_requests"), startup.get("max_total_num_tokens")])
    c = counts(study)
    print(f"study {study.study_name}: {c.complete} measured, {c.infeasible} infeasible, "
          f"{c.duplicate} duplicate, {c.failed} failed")
    if not rows:
        print("no feasible measured trial yet; run autospec optimize")
        return 0
    print(table(["trial", "configuration", *names, "max_running_requests", "max_total_num_tokens"], rows,
                align_right=[True, False, *[True] * len(names), True, True]))
    return 0
