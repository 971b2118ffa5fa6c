"""Run SGLang's own argument resolver on server argvs; executed by the *server's* Python.

This file is a stand-alone script: it imports only the standard library and sglang,
never autospec, because it runs in whatever environment serves the model (another
virtual environment, a container). `autospec.feasibility.preflight.Preflight` runs it.

    python resolver_probe.py version
    python resolver_probe.py resolve ARG...        # one server argv
    python resolver_probe.py batch < ARGVS         # one JSON list of strings per line
    python resolver_probe.py version-batch < ARGVS # the version answer, then the batch's

Every answer is one line on stdout that starts with ``AUTOSPEC_PREFLIGHT `` followed by a
JSON object (SGLang's own log lines may surround it):

    version: {"ok": true, "sglang_version": "0.5.23", "accelerator": "none",
              "has_resolve_once": true}
             {"ok": false, "error": "ModuleNotFoundError: No module named 'sglang'"}
    resolve: {"ok": true, "resolved": {field: value, ...}, "sglang_version": ...,
              "device_assumed": "cuda" | null, "stages": ["parse", "resolve", "check"]}
             {"ok": false, "stage": "parse" | "resolve" | "check", "error_type": "ValueError",
              "error": "<SGLang's message>", "where": "speculative_hook.py:1278: raise ...",
              "sglang_version": ..., "device_assumed": ...}

What "resolve" does, mirroring a launch (checked against sglang 0.5.4, 0.5.16, 0.5.23):
1. parse the argv with SGLang's own CLI parser (``ServerArgs.add_cli_args``);
2. ``prepare_server_args(argv)``; ``.resolve_once()`` when the version has it (0.5.20+:
   construction no longer resolves); older versions resolve in ``__post_init__``;
3. ``.check_server_args()`` when present: the launcher calls it after resolution
   (0.5.23 ``entrypoints/engine.py``), and it holds the pipeline-parallelism checks;
4. ``.resolved_dict()`` when present (0.5.20+), else ``dataclasses.asdict``.

On a host without an accelerator sglang 0.5.23 cannot pick a device ("No accelerator
(CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available."), so when the argv has
no ``--device`` and torch sees no CUDA device, ``--device cuda`` is appended and reported
as ``device_assumed``. Environment variables are restored after each argv, so one batch
process answers like one process per argv.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import sys
import traceback
from typing import NoReturn

MARKER = "AUTOSPEC_PREFLIGHT "


class _ArgvRejected(Exception):
    """SGLang's CLI parser refused the argv (argparse would print usage and exit 2)."""


def _emit(payload: dict) -> None:
    sys.stdout.write(MARKER + json.dumps(payload, default=_jsonable, sort_keys=True) + "\n")
    sys.stdout.flush()


def _jsonable(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def _sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # pragma: no cover - sglang without metadata
        import sglang

        return getattr(sglang, "__version__", "unknown")


def _accelerator() -> str:
    """'none', or the first CUDA device's name and compute capability."""
    try:
        import torch

        if not torch.cuda.is_available():
            return "none"
        major, minor = torch.cuda.get_device_capability(0)
        return f"{torch.cuda.get_device_name(0)} (sm{major}{minor})"
    except Exception:
        return "none"


_PARSER: list[argparse.ArgumentParser] = []


def _strict_parser() -> argparse.ArgumentParser:
    """SGLang's CLI parser, raising instead of exiting (built once: parsing does not mutate it)."""
    if _PARSER:
        return _PARSER[0]
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve", add_help=False)
    ServerArgs.add_cli_args(parser)

    def refuse(message: str) -> NoReturn:
        raise _ArgvRejected(message)

    parser.error = refuse  # type: ignore[method-assign]
    _PARSER.append(parser)
    return parser


def _where(exc: BaseException) -> str:
    """'file.py:LINE: source line' of the frame that raised, for messageless asserts."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno}: {(last.line or '').strip()}"


def _resolve(argv: list[str], accelerator: str, version: str) -> dict:
    argv = list(argv)
    device_assumed = None
    has_device = any(a == "--device" or a.startswith("--device=") for a in argv)
    if not has_device and accelerator == "none":
        argv += ["--device", "cuda"]
        device_assumed = "cuda"
    base = {"sglang_version": version, "device_assumed": device_assumed}
    stage = "parse"
    saved_env = dict(os.environ)
    try:
        _strict_parser().parse_args(argv)
        from sglang.srt.server_args import prepare_server_args

        stage = "resolve"
        with contextlib.redirect_stdout(io.StringIO()):
            server_args = prepare_server_args(argv)
            if hasattr(server_args, "resolve_once"):
                server_args.resolve_once()
            stage = "check"
            if hasattr(server_args, "check_server_args"):
                server_args.check_server_args()
        if hasattr(server_args, "resolved_dict"):
            resolved = server_args.resolved_dict()
        else:
            resolved = dataclasses.asdict(server_args)
        return {**base, "ok": True, "resolved": resolved}
    except _ArgvRejected as exc:
        return {**base, "ok": False, "stage": "parse", "error_type": "ArgumentError", "error": str(exc), "where": ""}
    except SystemExit as exc:
        return {
            **base,
            "ok": False,
            "stage": stage,
            "error_type": "SystemExit",
            "error": f"exit status {exc.code}",
            "where": _where(exc),
        }
    except Exception as exc:
        return {
            **base,
            "ok": False,
            "stage": stage,
            "error_type": type(exc).__name__,
            "error": str(exc).strip(),
            "where": _where(exc),
        }
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def main(args: list[str]) -> int:
    if not args or args[0] not in ("version", "resolve", "batch", "version-batch"):
        sys.stderr.write(__doc__ or "")
        return 2
    try:
        import sglang.srt.server_args  # noqa: F401  (the import that must work)

        version = _sglang_version()
    except BaseException as exc:  # ImportError, or a C extension failing to load
        _emit({"ok": False, "error": f"{type(exc).__name__}: {exc}".strip()})
        return 0
    accelerator = _accelerator()
    if args[0] in ("version", "version-batch"):
        from sglang.srt.server_args import ServerArgs

        _emit(
            {
                "ok": True,
                "sglang_version": version,
                "accelerator": accelerator,
                "has_resolve_once": hasattr(ServerArgs, "resolve_once"),
            }
        )
    if args[0] == "version":
        return 0
    if args[0] == "resolve":
        _emit(_resolve(args[1:], accelerator, version))
    else:
        for line in sys.stdin:
            if line.strip():
                _emit(_resolve(json.loads(line), accelerator, version))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
