"""`autospec capacity`: the highest concurrency a chosen configuration serves within latency bounds.

    autospec capacity --study NAME --pick knee --ttft-p99-ms 2000
    autospec capacity --study NAME --pick 7 --ttft-p99-ms 2000 --tpot-p99-ms 40 --max-concurrency 512

The pick's recorded launch command (the simulator's, for a ``--sim`` study), with the
space's ``[server] env``, starts one server, which stays warm while the levels run: doubling from ``--start`` until a bound
breaks, then bisection down to neighbouring levels (`autospec.metrics.capacity`). The
workload is the study's. The curve goes to ``<study>-capacity/trial-NNNN/`` beside the
study's other files: capacity.json, capacity.csv, capacity.png and capacity.html.
Exit codes: 0 a capacity was found (or every level held); 1 no level held, or the
server did not start; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.cli.common import add_study_command
from autospec.errors import UsageError

if TYPE_CHECKING:
    import optuna

    from autospec.bench import Workload
    from autospec.launcher import LaunchRequest
    from autospec.metrics.capacity import SloBound
    from autospec.report import TrialView
    from autospec.study.capacity import CapacityPoint

__all__ = ["register", "run", "BOUND_FLAGS"]

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
        "per-concurrency curve.",
    )
    p.add_argument("--pick", default="knee", help="latency, throughput, knee (default; see autospec pareto) or a trial number")
    for option, (_, what) in BOUND_FLAGS.items():
        p.add_argument(f"--{option.replace('_', '-')}", type=float, metavar="MS", help=f"bound on the {what}")
    p.add_argument("--start", type=int, default=1, help="first concurrency measured (default 1)")
    p.add_argument("--max-concurrency", type=int, default=256, help="highest concurrency measured (default 256)")
    p.add_argument("--waves", type=int, default=4, help="measured requests per level: WAVES x C, at least 16 (default 4)")
    p.add_argument("--max-error-rate", type=float, default=0.05, help="a level with more failed requests breaks (default 0.05)")
    p.add_argument("--space", help="take the workload from this search-space file (default: the study's own)")
    p.add_argument("--server-command", help="start the server with this command instead of the recorded one")
    p.add_argument("--sim", action="store_true", help="start the bundled simulator instead of the recorded command")
    p.add_argument("--sim-load-seconds", type=float, help="with --sim: simulated model load time")
    p.add_argument("--sim-time-scale", type=float, help="with --sim: multiply every simulated duration")
    p.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds the server may take to start (default 1800)")
    p.add_argument("--json", action="store_true", help="print the curve as JSON instead of the table")
    p.set_defaults(handler=run)


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
    if args.sim or args.server_command:
        flags = {k: v for k, v in flags.items() if not k.startswith("sim_")}
    if args.sim:
        from autospec.cli.wiring import sim_command

        words = list(sim_command(load_seconds=args.sim_load_seconds, time_scale=args.sim_time_scale))
    elif args.server_command:
        words = shlex.split(args.server_command)
    return LaunchRequest(command=tuple(words), flags=flags, log_path=log_path, env=env, ready_timeout_s=args.ready_timeout)


def _level_line(point: CapacityPoint) -> str:
    s = point.summary

    def ms(key: str) -> str:
        value = s.get(key)
        return "-" if value is None else f"{value:.1f}"

    verdict = "holds" if point.holds else "breaks: " + "; ".join(point.broken)
    agg = s.get("agg_output_tok_s")
    return (
        f"C={point.concurrency:<4} ok {s.get('n_ok', 0):>4}  TTFT p99 {ms('ttft_ms_p99'):>8} ms  "
        f"TPOT p99 {ms('tpot_ms_p99'):>7} ms  "
        f"agg {'-' if agg is None else f'{agg:.0f}':>7} tok/s  {verdict}"
    )


def _save(curve: dict[str, Any], folder: Path) -> list[Path]:
    from autospec.report.capacity import capacity_figure, write_csv, write_html
    from autospec.report.plots import render

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "capacity.json").write_text(json.dumps(curve, indent=1, default=str) + "\n")
    write_csv(curve, folder / "capacity.csv")
    svg = render(capacity_figure(curve), folder / "capacity")
    write_html(curve, svg, folder / "capacity.html")
    return [folder / f"capacity.{ext}" for ext in ("json", "csv", "png", "html")]


def run(args: argparse.Namespace) -> int:
    from autospec.cli.export import choose
    from autospec.cli.pareto import baseline_of, open_existing_handle
    from autospec.cli.wiring import default_probe
    from autospec.launcher import Launcher, NullGpuProbe
    from autospec.report import snapshot
    from autospec.report.capacity import summary_line
    from autospec.study.capacity import CapacityPlan, measure_capacity
    from autospec.study.files import StudyLayout

    bounds = bounds_of(args)
    _check_numbers(args)
    handle, study = open_existing_handle(args)
    data = snapshot(study)
    trial, label = choose(data, args.pick, baseline_of(data, None))
    workload, env = _study_space(args, study)
    folder = StudyLayout.beside(handle.local_path, Path(args.studies_dir), data.name).capacity_dir(trial.number)
    folder.mkdir(parents=True, exist_ok=True)
    request = _request(args, trial, folder / "server.log", env)
    simulated = any("autospec.sim" in w for w in request.command)
    plan = CapacityPlan(bounds, args.start, args.max_concurrency, waves=args.waves, max_error_rate=args.max_error_rate)
    out = sys.stderr if args.json else sys.stdout
    print(f"capacity of trial {trial.number}{f' ({label})' if label else ''}: starting its server", file=out)
    launcher = Launcher(probe=NullGpuProbe() if simulated else default_probe())
    curve = measure_capacity(launcher, request, workload, plan, on_level=lambda p: print(_level_line(p), file=out))
    payload = {"study": data.name, "trial": trial.number, "pick": label.removesuffix(" pick") or None, **curve.as_dict()}
    payload["workload"] = workload.as_dict()
    paths = _save(payload, folder)
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    print(summary_line(payload), file=out)
    print("saved " + ", ".join(str(p) for p in paths), file=out)
    return 0 if curve.capacity is not None else 1
