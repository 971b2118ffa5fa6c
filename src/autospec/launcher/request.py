"""What to launch: the request object, its argv, its environment, and secret redaction.

Contract:

- :class:`LaunchRequest` is frozen plain data. ``flags`` are SGLang ``ServerArgs`` field
  names (snake_case); :func:`flag_words` turns them into ``--kebab-case VALUE`` words and
  :func:`build_argv` puts those after ``command`` (or in place of a ``"{argv}"`` element of ``command``, for wrappers that need
  arguments after SGLang's). ``True`` is a bare switch, ``False``/``None`` are omitted,
  lists/tuples become several values (SGLang's ``nargs`` flags), dicts become JSON.
  ``--host``/``--port`` are always appended by the launcher; giving them in ``flags`` is
  an error.
- Secrets: an environment variable is secret when its name is in ``secret_env_names`` or
  looks like ``*_TOKEN``, ``*_KEY``, ``*SECRET*`` or ``*PASSWORD*``; a flag is secret when
  its name looks the same way (``api_key``, ``ssl_keyfile_password``). Their values never
  appear in ``repr``, ``as_dict``, stored argv, log files or error excerpts: :class:`Redactor`
  replaces them with ``***``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autospec.errors import UsageError

__all__ = [
    "LaunchRequest",
    "build_argv",
    "flag_words",
    "default_command",
    "child_environment",
    "is_secret_name",
    "Redactor",
    "DEFAULT_SECRET_ENV_NAMES",
    "ARGV_PLACEHOLDER",
    "REDACTED",
]

REDACTED = "***"
ARGV_PLACEHOLDER = "{argv}"
DEFAULT_SECRET_ENV_NAMES: frozenset[str] = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_HUB_TOKEN",
        "OPENAI_API_KEY",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
    }
)
_SECRET_NAME = re.compile(r"(_TOKEN$|_KEY$|SECRET|PASSWORD|^TOKEN$|^API_KEY$)", re.IGNORECASE)
_FLAG_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_RESERVED_FLAGS = frozenset({"host", "port"})
# Values shorter than this are not treated as secrets: redacting "1" would garble logs.
_MIN_SECRET_LEN = 4


def default_command(python: str | None = None) -> tuple[str, ...]:
    """``python -m sglang.launch_server`` with the given interpreter (default: this one)."""
    import sys

    return (python or sys.executable, "-m", "sglang.launch_server")


@dataclass(frozen=True)
class LaunchRequest:
    """One server to start: command, SGLang flags, log file, address, environment, deadlines."""

    command: tuple[str, ...]
    flags: Mapping[str, Any]
    log_path: Path
    host: str = "127.0.0.1"
    port: int | None = None
    nccl_port: int | None = None  # SGLang --nccl-port (GPU slots: from the slot's port window)
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env_names: frozenset[str] = DEFAULT_SECRET_ENV_NAMES
    ready_timeout_s: float = 1800.0
    poll_interval_s: float = 0.25

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "log_path", Path(self.log_path))
        object.__setattr__(self, "flags", dict(self.flags))
        object.__setattr__(self, "env", {str(k): str(v) for k, v in self.env.items()})
        object.__setattr__(self, "secret_env_names", frozenset(self.secret_env_names))
        if not self.command:
            raise UsageError("the launch command is empty; give the server command, e.g. python -m sglang.launch_server")
        if self.ready_timeout_s <= 0 or self.poll_interval_s <= 0:
            raise UsageError("ready_timeout_s and poll_interval_s must be positive; pass seconds > 0")
        if self.port is not None and not 0 < int(self.port) < 65536:
            raise UsageError(f"port {self.port} is out of range; use 1-65535 or leave it unset")

    def redacted_env(self) -> dict[str, str]:
        return {k: (REDACTED if is_secret_name(k, self.secret_env_names) else v) for k, v in self.env.items()}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready and free of secrets (flags and env values redacted by name)."""
        return {
            "command": list(self.command),
            "flags": {k: (REDACTED if is_secret_name(k) else v) for k, v in self.flags.items()},
            "log_path": str(self.log_path),
            "host": self.host,
            "port": self.port,
            "env": self.redacted_env(),
            "ready_timeout_s": self.ready_timeout_s,
            "poll_interval_s": self.poll_interval_s,
        }

    def __repr__(self) -> str:
        flags = {k: (REDACTED if is_secret_name(k) else v) for k, v in self.flags.items()}
        return (
            f"LaunchRequest(command={self.command!r}, flags={flags!r}, log_path={str(self.log_path)!r}, "
            f"host={self.host!r}, port={self.port!r}, env={self.redacted_env()!r}, "
            f"ready_timeout_s={self.ready_timeout_s!r}, poll_interval_s={self.poll_interval_s!r})"
        )


