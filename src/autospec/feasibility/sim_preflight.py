"""Preflight against the simulator: its own argument resolver, run in a subprocess on
the exact argv, like `Preflight` runs SGLang's resolver on a GPU host."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Sequence

from autospec.feasibility.verdict import Verdict

__all__ = ["SimPreflight"]


class SimPreflight:
    """`command` is the simulator launch command (``PY -m autospec.sim --sim-...``)."""

    def __init__(self, command: Sequence[str], timeout_s: float = 60.0) -> None:
        command = list(command)
        if "autospec.sim" not in command:
            raise ValueError("SimPreflight needs a 'python -m autospec.sim ...' command")
        i = command.index("autospec.sim")
        self._base = command[:i] + ["autospec.sim.resolve"] + command[i + 1 :]
        self._timeout = timeout_s
        self._cache: dict[tuple[str, ...], dict[str, Any]] = {}

    def _run(self, argv: Sequence[str]) -> dict[str, Any]:
        key = tuple(argv)
        if key not in self._cache:
            proc = subprocess.run(self._base + list(argv), capture_output=True, text=True, timeout=self._timeout)
            lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                self._cache[key] = {"ok": False, "error": tail, "sglang_version": None}
            else:
                self._cache[key] = json.loads(lines[-1])
        return self._cache[key]

    def available(self) -> tuple[bool, str]:
        return True, ""

    def sglang_version(self) -> str:
        return self._run([]).get("sglang_version") or "0.5.23"

    def check(self, argv: Sequence[str]) -> Verdict:
        out = self._run(argv)
        if not out.get("ok"):
            reason = out.get("error") or "rejected by the simulator's argument checks (no message)"
            return Verdict(status="rejected", reason=reason, source="preflight", rule=None, resolved={})
        return Verdict(status="ok", reason="", source="preflight", rule=None, resolved=out.get("resolved", {}))
