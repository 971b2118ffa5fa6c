"""Print the launch command of one Pareto-front trial of a study, ready to run by hand.

    python3 export_best.py --storage sqlite:///S.db --study NAME [--trial N] [--port P]

Without ``--trial`` the front's first row is taken (the best on the first objective,
the order ``autospec pareto`` prints). The command is the trial's ``server_args`` user
attribute (the argv the launcher started, secrets already redacted) with ``--port``
replaced by ``--port P`` (default 30000); ``--host`` stays 127.0.0.1. Printed as one
shell-quoted line on stdout; the trial number and its objective values go to stderr.
Exit code 1 when the study has no feasible measured trial (or the trial has no argv).
"""

from __future__ import annotations

import argparse
import shlex
import sys


def with_port(argv: list[str], port: int) -> list[str]:
    """argv with every ``--port X`` / ``--port=X`` replaced by one ``--port port`` at the end."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == "--port":
            skip = True
            continue
        if word.startswith("--port="):
            continue
        out.append(word)
    return out + ["--port", str(port)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True, help="Optuna storage URL of the study")
    parser.add_argument("--study", required=True, help="study name")
    parser.add_argument("--trial", type=int, help="trial number (default: the front's first row)")
    parser.add_argument("--port", type=int, default=30000, help="port for the exported server (default 30000)")
    args = parser.parse_args(argv)

    import optuna

    from autospec.report import snapshot

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=args.study, storage=args.storage)
    rows = snapshot(study).front
    if args.trial is not None:
        rows = [r for r in rows if r.number == args.trial]
    if not rows:
        what = f"trial {args.trial} is not on the front" if args.trial is not None else "no feasible measured trial"
        print(f"export_best: {what} in study {args.study!r}; run autospec optimize first or pick a front trial", file=sys.stderr)
        return 1
    row = rows[0]
    server_args = row.server_args
    if not server_args:
        print(f"export_best: trial {row.number} has no server_args attribute; it was not launched by autospec", file=sys.stderr)
        return 1
    names = study.metric_names or [f"objective_{i}" for i in range(len(row.values))]
    values = ", ".join(f"{n}={v:.1f}" for n, v in zip(names, row.values))
    print(f"trial {row.number}: {row.flags}; {values}", file=sys.stderr)
    print(shlex.join(with_port(list(server_args), args.port)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
