"""`autospec` entry point: parse, dispatch to a subcommand, map errors to exit codes.

Exit codes: 0 success; 1 runtime failure; 2 bad usage or input; 130 interrupted.
Every error is printed as one line, ``autospec: error: <problem>; <fix>``.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from typing import Sequence

from autospec import __version__
from autospec.errors import AutospecError

# Subcommand modules; each exposes register(subparsers). Missing optional ones are skipped.
_SUBCOMMANDS = ("optimize", "pareto", "bench", "doctor", "export", "report", "dashboard", "import_")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse's own code)
        self.exit(2, f"autospec: error: {message}; see '{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="autospec",
        description="Find the fastest SGLang speculative-decoding settings for your model on your GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"autospec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in _SUBCOMMANDS:
        try:
            module = importlib.import_module(f"autospec.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"autospec.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def _signals_to_keyboard_interrupt() -> None:
    """SIGTERM and SIGHUP stop a study like Ctrl-C: the current server is torn down and
    the trial recorded. A second signal while tearing down is handled by the launcher."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _signals_to_keyboard_interrupt()
    try:
        return int(args.handler(args) or 0)
    except AutospecError as err:
        print(f"autospec: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("autospec: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
