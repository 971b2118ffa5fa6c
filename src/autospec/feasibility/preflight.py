"""Preflight: SGLang's own argument resolver, run on the exact server argv before a launch.

Contract (that of :class:`~autospec.feasibility.oracle.PreflightOracle`, plus):

- :class:`Preflight` runs ``resolver_probe.py`` with the *server's* Python (``python``, a
  command prefix such as ``("/venv/bin/python",)`` or ``("docker", "exec", "box",
  "python")``); the probe's source is passed with ``-c``, so nothing needs to be installed
  there but sglang. It never needs a GPU (sglang 0.5.23 resolves on a CPU-only host).
- :meth:`Preflight.available` asks once whether sglang imports there; ``(False, reason)``
  with a one-line reason otherwise. :meth:`check` / :meth:`check_many` then raise
  :class:`PreflightError` (callers fall back to the static rules and say so once).
- :meth:`check` answers a :class:`~autospec.feasibility.verdict.Verdict` with
  ``source="preflight"``: "ok" with the resolved values, or "rejected" with SGLang's own
  message as the reason. A rejection whose message is about the hardware (SM90+, CUDA
  only, no accelerator) is ``hardware_dependent`` and says so in its reason: it is only
  final when the resolver ran on the GPU host. Answers are cached per (interpreter, sglang
  version, argv) in memory and, with ``cache_dir``, as one JSON file per argv.
- ``--host``/``--port`` words are dropped from the argv first: they do not change what
  SGLang resolves, and keeping them would defeat the cache.
- :class:`PreflightError` means the resolver could not be run (interpreter missing, sglang
  not importable, timeout, crash); it is never a verdict about the configuration.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autospec.errors import RuntimeFailure
from autospec.feasibility import resolver_probe
from autospec.feasibility.verdict import Verdict
from autospec.sglang_facts import ALGORITHM, DRAFT_TOKENS, STEPS, TOPK

__all__ = ["Preflight", "PreflightError", "HARDWARE_MARKERS", "RESOLVED_KEYS"]

# Substrings of SGLang resolver errors that depend on the GPU, not on the arguments
# (sglang 0.5.23: "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100),
# or SM120 GPUs"; 0.5.4-0.5.13: "Ngram speculative decoding only supports CUDA device.";
# utils/common.py: "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) ...").
HARDWARE_MARKERS = (
    "Hopper",
    "Blackwell",
    "SM90",
    "SM100",
    "SM120",
    "only supports CUDA",
    "only supports CUDA device",
    "No accelerator",
    "requires CUDA",
)

# Resolved fields a verdict always carries (besides the ones named in the argv).
RESOLVED_KEYS = (
    ALGORITHM,
    STEPS,
    TOPK,
    DRAFT_TOKENS,
    "attention_backend",
    "decode_attention_backend",
    "prefill_attention_backend",
    "page_size",
    "max_running_requests",
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_dp_size",
    "enable_dp_attention",
    "disable_overlap_schedule",
)

_STAGE_RULE = {"parse": "sglang_cli_parser", "resolve": "sglang_resolver", "check": "sglang_check_server_args"}
_PROBE_SOURCE = Path(resolver_probe.__file__).read_text(encoding="utf-8")


class PreflightError(RuntimeFailure):
    """SGLang's resolver could not be run; use the static rules instead."""


