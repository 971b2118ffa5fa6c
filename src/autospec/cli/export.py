"""`autospec export`: one configuration of a study as a deployment.

autospec export --study NAME --pick latency|throughput|knee|N --format cmd|yaml|systemd
autospec export --study NAME --format adaptive -o ladder.json
autospec export --study NAME --pick knee --format systemd --adaptive-config /etc/sglang/ladder.json
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from autospec.cli.common import add_flag_option, add_study_command, parse_flag_overrides
from autospec.cli.pareto import add_baseline_arg, baseline_of, open_existing
from autospec.errors import UsageError

if TYPE_CHECKING:
    from autospec.report import StudyData, TrialView

FORMATS = ("cmd", "yaml", "systemd", "adaptive")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "export",
        help="export a configuration as a launch command, SGLang YAML, systemd unit or adaptive ladder",
        description="Export one configuration of a study for deployment: the full SGLang launch command, an "
        "SGLang --config YAML file, a systemd unit, or (for EAGLE/MTP studies with topk=1) an SGLang "
        "--speculative-adaptive-config ladder built from the per-concurrency measurements.",
    )
    p.add_argument("--pick", help="latency, throughput, knee (see autospec pareto) or a trial number")
    p.add_argument("--format", choices=FORMATS, default="cmd", help="what to write (default cmd)")
    p.add_argument("--host", default="127.0.0.1", help="address the server listens on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=30000, help="port the server listens on (default 30000)")
    p.add_argument(
        "--server-command",
        help="how to start SGLang, e.g. 'sglang serve' or '/opt/venv/bin/python -m sglang.launch_server' (default: the study's)",
    )
    add_flag_option(p, "set a flag in the export, e.g. --flag model_path=/models/x (NAME=none removes it; repeatable)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment variable for the server, e.g. --env CUDA_VISIBLE_DEVICES=0,1,2,3 (repeatable)",
    )
    p.add_argument(
        "--adaptive-config",
        metavar="PATH",
        help="make the server use the ladder written by --format adaptive at PATH (cmd/yaml/systemd)",
    )
    add_baseline_arg(p)
    p.add_argument("-o", "--output", help="write to this file instead of standard output")
    p.set_defaults(handler=run)


def _overrides(items: list[str]) -> dict:
    flags = parse_flag_overrides(items)
    return {k: (None if isinstance(v, str) and v.lower() == "none" else v) for k, v in flags.items()}


def _env(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not name.strip().replace("_", "").isalnum():
            raise UsageError(f"--env {item!r} needs NAME=VALUE with a variable name, e.g. --env CUDA_VISIBLE_DEVICES=0,1")
        env[name.strip()] = value
    return env


def choose(data: StudyData, pick: str | None, baseline: TrialView | None) -> tuple[TrialView, str]:
    """(TrialView, label) for --pick."""
    from autospec.report import PICKS, recommend

    if pick is None:
        raise UsageError("--pick is required for this format; use latency, throughput, knee or a trial number")
    if pick.isdigit():
        t = data.trial(int(pick))
        if t is None or not t.measured:
            state = "does not exist" if t is None else f"has no measurement (outcome {t.outcome})"
            raise UsageError(f"--pick {pick}: trial {pick} of study {data.name!r} {state}; see autospec pareto")
        return t, ""
    if pick not in PICKS:
        raise UsageError(f"--pick {pick!r} is not known; use latency, throughput, knee or a trial number")
    picks = recommend(data, baseline)
    if pick not in picks:
        raise UsageError(f"study {data.name!r} has no measured configuration yet; run autospec optimize first")
    return picks[pick].trial, f"{pick} pick"


def run(args: argparse.Namespace) -> int:
    from autospec.report import (
        adaptive_flags,
        build_ladder,
        deployment_for,
        render_cmd,
        render_systemd,
        render_yaml,
        snapshot,
    )
    from autospec.report.adaptive import dumps
    from autospec.report.document import pick_summary

    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port; use 1-65535")
    study = open_existing(args)
    data = snapshot(study)
    baseline = baseline_of(data, args.baseline_trial)
    if args.format == "adaptive":
        if args.pick is not None:
            choose(data, args.pick, baseline)  # the ladder uses every measurement; a wrong --pick is still an error
        text = dumps(build_ladder(data), data.name)
        what = "adaptive ladder"
    else:
        trial, label = choose(data, args.pick, baseline)
        overrides = _overrides(args.flag)
        summary = pick_summary(data, trial)
        if args.adaptive_config:
            ladder = build_ladder(data)
            overrides = {**adaptive_flags(ladder, args.adaptive_config), **overrides}
            summary.append(
                f"adaptive: steps per batch size from {args.adaptive_config} (candidates "
                f"{ladder.all_steps}), starting at steps={ladder.initial_steps}"
            )
        command = shlex.split(args.server_command) if args.server_command else None
        d = deployment_for(
            data,
            trial,
            label=label,
            host=args.host,
            port=args.port,
            command=command,
            overrides=overrides,
            summary=summary,
            env=_env(args.env),
        )
        text = {"cmd": render_cmd, "yaml": render_yaml, "systemd": render_systemd}[args.format](d)
        what = f"{args.format} for trial {trial.number}" + (f" ({label})" if label else "")
    if args.output:
        path = Path(args.output)
        if args.format == "yaml" and path.suffix.lower() not in (".yaml", ".yml"):
            raise UsageError(f"-o {args.output}: SGLang reads --config files only with a .yaml or .yml suffix; rename it")
        try:
            path.write_text(text)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror}; check the folder exists and is writable") from None
        print(f"wrote {path}: {what}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
