"""`autospec` entry point: parse, dispatch to a subcommand, map errors to exit codes.

Exit codes: 0 success; 1 runtime failure; 2 bad usage or input; 130 interrupted.
Every error is printed as one line, ``autospec: error: <problem>; <fix>``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import NoReturn

from autospec import __version__
from autospec.cli.common import did_you_mean, resolve_study_name
from autospec.errors import AutospecError
from autospec.study.processes.stopping import StopSignals

# Subcommand modules; each exposes register(subparsers). Missing optional ones are skipped.
_SUBCOMMANDS = (
    "optimize",
    "worker",
    "pareto",
    "bench",
    "capacity",
    "doctor",
    "recover",
    "export",
    "report",
    "dashboard",
    "import_",
)


class _Parser(argparse.ArgumentParser):
    """One-line errors; no abbreviated options (``doctor --sim`` must not mean
    ``--sim-gpu-state-dir``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse's own code)
        self.exit(2, f"autospec: error: {_with_suggestion(message)}; see '{self.prog} --help'\n")


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _with_suggestion(message: str) -> str:
    """argparse's "invalid choice" message with the closest choice suggested."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match.group(2))
    hint = did_you_mean(match.group(1), choices)
    return message[: match.end(1) + 1] + hint + message[match.end(1) + 1 :] if hint else message


def _unknown_options(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" line, with the closest option of `parser`
    suggested for each unknown ``--option`` (Python 3.11's argparse suggests nothing)."""
    known = [o for action in parser._actions for o in action.option_strings if action.help != argparse.SUPPRESS]
    pairs = []
    for word in extras:
        option = word.split("=", 1)[0]
        close = difflib.get_close_matches(option, known, n=1, cutoff=0.6) if option.startswith("-") else []
        if close:
            pairs.append((option, close[0]))
    line = f"unrecognized arguments: {' '.join(extras)}"
    if len(pairs) == 1:
        return f"{line}; did you mean {pairs[0][1]}?"
    if pairs:
        return f"{line}; did you mean " + ", ".join(f"{right} for {wrong}" for wrong, right in pairs) + "?"
    return line


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
    parser.set_defaults(commands=sub.choices)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args`, with "did you mean" for unknown options (`_unknown_options`)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = args.commands.get(getattr(args, "command", None), parser)
        command.error(_unknown_options(command, extras))
    return args


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_handler(policy: StopSignals) -> Callable[[int, FrameType | None], None]:
    """The handler for Ctrl-C, SIGTERM and SIGHUP. While a study runs (`policy.active`),
    the study's policy applies (`autospec.study.processes.stopping.StopSignals`): the first signal
    stops the current trial cleanly, a second kills its server at once. Otherwise:
    KeyboardInterrupt."""

    def on_stop_signal(signum: int, frame: FrameType | None) -> None:
        if not policy.active:
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        if policy.count == 0:
            note = f"autospec: {name}: stopping after the current server is torn down; send it again to kill the server at once\n"
        else:
            note = f"autospec: {name} again: killing the server now\n"
        with contextlib.suppress(OSError):
            os.write(2, note.encode())  # not print(): the handler may run inside another write to stderr
        policy.handle(signum)

    return on_stop_signal


#: What `signal.signal` returns: the handler a signal had before.
_Handler = signal.Handlers | Callable[[int, FrameType | None], object] | int | None


def _install_stop_handlers(policy: StopSignals) -> dict[int, _Handler]:
    handler = stop_handler(policy)
    return {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # autospec reports progress itself
    args.stop_signals = StopSignals()  # the policy of this invocation's study run, if it starts one
    args.argv = list(argv if argv is not None else sys.argv[1:])  # slot workers re-run it (cli.workers)
    previous = _install_stop_handlers(args.stop_signals)
    try:
        resolve_study_name(args)
        return int(args.handler(args) or 0)
    except AutospecError as err:
        prefix = "autospec: " if err.exit_code == 130 else "autospec: error: "
        print(f"{prefix}{err}", file=sys.stderr)
        return err.exit_code
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        code, note = getattr(args, "on_interrupt", (130, "interrupted"))
        print(f"autospec: {note}", file=sys.stderr)
        return int(code)
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
