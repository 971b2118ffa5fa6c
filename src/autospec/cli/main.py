"""`autospec` entry point: parse, dispatch to a subcommand, map errors to exit codes.

Exit codes: 0 success; 1 runtime failure; 2 bad usage or input; 130 interrupted.
Every error is printed as one line, ``autospec: error: <problem>; <fix>``.
"""

from __future__ import annotations

import argparse
import importlib
import os
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


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_stop_signal(signum: int, frame: object) -> None:
    """Ctrl-C, SIGTERM and SIGHUP. While a study runs, the study's policy applies
    (`autospec.study.signals.StopSignals`): the first stops the current trial cleanly, a
    second kills its server at once. Otherwise: KeyboardInterrupt."""
    policy = getattr(sys.modules.get("autospec.study.signals"), "STOP_SIGNALS", None)
    if policy is None:
        raise KeyboardInterrupt
    name = signal.Signals(signum).name
    if policy.count == 0:
        note = f"autospec: {name}: stopping after the current server is torn down; send it again to kill the server at once\n"
    else:
        note = f"autospec: {name} again: killing the server now\n"
    try:
        os.write(2, note.encode())  # not print(): the handler may run inside another write to stderr
    except OSError:
        pass
    policy.handle(signum)


def _install_stop_handlers() -> dict[int, object]:
    previous = {}
    for sig in _STOP_SIGNALS:
        previous[sig] = signal.signal(sig, _on_stop_signal)
    return previous


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # autospec reports progress itself
    previous = _install_stop_handlers()
    try:
        return int(args.handler(args) or 0)
    except AutospecError as err:
        prefix = "autospec: " if err.exit_code == 130 else "autospec: error: "
        print(f"{prefix}{err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("autospec: interrupted; run the same command again to continue", file=sys.stderr)
        return 130
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
