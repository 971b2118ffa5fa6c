"""Preflight against the simulator: its own argument resolver, run in a subprocess on
the exact argv, like `Preflight` runs SGLang's resolver on a GPU host. Implements
:class:`~autospec.feasibility.oracle.PreflightOracle`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any

from autospec.feasibility.preflight import PreflightError
from autospec.feasibility.verdict import Verdict
from autospec.sglang_facts import DEFAULT_SGLANG_VERSION

__all__ = ["ResolverAnswers", "SimPreflight"]

#: autospec.sim.resolve's flag that prints the profile's SGLang version (no model path needed)
PRINT_VERSION = "--sim-print-version"


class ResolverAnswers:
    """Verdicts from the simulator resolver's JSON answers (``{"ok", "error", "resolved",
    "sglang_version"}``, as ``autospec.sim.resolve`` prints them): each distinct argv is
    resolved once by `_resolve` and its answer cached."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, ...], dict[str, Any]] = {}

    def check(self, argv: Sequence[str]) -> Verdict:
        out = self._run(argv)
        if not out.get("ok"):
            reason = out.get("error") or "rejected by the simulator's argument checks (no message)"
            return Verdict(status="rejected", reason=reason, source="preflight", rule=None, resolved={})
        return Verdict(status="ok", reason="", source="preflight", rule=None, resolved=out.get("resolved", {}))

    def check_many(self, argvs: Sequence[Sequence[str]]) -> list[Verdict]:
        """One verdict per argv, in order (each distinct argv is resolved once)."""
        return [self.check(argv) for argv in argvs]

    def _run(self, argv: Sequence[str]) -> dict[str, Any]:
        key = tuple(argv)
        if key not in self._cache:
            self._cache[key] = self._resolve(list(argv))
        return self._cache[key]

    def _resolve(self, argv: list[str]) -> dict[str, Any]:
        raise NotImplementedError


class SimPreflight(ResolverAnswers):
    """`command` is the simulator launch command (``PY -m autospec.sim --sim-...``).

    Each distinct argv is resolved once (one subprocess) and its answer cached. A
    rejection by the simulator's argument parser (exit code != 0) is a "rejected"
    verdict; a resolver that cannot be started or does not answer in ``timeout_s``
    raises :class:`PreflightError`.
    """

    batch_saves_time = False  # one short subprocess per argv either way

    def __init__(self, command: Sequence[str], timeout_s: float = 60.0) -> None:
        command = list(command)
        if "autospec.sim" not in command:
            raise ValueError("SimPreflight needs a 'python -m autospec.sim ...' command")
        i = command.index("autospec.sim")
        self._base = command[:i] + ["autospec.sim.resolve"] + command[i + 1 :]
        self._timeout = timeout_s
        super().__init__()
        self._version: str | None = None

    def available(self) -> tuple[bool, str]:
        """(True, "") when the simulator's resolver answers (it is asked its version)."""
        try:
            self.sglang_version()
        except PreflightError as exc:
            return False, str(exc)
        return True, ""

    def sglang_version(self) -> str:
        """The SGLang version the simulator's profile imitates, so that the gate's static
        rules are that version's. Asked once (``autospec.sim.resolve --sim-print-version``,
        which needs no model path); :data:`DEFAULT_SGLANG_VERSION` only when the resolver
        answers without one. A resolver that cannot run raises :class:`PreflightError`."""
        if self._version is None:
            answer = self._resolve([PRINT_VERSION])
            if not answer.get("sglang_version") and answer.get("error"):
                raise PreflightError(f"the simulator could not say its SGLang version: {answer['error']}")
            self._version = str(answer.get("sglang_version") or DEFAULT_SGLANG_VERSION)
        return self._version

    def _resolve(self, argv: list[str]) -> dict[str, Any]:
        try:
            proc = subprocess.run(self._base + argv, capture_output=True, text=True, timeout=self._timeout)
        except subprocess.TimeoutExpired:
            raise PreflightError(
                f"the simulator's resolver did not answer within {self._timeout:g} s; raise the preflight timeout"
            ) from None
        except OSError as exc:
            raise PreflightError(f"the simulator's resolver could not start: {exc}") from None
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"ok": False, "error": tail, "sglang_version": None}
        answer: dict[str, Any] = json.loads(lines[-1])
        return answer
