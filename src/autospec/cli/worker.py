"""`autospec worker`: join a study that `autospec optimize` started, from this host.

The study holds the options and search-space text of the run that created it
(`autospec.cli.workers.study_options`); the worker runs exactly that optimize command
with this host's options (GPUs, timeouts, server command) until the study holds its
``--trials`` launched trials. The claims in the storage keep the count exact and no
configuration is launched twice (`autospec.study.claims`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import optuna

from autospec.cli.common import add_timeout_option, refuse_missing_storage_file, studies_dir_arg
from autospec.cli.optimize import add_slot_arguments
from autospec.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker",
        help="join a running study from this host (several hosts, one PostgreSQL storage)",
        description=(
            "Run trials of a study that `autospec optimize` created, on this host's GPUs, until the study holds "
            "its --trials launched trials. The search space and options come from the study; see "
            "docs/distributed.md."
        ),
    )
    study = p.add_argument_group("study")
    study.add_argument("--study", required=True, metavar="NAME", help="name of the study to join")
    study.add_argument(
        "--storage",
        required=True,
        metavar="URL|FILE",
        help="the study's storage, e.g. postgresql://USER@HOST/DB (or a journal file on a shared host)",
    )
    study.add_argument(
        "--studies-dir",
        default="studies",
        type=studies_dir_arg,
        metavar="DIR",
        help="folder for this host's server logs and artifacts (default studies)",
    )
    budget = p.add_argument_group("budget")
    budget.add_argument("--trials", type=int, help="launched trials the study should hold (default: the study's own)")
    add_timeout_option(budget, "stop starting new trials after this wall time, e.g. 8h (default: no limit)")
    server = p.add_argument_group("server")
    server.add_argument("--server-command", help="how to start the server on this host (default: the study's)")
    server.add_argument("--ready-timeout", type=float, help="seconds a server may take to become ready")
    server.add_argument(
        "--storage-patience",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for a storage that stops answering (default 120)",
    )
    server.add_argument("--allow-foreign-gpu-memory", action="store_true", help="start even if other processes hold GPU memory")
    add_slot_arguments(p.add_argument_group("GPUs"))
    p.add_argument_group("output").add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(handler=run, on_interrupt=(130, "interrupted; run the same command again to continue"))


def run(args: argparse.Namespace) -> int:
    from autospec.cli import optimize
    from autospec.cli.main import build_parser
    from autospec.cli.workers import HOST_OPTIONS
    from autospec.records import WORKER_OPTIONS_KEY
    from autospec.study.storage import open_storage, study_exists

    studies_dir = Path(args.studies_dir)
    refuse_missing_storage_file(args.storage, args.study, studies_dir)
    handle = open_storage(args.storage, args.study, studies_dir)
    if not study_exists(handle, args.study):
        raise UsageError(
            f"no study named {args.study!r} in {handle.description}; start it with autospec optimize "
            f"--storage {handle.locator} --study {args.study} first"
        )
    stored = optuna.load_study(study_name=args.study, storage=handle.storage).user_attrs.get(WORKER_OPTIONS_KEY)
    if not isinstance(stored, dict) or not stored.get("space_toml"):
        raise UsageError(
            f"study {args.study!r} does not hold the options a worker needs (made by an older autospec "
            "or imported); run the same autospec optimize command with --storage on this host instead"
        )
    studies_dir.mkdir(parents=True, exist_ok=True)
    space_path = studies_dir / f"{args.study}.space.toml"
    space_path.write_text(stored["space_toml"])
    words = [
        "optimize",
        "--space",
        str(space_path),
        "--study",
        args.study,
        "--storage",
        args.storage,
        "--studies-dir",
        args.studies_dir,
    ]
    ns = build_parser().parse_args(words)
    for key, value in stored.get("options", {}).items():
        if key not in HOST_OPTIONS and hasattr(ns, key):
            setattr(ns, key, value)
    for key in HOST_OPTIONS:  # this host's own, where given
        value = getattr(args, key, None)
        if value is not None:
            setattr(ns, key, value)
    if args.trials is not None:
        ns.trials = args.trials
    ns.stop_signals = args.stop_signals
    return optimize.run(ns)
