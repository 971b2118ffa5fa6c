"""`autospec capacity`: the highest concurrency a chosen configuration serves within latency bounds.

    autospec capacity --study NAME --pick knee --ttft-p99-ms 2000
    autospec capacity --study NAME --pick 7 --ttft-p99-ms 2000 --tpot-p99-ms 40 --max-concurrency 512
    autospec capacity --study NAME --compare latency,no_speculation --tpot-p99-ms 8 --timeout 30m

The pick's recorded launch command (the simulator's, for a ``--sim`` study), with the
space's ``[server] env``, starts one server, which stays warm while the levels run: doubling from ``--start`` until a bound
breaks, then bisection down to neighbouring levels (`autospec.metrics.capacity`). The
workload is the study's. The curve goes to ``<study>-capacity/trial-NNNN/`` beside the
study's other files: capacity.json, capacity.csv, capacity.png and capacity.html; the JSON
and CSV are rewritten after every level, so a run that stops keeps every finished level.
``--compare`` measures several configurations one after another under the same bounds,
levels and workload and prints them side by side (also saved as compare.json / .csv).
``--timeout`` ends the run (the level in flight is cancelled); Ctrl-C or SIGTERM ends it
too, with one line: the files hold every finished level.
Exit codes: 0 a capacity was found (or every level held) for each configuration; 1 no
level held, the server did not start, or --timeout ended the search; 2 bad input; 130
stopped by a signal.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.cli.common import add_sim_timing_arguments, add_study_command, add_timeout_option
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna

    from autospec.bench import Workload
    from autospec.launcher import LaunchRequest
    from autospec.metrics.capacity import SloBound
    from autospec.report import TrialView

__all__ = ["register", "run", "BOUND_FLAGS", "REFERENCES"]

#: the references a study may have measured (`autospec.study.proposing.references`)
REFERENCES = ("no_speculation", "sglang_defaults", "adaptive")

#: option -> (summary metric, what it bounds)
BOUND_FLAGS = {
    "ttft_p99_ms": ("ttft_ms_p99", "99th-percentile time to first token, ms"),
    "tpot_p99_ms": ("tpot_ms_p99", "99th-percentile time per output token, ms"),
    "itl_p99_ms": ("itl_ms_p99", "99th-percentile inter-token latency, ms"),
    "ttft_p50_ms": ("ttft_ms_p50", "median time to first token, ms"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "capacity",
        help="find the highest concurrency a configuration of a study serves within latency bounds",
        description="Start one configuration of a study once and step its concurrency up (doubling, then bisection) "
        "until the given latency bounds break; report the highest concurrency that held, and save and plot the "
        "per-concurrency curve. --compare does so for several configurations and prints them side by side.",
    )
    what = p.add_argument_group("what is measured")
    what.add_argument("--pick", default="knee", help="latency, throughput, knee (default; see autospec pareto) or a trial number")
    what.add_argument(
        "--compare",
        metavar="LIST",
        help="measure several configurations under the same bounds, one after another, and print them side by side: "
        f"picks, trial numbers or references ({', '.join(REFERENCES)}), e.g. latency,no_speculation",
    )
    bounds = p.add_argument_group("bounds (give at least one)")
    for option, (_, what_it_bounds) in BOUND_FLAGS.items():
        bounds.add_argument(f"--{option.replace('_', '-')}", type=float, metavar="MS", help=f"bound on the {what_it_bounds}")
    bounds.add_argument(
        "--max-error-rate", type=float, default=0.05, help="a level with more failed requests breaks (default 0.05)"
    )
    levels = p.add_argument_group("levels")
    levels.add_argument("--start", type=int, default=1, help="first concurrency measured (default 1)")
    levels.add_argument("--max-concurrency", type=int, default=256, help="highest concurrency measured (default 256)")
    levels.add_argument("--waves", type=int, default=4, help="measured requests per level: WAVES x C, at least 16 (default 4)")
    add_timeout_option(
        levels, "end the run after this wall time, e.g. 30m: the level in flight is cancelled, finished ones are kept"
    )
    server = p.add_argument_group("server")
    server.add_argument("--space", help="take the workload from this search-space file (default: the study's own)")
    server.add_argument("--server-command", help="start the server with this command instead of the recorded one")
    server.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds the server may take to start (default 1800)")
    server.add_argument("--sim", action="store_true", help="start the bundled simulator instead of the recorded command")
    add_sim_timing_arguments(server)
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the curve(s) as JSON instead of the table")
    p.set_defaults(
        handler=run,
        on_interrupt=(130, "interrupted while a server started; the files of the levels already finished are kept"),
    )


def bounds_of(args: argparse.Namespace) -> tuple[SloBound, ...]:
    """The bounds given on the command line (at least one, each positive)."""
    from autospec.metrics.capacity import SloBound

    bounds = []
    for option, (metric, _) in BOUND_FLAGS.items():
        value = getattr(args, option)
        if value is None:
            continue
        if not value > 0:
            raise UsageError(f"--{option.replace('_', '-')} {value:g} must be a positive number of milliseconds; e.g. 2000")
        bounds.append(SloBound(metric, float(value)))
    if not bounds:
        raise UsageError("give at least one latency bound, e.g. --ttft-p99-ms 2000 (also --tpot-p99-ms, --itl-p99-ms)")
    return tuple(bounds)


def _check_numbers(args: argparse.Namespace) -> None:
    if args.start < 1 or args.max_concurrency < args.start:
        raise UsageError(
            f"--start {args.start} and --max-concurrency {args.max_concurrency} need 1 <= start <= max; e.g. --start 1"
        )
    if args.waves < 1:
        raise UsageError(f"--waves {args.waves} must be at least 1; e.g. --waves 4")
    if not 0 <= args.max_error_rate <= 1:
        raise UsageError(f"--max-error-rate {args.max_error_rate} must be within 0..1; e.g. 0.05")


def _study_space(args: argparse.Namespace, study: optuna.Study) -> tuple[Workload, dict[str, str]]:
    """The study's workload (its stored space file and --output-len) and its servers'
    environment ([server] env), or --space's."""
    import dataclasses

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    from autospec.cli.common import load_space
    from autospec.config import parse_search_space
    from autospec.errors import ConfigError
    from autospec.records import WORKER_OPTIONS_KEY

    if args.space:
        space = load_space(args.space)
        return space.workload, dict(space.server.env)
    stored = study.user_attrs.get(WORKER_OPTIONS_KEY)
    if not isinstance(stored, dict) or not stored.get("space_toml"):
        raise UsageError(
            f"study {study.study_name!r} does not hold its search-space file; pass the one it ran with: --space FILE"
        )
    try:
        space = parse_search_space(tomllib.loads(stored["space_toml"]), source=f"study {study.study_name}")
    except (ConfigError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(
            f"the search-space file stored with the study does not load ({exc}); pass it with --space FILE"
        ) from None
    output_len = (stored.get("options") or {}).get("output_len")
    workload = dataclasses.replace(space.workload, output_len=int(output_len)) if output_len else space.workload
    return workload, dict(space.server.env)


def _request(args: argparse.Namespace, trial: TrialView, log_path: Path, env: dict[str, str]) -> LaunchRequest:
    """The pick's recorded launch (host and port chosen afresh), or its flags under
    --server-command / --sim."""
    from autospec.launcher import LaunchRequest
    from autospec.report.deploy import split_argv

    if not trial.server_args:
        raise UsageError(f"trial {trial.number} has no recorded launch command; pick a launched trial (see autospec pareto)")
    words, flags = split_argv(trial.server_args)
    for key in ("host", "port", "nccl_port"):
        flags.pop(key, None)
    if args.sim or args.server_command:  # a simulator study's profile stays with --sim; its timing is this run's
        flags = {k: v for k, v in flags.items() if not k.startswith("sim_") or (args.sim and k == "sim_profile")}
    if args.sim:
        from autospec.cli.wiring import sim_command

        words = list(
            sim_command(
                load_seconds=args.sim_load_seconds, warmup_seconds=args.sim_warmup_seconds, time_scale=args.sim_time_scale
            )
        )
    elif args.server_command:
        words = shlex.split(args.server_command)
    return LaunchRequest(command=tuple(words), flags=flags, log_path=log_path, env=env, ready_timeout_s=args.ready_timeout)


def _targets(args: argparse.Namespace, data: Any) -> list[tuple[TrialView, str]]:
    """(trial, label) of each configuration to measure: --compare's list, else --pick;
    every one checked before any server starts; one listed twice is measured once."""
    from autospec.cli.export import choose
    from autospec.cli.pareto import baseline_of

    specs = [s.strip() for s in args.compare.split(",") if s.strip()] if args.compare else [args.pick]
    if args.compare and len(specs) < 2:
        raise UsageError(f"--compare {args.compare!r} names one configuration; list two or more, e.g. latency,no_speculation")
    chosen: dict[int, tuple[TrialView, list[str]]] = {}
    for spec in specs:
        if spec in REFERENCES:
            found = [t for t in data.references if t.reference == spec]
            if not found:
                measured = ", ".join(str(t.reference) for t in data.references) or "none"
                raise UsageError(
                    f"study {data.name!r} has no measured reference {spec} (measured: {measured}); "
                    "run autospec optimize --references, or compare picks and trial numbers"
                )
            trial, label = found[0], f"reference {spec}"
        else:
            trial, label = choose(data, spec, baseline_of(data, None))
            label = label or f"trial {trial.number}"
        chosen.setdefault(trial.number, (trial, []))[1].append(label)
    return [(trial, ", ".join(labels)) for trial, labels in chosen.values()]


def run(args: argparse.Namespace) -> int:
    from autospec.cli import capacity_output as output
    from autospec.cli.pareto import open_existing_handle
    from autospec.report import snapshot
    from autospec.study.capacity import CapacityPlan, CapacityStop
    from autospec.study.files import StudyLayout

    bounds = bounds_of(args)
    _check_numbers(args)
    handle, study = open_existing_handle(args)
    data = snapshot(study)
    targets = _targets(args, data)
    workload, env = _study_space(args, study)
    layout = StudyLayout.beside(handle.local_path, Path(args.studies_dir), data.name)
    plan = CapacityPlan(bounds, args.start, args.max_concurrency, waves=args.waves, max_error_rate=args.max_error_rate)
    out = sys.stderr if args.json else sys.stdout
    stop = CapacityStop(deadline=time.monotonic() + args.timeout if args.timeout else None)
    curves: list[dict[str, Any]] = []
    requests = [_request(args, trial, layout.capacity_dir(trial.number) / "server.log", env) for trial, _ in targets]
    with output.stop_on_signals(stop) as phase:
        for (trial, label), request in zip(targets, requests):
            remaining = stop.remaining_s()
            if remaining is not None and remaining <= 0:
                stop.reason = stop.reason or "timeout"
            if stop.reason is not None:
                break
            request.log_path.parent.mkdir(parents=True, exist_ok=True)
            curves.append(output.measure_one(data.name, trial.number, label, request, workload, plan, stop, phase, out))
    if args.json:
        single = curves[0] if curves else None
        print(json.dumps(curves if args.compare else single, indent=2, default=str))
    if args.compare:
        output.compare(curves, targets, layout.capacity_dir(0).parent, out, stop.reason)
    if stop.reason is not None and stop.reason != "timeout":
        print(output.stopped_line(stop.reason, curves, targets, layout), file=sys.stderr)
        return 130
    complete = len(curves) == len(targets) and all(c.get("stopped") is None for c in curves)
    return 0 if complete and all(c["capacity"] is not None for c in curves) else 1