class Preflight:
    """SGLang's own resolver as a feasibility oracle (see the module docstring)."""

    batch_saves_time = True  # importing sglang takes 20-30 s; a batch pays it once

    def __init__(
        self,
        python: Sequence[str] = (sys.executable,),
        *,
        timeout_s: float = 120,
        cache_dir: Path | None = None,
        per_argv_s: float = 10.0,
    ) -> None:
        if isinstance(python, str):
            python = (python,)
        if not python:
            raise ValueError("Preflight needs the server's Python command, e.g. ('/venv/bin/python',)")
        self.python: tuple[str, ...] = tuple(str(p) for p in python)
        self.timeout_s = float(timeout_s)
        self.per_argv_s = float(per_argv_s)  # extra time a batch gets per argv
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._availability: tuple[bool, str] | None = None
        self._version_info: dict[str, Any] = {}
        self._memory: dict[str, dict[str, Any]] = {}

    # --- availability ------------------------------------------------------------------

    def available(self) -> tuple[bool, str]:
        """(True, "") when sglang imports in that interpreter; else (False, one-line reason)."""
        if self._availability is None:
            try:
                answers = self._run(["version"], stdin=None, timeout_s=self.timeout_s)
            except PreflightError as exc:
                self._availability = (False, str(exc))
            else:
                self._learn_version(answers[0] if answers else None)
        assert self._availability is not None
        return self._availability

    def _learn_version(self, info: Mapping[str, Any] | None) -> None:
        info = info or {"ok": False, "error": "the probe printed nothing"}
        if info.get("ok"):
            self._version_info = dict(info)
            self._availability = (True, "")
        else:
            who = " ".join(self.python)
            self._availability = (False, f"sglang is not importable by {who}: {info.get('error')}")

    def warm(self, argvs: Sequence[Sequence[str]]) -> tuple[bool, str]:
        """Learn whether sglang imports there and resolve `argvs`, in ONE interpreter start
        (importing sglang takes 20-30 s, so a study's up-front checks cost one import, not
        one for the availability check and one for the batch). Returns `available()`;
        answers already cached are not asked again."""
        if self._availability is not None:
            if self._availability[0]:
                self.check_many(argvs)
            return self._availability
        cleaned = [_drop_host_port(argv) for argv in argvs]
        stdin = "".join(json.dumps(argv) + "\n" for argv in cleaned)
        try:
            answers = self._run(
                ["version-batch"], stdin=stdin, timeout_s=self.timeout_s + self.per_argv_s * len(cleaned), allow_short=True
            )
        except PreflightError as exc:
            self._availability = (False, str(exc))
            return self._availability
        self._learn_version(answers[0] if answers else None)
        if self._availability and self._availability[0]:
            for argv, answer in zip(cleaned, answers[1:]):
                self._store(self._key(argv), argv, answer)
        return self.available()

    def sglang_version(self) -> str | None:
        """The sglang version in that interpreter, or None when it is not available."""
        ok, _ = self.available()
        return self._version_info.get("sglang_version") if ok else None

    def accelerator(self) -> str | None:
        """What the probe saw: "none" or "<GPU name> (smXY)"; None when unavailable."""
        ok, _ = self.available()
        return self._version_info.get("accelerator") if ok else None

    # --- checks ------------------------------------------------------------------------

    def check(self, argv: Sequence[str]) -> Verdict:
        """SGLang's verdict on one server argv (flags only; the command is not part of it)."""
        return self.check_many([argv])[0]

    def check_many(self, argvs: Sequence[Sequence[str]]) -> list[Verdict]:
        """Verdicts for several argvs; the uncached ones are resolved in one subprocess."""
        ok, reason = self.available()
        if not ok:
            raise PreflightError(f"preflight is not available: {reason}")
        cleaned = [_drop_host_port(argv) for argv in argvs]
        keys = [self._key(argv) for argv in cleaned]
        todo: dict[str, list[str]] = {}
        for key, argv in zip(keys, cleaned):
            if key not in todo and self._cached(key) is None:
                todo[key] = argv
        if todo:
            self._resolve_batch(todo)
        return [_to_verdict(self._cached(key), argv) for key, argv in zip(keys, cleaned)]

    # --- internals ---------------------------------------------------------------------

    def _key(self, argv: Sequence[str]) -> str:
        text = json.dumps([list(self.python), self.sglang_version(), list(argv)])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _cached(self, key: str) -> dict[str, Any] | None:
        if key in self._memory:
            return self._memory[key]
        if self.cache_dir is not None:
            path = self.cache_dir / f"preflight-{key}.json"
            try:
                answer = json.loads(path.read_text(encoding="utf-8"))["answer"]
            except (OSError, ValueError, KeyError, TypeError):
                return None
            self._memory[key] = answer
            return answer
        return None

    def _store(self, key: str, argv: Sequence[str], answer: dict[str, Any]) -> None:
        self._memory[key] = answer
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        entry = {"python": list(self.python), "sglang_version": self.sglang_version(), "argv": list(argv), "answer": answer}
        fd, tmp = tempfile.mkstemp(dir=self.cache_dir, prefix=".preflight-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, sort_keys=True)
        os.replace(tmp, self.cache_dir / f"preflight-{key}.json")

    def _resolve_batch(self, todo: Mapping[str, list[str]]) -> None:
        items = list(todo.items())
        stdin = "".join(json.dumps(argv) + "\n" for _, argv in items)
        answers = self._run(["batch"], stdin=stdin, timeout_s=self.timeout_s + self.per_argv_s * len(items), allow_short=True)
        for (key, argv), answer in zip(items, answers):
            self._store(key, argv, answer)
        # A crash on one argv ends the batch: resolve the rest one at a time.
        for key, argv in items[len(answers) :]:
            single = self._run(["resolve", *argv], stdin=None, timeout_s=self.timeout_s, allow_short=True)
            if not single:
                raise PreflightError(f"SGLang's resolver died without an answer on: {' '.join(argv)[:200]}")
            self._store(key, argv, single[0])

    def _run(self, args: list[str], *, stdin: str | None, timeout_s: float, allow_short: bool = False) -> list[dict[str, Any]]:
        command = [*self.python, "-c", _PROBE_SOURCE, *args]
        try:
            proc = subprocess.run(
                command,
                input=stdin if stdin is not None else "",
                capture_output=True,
                text=True,
                timeout=timeout_s,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise PreflightError(f"{self.python[0]} was not found; give Preflight the server's Python") from None
        except subprocess.TimeoutExpired:
            raise PreflightError(
                f"SGLang's resolver did not answer within {timeout_s:.0f} s; raise the preflight timeout"
            ) from None
        answers = [
            json.loads(line[len(resolver_probe.MARKER) :])
            for line in proc.stdout.splitlines()
            if line.startswith(resolver_probe.MARKER)
        ]
        if not answers and not allow_short:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise PreflightError(f"SGLang's resolver exited {proc.returncode} without an answer: {tail[:300]}")
        return answers


def _drop_host_port(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word in ("--host", "--port"):
            skip = True
            continue
        if word.startswith(("--host=", "--port=")):
            continue
        out.append(str(word))
    return out


def _named_fields(argv: Sequence[str]) -> list[str]:
    return [w[2:].split("=", 1)[0].replace("-", "_") for w in argv if w.startswith("--")]


def _is_hardware(message: str) -> bool:
    return any(marker in message for marker in HARDWARE_MARKERS)


def _to_verdict(answer: dict[str, Any] | None, argv: Sequence[str]) -> Verdict:
    """A probe answer -> Verdict (pure)."""
    if answer is None:  # pragma: no cover - _resolve_batch stores every key or raises
        raise PreflightError("no preflight answer was stored")
    assumed = answer.get("device_assumed")
    where_note = f"resolved on a host without a GPU, --device {assumed} assumed" if assumed else ""
    if answer.get("ok"):
        full = answer.get("resolved") or {}
        keys = list(RESOLVED_KEYS) + [k for k in _named_fields(argv) if k not in RESOLVED_KEYS]
        resolved = {k: full[k] for k in keys if k in full}
        backend_given = any(k in _named_fields(argv) for k in ("attention_backend", "decode_attention_backend"))
        hardware = bool(assumed) and not backend_given
        reason = f"{where_note}: the default attention backend is the GPU host's to choose" if hardware else ""
        return Verdict(status="ok", reason=reason, source="preflight", rule=None, resolved=resolved, hardware_dependent=hardware)
    message = str(answer.get("error") or "").strip()
    if not message:
        message = f"{answer.get('error_type', 'Error')} at {answer.get('where') or 'an unknown place'}"
    hardware = _is_hardware(message)
    if hardware:
        message = f"hardware-dependent ({where_note or 'resolved on this host'}): {message}"
    return Verdict(
        status="rejected",
        reason=message,
        source="preflight",
        rule=_STAGE_RULE.get(str(answer.get("stage")), "sglang_resolver"),
        resolved={},
        hardware_dependent=hardware,
    )
