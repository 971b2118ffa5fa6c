"""`autospec report`: write plots (PNG, HTML) and a Markdown/HTML report of a study."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from autospec.cli.common import add_study_command
from autospec.cli.pareto import add_baseline_arg, baseline_of, open_existing
from autospec.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "report",
        help="write plots and a Markdown/HTML report of a study",
        description="Write the Pareto-front plot, tok/s against concurrency for the front, the Pareto table, the "
        "recommendations, their launch commands and (for EAGLE/MTP topk=1 studies) an adaptive ladder "
        "into a folder: report.md, report.html, *.png, *.html, launch-*.sh, adaptive.json.",
    )
    add_baseline_arg(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into (created if missing)")
    p.add_argument("--host", default="127.0.0.1", help="host in the launch commands (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=30000, help="port in the launch commands (default 30000)")
    p.set_defaults(handler=run)


def _study_args(args: argparse.Namespace) -> str:
    words = ["--study", args.study]
    if args.storage:
        words += ["--storage", args.storage]
    elif args.studies_dir != "studies":
        words += ["--studies-dir", args.studies_dir]
    return " ".join(shlex.quote(w) for w in words)


def run(args: argparse.Namespace) -> int:
    from autospec.report import snapshot
    from autospec.report.document import write_report

    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"-o {args.output} is a file; name a folder for the report")
    study = open_existing(args)
    data = snapshot(study)
    if not data.measured:
        raise UsageError(
            f"study {data.name!r} has no measured configuration yet, so there is nothing to plot; "
            "run autospec optimize first (autospec pareto shows what it holds)"
        )
    baseline = baseline_of(data, args.baseline_trial)
    try:
        written = write_report(data, folder, baseline=baseline, study_args=_study_args(args), host=args.host, port=args.port)
    except OSError as exc:
        raise UsageError(f"cannot write the report into {folder}: {exc.strerror}; check the folder is writable") from None
    print(f"wrote {len(written.files)} files into {folder}:")
    for path in written.files:
        print(f"  {path}")
    return 0
