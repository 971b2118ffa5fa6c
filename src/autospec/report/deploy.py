"""A chosen trial as a deployment: the launch command, an SGLang ``--config`` YAML file
and a systemd unit (pure; the CLI writes the text).

The server flags come from the trial's recorded argv (`server_args`), so every flag the
study really ran with (fixed flags, ``--flag`` overrides, the tuned values) is exported;
host and port are replaced by the ones asked for. Trials measured by the simulator ran
``python -m autospec.sim``: their command becomes SGLang's, and ``--sim-*`` flags are
dropped. Imported trials, which have no argv, take the fixed flags of a launched trial of
the same study and lay their own configuration over them.

SGLang facts (checked against sglang 0.5.23, ``srt/server_args.py`` and
``srt/utils/server_args_config_parser.py``):

- ``--config FILE.yaml`` (suffix .yaml/.yml) is a mapping at root level. Each key becomes
  ``--<key>`` verbatim, so keys must be spelled like the option (``speculative-num-steps``;
  ``speculative_num_steps`` is not an option and leaves e.g. ``--model-path`` missing, as
  the real parser showed); ``true`` on a store_true flag adds the switch, a list becomes
  ``--flag a b``. Config values come before the command line: the command line wins.
- Entry point ``python -m sglang.launch_server`` (0.5.23 also offers ``sglang serve``).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.errors import UsageError
from autospec.report.data import StudyData, TrialView

__all__ = [
    "Deployment",
    "DEFAULT_SERVER_COMMAND",
    "deployment_for",
    "split_argv",
    "render_cmd",
    "render_yaml",
    "render_systemd",
    "argv_of",
]

DEFAULT_SERVER_COMMAND = ("python3", "-m", "sglang.launch_server")
_SIM_MODULE = "autospec.sim"
_DROP = ("host", "port")


@dataclass(frozen=True)
class Deployment:
    study: str
    trial: int
    label: str  # e.g. "latency pick"
    command: tuple[str, ...]
    flags: dict[str, Any]  # snake_case flag -> value (True = bare switch); host/port excluded
    host: str
    port: int
    summary: list[str] = field(default_factory=list)  # comment lines: what was measured
    env: dict[str, str] = field(default_factory=dict)

    def all_flags(self) -> dict[str, Any]:
        return {**self.flags, "host": self.host, "port": self.port}


def _scalar(token: str) -> Any:
    if re.fullmatch(r"-?\d+", token):
        return int(token)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)", token):
        return float(token)
    return token


def split_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """(command words, flags) of a server argv: words before the first ``--flag`` are the
    command; ``--flag`` followed by another ``--flag`` (or nothing) is a switch (True);
    several values make a list."""
    command: list[str] = []
    flags: dict[str, Any] = {}
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        command.append(argv[i])
        i += 1
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            raise UsageError(f"cannot read the recorded server argv at {token!r}; export with --flag NAME=VALUE instead")
        name, eq, inline = token[2:].partition("=")
        key = name.replace("-", "_")
        i += 1
        if eq:
            flags[key] = _scalar(inline)
            continue
        values = []
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(_scalar(argv[i]))
            i += 1
        flags[key] = True if not values else values[0] if len(values) == 1 else values
    return command, flags


def _launched_flags(data: StudyData) -> tuple[list[str], dict[str, Any]] | None:
    for t in sorted(data.trials, key=lambda t: t.number):
        if t.server_args and t.reference is None:  # a reference point drops flags of the space
            return split_argv(t.server_args)
    return None


def deployment_for(
    data: StudyData,
    trial: TrialView,
    *,
    label: str = "",
    host: str = "127.0.0.1",
    port: int = 30000,
    command: Sequence[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    summary: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Deployment:
    """The deployment of `trial`. `command` replaces the recorded command words;
    `overrides` sets (or, with None/False, removes) flags; `env` is set for the server."""
    if trial.server_args:
        words, flags = split_argv(trial.server_args)
    else:
        base = _launched_flags(data)
        if base is None and not overrides:
            raise UsageError(
                f"trial {trial.number} has no recorded launch command and no trial of study {data.name!r} was launched; "
                "pass the fixed flags with --flag NAME=VALUE (at least --flag model_path=...)"
            )
        words, flags = base if base is not None else ([], {})
        flags = {**flags, **trial.flags}
    simulated = any(w == _SIM_MODULE or w.endswith("/autospec/sim") for w in words)
    if simulated:
        flags = {k: v for k, v in flags.items() if not k.startswith("sim_")}
    for key in _DROP:
        flags.pop(key, None)
    for key, value in (overrides or {}).items():
        if value is None or value is False:
            flags.pop(key, None)
        else:
            flags[key] = value
    if command:
        words = list(command)
    elif simulated or not words:
        words = list(DEFAULT_SERVER_COMMAND)
    lines = list(summary)
    if simulated:
        lines.append("measured against autospec's simulator (--sim): re-measure on your GPUs before relying on it")
    return Deployment(data.name, trial.number, label, tuple(words), flags, host, port, lines, dict(env or {}))


def argv_of(flags: Mapping[str, Any]) -> list[str]:
    """``--kebab-case VALUE`` words (True: bare switch; False/None: omitted; lists: several words)."""
    out: list[str] = []
    for key, value in flags.items():
        if value is None or value is False:
            continue
        name = "--" + key.replace("_", "-")
        if value is True:
            out.append(name)
        elif isinstance(value, (list, tuple)):
            out += [name, *(str(v) for v in value)]
        elif isinstance(value, dict):
            out += [name, json.dumps(value)]
        else:
            out += [name, str(value)]
    return out


def _header(d: Deployment, what: str) -> list[str]:
    pick = f" ({d.label})" if d.label else ""
    lines = [f"{what} exported by autospec from study {d.study!r}, trial {d.trial}{pick}"]
    return lines + list(d.summary)


def _pairs(flags: Mapping[str, Any]) -> list[list[str]]:
    """argv grouped per flag: [['--model-path', 'X'], ['--enable-foo'], ...]."""
    groups: list[list[str]] = []
    for word in argv_of(flags):
        if word.startswith("--") or not groups:
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def render_cmd(d: Deployment) -> str:
    """A shell command, one flag per line (``\\`` continuations), after comment lines."""
    lines = [f"# {c}" for c in _header(d, "SGLang launch command")]
    env = [f"{k}={shlex.quote(v)}" for k, v in d.env.items()]
    head = " ".join(env + [shlex.quote(w) for w in d.command])
    groups = [" ".join(shlex.quote(w) for w in g) for g in _pairs(d.all_flags())]
    lines.append(" \\\n    ".join([head, *groups]))
    return "\n".join(lines) + "\n"


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    # Plain YAML scalars only when they cannot be read as anything but this string.
    if re.fullmatch(r"[A-Za-z_/][A-Za-z0-9_./-]*", text) and text.lower() not in (
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "null",
        "y",
        "n",
        "~",
    ):
        return text
    return json.dumps(text)  # a JSON string is a valid YAML double-quoted scalar


def render_yaml(d: Deployment) -> str:
    """SGLang ``--config`` file: one ``flag-name: value`` per line, host and port included."""
    lines = [f"# {c}" for c in _header(d, "SGLang --config file")]
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in d.env.items())
    lines.append(f"# Run: {env}{' '.join(shlex.quote(w) for w in d.command)} --config THIS_FILE.yaml")
    for name, value in d.all_flags().items():
        if value is None or value is False:
            continue
        key = name.replace("_", "-")
        if isinstance(value, (list, tuple)):
            lines.append(f"{key}: [{', '.join(_yaml_scalar(v) for v in value)}]")
        elif isinstance(value, dict):
            lines.append(f"{key}: {json.dumps(json.dumps(value))}")
        else:
            lines.append(f"{key}: {_yaml_scalar(value)}")
    return "\n".join(lines) + "\n"


_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_./:=,+@-]+")


def _systemd_word(word: str) -> str:
    """One ExecStart word: '%' is a unit specifier and '$' an environment reference, so both
    are doubled; anything else unusual goes in double quotes with C-style escapes."""
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_SAFE.fullmatch(word):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_systemd(d: Deployment, *, description: str | None = None) -> str:
    """A systemd service unit running the server, restarting it on failure and stopping
    the whole control group (SGLang's scheduler and detokenizer children hold GPU memory)."""
    words = list(d.command)
    if not words[0].startswith("/"):
        words = ["/usr/bin/env", *words]  # systemd wants an absolute path (or a name it can find)
    groups = [" ".join(_systemd_word(w) for w in g) for g in _pairs(d.all_flags())]
    exec_start = " \\\n    ".join([" ".join(_systemd_word(w) for w in words), *groups])
    pick = f", {d.label}" if d.label else ""
    desc = description or f"SGLang server (autospec study {d.study}, trial {d.trial}{pick})"
    lines = [f"# {c}" for c in _header(d, "systemd unit")]
    lines += [
        "# Install: copy to /etc/systemd/system/sglang.service, then",
        "#   systemctl daemon-reload && systemctl enable --now sglang",
        "",
        "[Unit]",
        f"Description={desc}",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    lines += [f"Environment={_systemd_word(f'{k}={v}')}" for k, v in d.env.items()]
    lines += [
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        "RestartSec=10",
        "# Loading weights and capturing CUDA graphs can take many minutes.",
        "TimeoutStartSec=1800",
        "# TERM the whole control group (scheduler and detokenizer children too), KILL after 60 s,",
        "# so a restart never finds GPU memory still held by the previous server.",
        "KillMode=control-group",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=60",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"
