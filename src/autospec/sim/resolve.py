"""`python -m autospec.sim.resolve ARGV...`: the simulator's argument resolver as a
preflight oracle, the counterpart of running SGLang's own resolver on a GPU host.

Prints one JSON line and exits 0: ``{"ok": true, "resolved": {...}, "sglang_version": V}``
or ``{"ok": false, "error": "<SGLang's message>", "sglang_version": V}``. Argument
syntax errors are argparse's (exit 2), as with the server itself.

``python -m autospec.sim.resolve --sim-print-version [--sim-profile P] [other --sim-* or
SGLang flags, ignored]`` prints ``{"sglang_version": V, "profile": NAME}`` and exits 0,
without needing ``--model-path``: the SGLang release the profile imitates, for the static
rules that must match it. An unreadable profile prints ``autospec.sim: error: ...`` and
exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from autospec.sim.args import parse_command_line
from autospec.sim.arguments import resolve_args
from autospec.sim.config import ArgumentRejected
from autospec.sim.profile import ProfileError, default_profile_path, load_profile

PRINT_VERSION = "--sim-print-version"


def _print_version(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="autospec.sim.resolve", add_help=False)
    parser.add_argument(PRINT_VERSION, action="store_true")
    parser.add_argument("--sim-profile", dest="profile")
    known, _ = parser.parse_known_args(argv)
    try:
        profile = load_profile(known.profile or default_profile_path())
    except ProfileError as exc:
        sys.stderr.write(f"autospec.sim: error: {exc}\n")
        return 2
    print(json.dumps({"sglang_version": profile.sglang_version, "profile": profile.name}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if PRINT_VERSION in args:
        return _print_version(args)
    cmd = parse_command_line(args)
    profile = load_profile(cmd.sim.profile_path or default_profile_path())
    try:
        cfg = resolve_args(profile, cmd.flags)
    except ArgumentRejected as exc:
        print(json.dumps({"ok": False, "error": str(exc), "sglang_version": profile.sglang_version}))
        return 0
    print(json.dumps({"ok": True, "resolved": cfg.as_dict(), "sglang_version": profile.sglang_version}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