def is_secret_name(name: str, explicit: Iterable[str] = ()) -> bool:
    """True for names listed in ``explicit`` or shaped like a secret (``*_TOKEN``, ``*_KEY``, ...)."""
    return name in set(explicit) or bool(_SECRET_NAME.search(name))


def _flag_values(name: str, value: Any) -> list[str] | None:
    """The argv words for one flag, or None when the flag is omitted."""
    option = "--" + name.replace("_", "-")
    if value is None or value is False:
        return None
    if value is True:
        return [option]
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        return [option, *(_scalar(name, v) for v in value)]
    if isinstance(value, Mapping):
        return [option, json.dumps(dict(value), sort_keys=True)]
    return [option, _scalar(name, value)]


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (Mapping, list, tuple)):
        raise UsageError(f"flag {name!r} has an unsupported value {value!r}; use a number, a string or a flat list")
    return str(value)


def _check_flag_name(name: object) -> None:
    if not isinstance(name, str) or not _FLAG_NAME.match(name):
        raise UsageError(f"flag name {name!r} is not a ServerArgs field name; use snake_case such as mem_fraction_static")
    if name in _RESERVED_FLAGS:
        raise UsageError(f"flag {name!r} is set by the launcher; use LaunchRequest.{name} instead")


def flag_words(flags: Mapping[str, Any]) -> list[str]:
    """Server flags -> argv words, in the flags' order: ``--kebab-case VALUE``, ``True`` a
    bare switch, ``False``/``None``/empty lists omitted (see the module docstring). No
    command, no ``--host``/``--port``: naming those, or a name that is not snake_case,
    raises :class:`UsageError`."""
    words: list[str] = []
    for name, value in flags.items():
        _check_flag_name(name)
        words += _flag_values(name, value) or []
    return words


def build_argv(req: LaunchRequest, port: int) -> list[str]:
    """The exact argv to execute (secrets included: never store it; see :meth:`Redactor.argv`):
    the command, then :func:`flag_words` of the flags and ``--host H --port P``."""
    words = flag_words(req.flags) + ["--host", req.host, "--port", str(port)]
    if req.nccl_port is not None:
        words += ["--nccl-port", str(req.nccl_port)]
    command = list(req.command)
    if ARGV_PLACEHOLDER in command:
        at = command.index(ARGV_PLACEHOLDER)
        return command[:at] + words + command[at + 1 :]
    return command + words


def child_environment(req: LaunchRequest, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus ``req.env``; unbuffered Python output."""
    env = dict(os.environ if base is None else base)
    env.update(req.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Redactor:
    """Replaces secret values with ``***`` in text and argv.

    Built from an environment (secret by variable name) and an argv (secret by flag name).
    """

    def __init__(self, secrets: Iterable[str] = (), secret_flags: Iterable[str] = ()) -> None:
        values = {s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}
        # Longest first, so a secret that contains another is replaced whole.
        self._values = sorted(values, key=len, reverse=True)
        self._secret_options = {"--" + f.replace("_", "-") for f in secret_flags}

    @classmethod
    def for_launch(cls, req: LaunchRequest, env: Mapping[str, str]) -> Redactor:
        secrets = [v for k, v in env.items() if is_secret_name(k, req.secret_env_names)]
        secret_flags = [k for k, v in req.flags.items() if is_secret_name(k)]
        secrets += [str(v) for k, v in req.flags.items() if is_secret_name(k) and v not in (None, True, False)]
        return cls(secrets, secret_flags)

    def text(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        return text

    def argv(self, argv: Iterable[str]) -> list[str]:
        out: list[str] = []
        hide_next = False
        for word in argv:
            if hide_next:
                out.append(REDACTED)
                hide_next = False
                continue
            if word in self._secret_options:
                hide_next = True
                out.append(word)
                continue
            if "=" in word and word.split("=", 1)[0] in self._secret_options:
                out.append(word.split("=", 1)[0] + "=" + REDACTED)
                continue
            out.append(self.text(word))
        return out
