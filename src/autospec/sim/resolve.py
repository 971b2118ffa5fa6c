"""`python -m autospec.sim.resolve ARGV...`: the simulator's argument resolver as a
preflight oracle, the counterpart of running SGLang's own resolver on a GPU host.

Prints one JSON line and exits 0: ``{"ok": true, "resolved": {...}, "sglang_version": V}``
or ``{"ok": false, "error": "<SGLang's message>", "sglang_version": V}``. Argument
syntax errors are argparse's (exit 2), as with the server itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from autospec.sim.args import parse_command_line
from autospec.sim.model import ArgumentRejected, resolve_args
from autospec.sim.profile import default_profile_path, load_profile


def main(argv: Sequence[str] | None = None) -> int:
    cmd = parse_command_line(list(sys.argv[1:] if argv is None else argv))
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
