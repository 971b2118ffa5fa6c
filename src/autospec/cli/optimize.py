"""`autospec optimize`: run (or continue) a study until it holds N launched trials."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autospec.cli.common import (
    add_flag_option,
    add_sim_timing_arguments,
    add_study_command,
    add_timeout_option,
    duration_arg,
    flag_override_origins,
    load_space,
    parse_flag_overrides,
    space_file,
    study_name_for,
)
from autospec.cli.render import Progress
from autospec.errors import UsageError

if TYPE_CHECKING:
    from autospec.config import SearchSpace
    from autospec.study import ModelSize, OptimizeResult


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "optimize",
        help="tune speculative decoding: launch, benchmark and score configurations",
        description=(
            "Run an Optuna study over SGLang speculative-decoding flags. Each trial launches a "
            "server, benchmarks it at each concurrency level and tears it down. Re-running the "
            "same command continues the study until it holds --trials launched trials."
        ),
        name_from_space=True,
        space=True,
    )
    _add_budget_arguments(p.add_argument_group("budget"))
    _add_search_arguments(p.add_argument_group("what is measured"))
    _add_server_arguments(p.add_argument_group("server"))
    add_slot_arguments(p.add_argument_group("GPUs"))
    _add_learning_arguments(p.add_argument_group("learning, relaunches and racing"))
    _add_sim_arguments(p.add_argument_group("simulator (no GPU needed)"))
    out = p.add_argument_group("output")
    out.add_argument("--quiet", action="store_true", help="no progress display")
    p.set_defaults(handler=run, on_interrupt=(130, "interrupted; run the same command again to continue"))


def _add_budget_arguments(g: argparse._ArgumentGroup) -> None:
    """How many launches, for how long, and the sampler that chooses them."""
    g.add_argument("--trials", type=int, default=20, help="launched trials the study should hold (default 20)")
    add_timeout_option(g, "stop starting new trials after this wall time, e.g. 8h or 90m (default: no limit)")
    g.add_argument(
        "--sampler",
        choices=("model", "tpe", "gp", "nsga2", "random"),
        default="model",
        help="model (default): launch where a model fitted on the launches so far expects the most "
        "hypervolume gain (docs/model.md); or an Optuna sampler",
    )
    g.add_argument("--seed", type=int, default=None, help="sampler seed, for reproducible studies")


def _add_search_arguments(g: argparse._ArgumentGroup) -> None:
    """The levels, the output length, and the configurations measured besides the search."""
    g.add_argument("--concurrency", help="comma-separated concurrency levels to measure, e.g. 1,4,32")
    g.add_argument("--output-len", type=int, help="output tokens per request (overrides [workload] output_len)")
    g.add_argument("--baseline", action="store_true", help="measure the [baseline] configuration of the space file first")
    g.add_argument(
        "--references",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also measure no speculation, SGLang's defaults for the algorithm and --speculative-adaptive where it "
        "applies, counted in --trials (default: [references] measure in the space file, else on when --trials "
        "allows 4 launches per reference); pareto and report show the picks' gains over them",
    )


def _add_server_arguments(g: argparse._ArgumentGroup) -> None:
    """What is served, how it starts, and how long it may take."""
    g.add_argument("--model-path", help="model to serve (overrides [server.flags] model_path)")
    g.add_argument("--tp-size", type=int, help="tensor parallel size (overrides [server.flags] tp_size)")
    add_flag_option(g, "fixed server flag, e.g. --flag attention_backend=fa3 (repeatable)")
    g.add_argument(
        "--server-command", help="how to start the server, e.g. 'sglang serve' or '/venv/bin/python -m sglang.launch_server'"
    )
    g.add_argument("--ready-timeout", type=float, help="seconds a server may take to become ready (default from the space file)")
    g.add_argument(
        "--preflight",
        choices=("auto", "off"),
        default="auto",
        help="check each configuration with the server's own argument resolver before launching (default auto)",
    )
    g.add_argument(
        "--allow-foreign-gpu-memory",
        action="store_true",
        help="start even if other processes hold GPU memory (they skew memory sizing)",
    )
    g.add_argument(
        "--storage-patience",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long to wait for a storage that stops answering before stopping the run (default 120); "
        "the result of the current trial is kept and stored by the next run",
    )


def _add_learning_arguments(g: argparse._ArgumentGroup) -> None:
    """What the study learns, relaunches and races."""
    g.add_argument(
        "--no-learn",
        action="store_true",
        help="do not learn from launches: no calibration launches, no skipping of configurations "
        "predicted to fail, no mem-fraction pushes of queue-bound configurations",
    )
    g.add_argument(
        "--remeasure", action="store_true", help="launch configurations that resolve to an already measured server again"
    )
    g.add_argument(
        "--confirm",
        type=int,
        default=None,
        metavar="K",
        help="at most K of the --trials launches relaunch what the picks depend on, at the end of the budget, "
        "until the picks are separated beyond the between-launch spread (0: off; default: the space file's "
        "[study] confirm, else a quarter of --trials)",
    )
    g.add_argument(
        "--no-race",
        action="store_true",
        help="measure every level to its precision target even when the configuration clearly cannot reach the front",
    )


def _add_sim_arguments(g: argparse._ArgumentGroup) -> None:
    """The bundled simulator in place of SGLang; its timing knobs are hidden
    (`add_sim_timing_arguments`)."""
    g.add_argument("--sim", action="store_true", help="run against the bundled simulator instead of SGLang")
    g.add_argument(
        "--sim-profile",
        metavar="FILE|NAME",
        help="simulator profile: a TOML file or a bundled profile's name "
        "(default: the one calibrated to a real hand-tuning sweep; a wrong name lists the bundled ones)",
    )
    add_sim_timing_arguments(g)


def _levels(text: str | None) -> tuple[int, ...] | None:
    """The --concurrency override (see `parse_concurrency`), or None when not given."""
    from autospec.cli.common import parse_concurrency

    return parse_concurrency(text) if text else None


def add_slot_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--gpus / --gpus-per-trial (and the hidden --slot a slot's worker process gets)."""
    p.add_argument(
        "--gpus",
        metavar="LIST",
        help="GPUs to use, e.g. 0-7 or 0,1,4,5: split into slots of --gpus-per-trial GPUs that each run one "
        "trial at a time (list a GPU twice, e.g. 0,0, for two slots sharing it); docs/distributed.md",
    )
    p.add_argument(
        "--gpus-per-trial",
        type=int,
        metavar="N",
        help="GPUs per slot (default tp_size x pp_size x dp_size of the fixed server flags)",
    )
    p.add_argument("--slot", type=int, help=argparse.SUPPRESS)  # the one slot a worker process of --gpus runs


def run(args: argparse.Namespace) -> int:
    from autospec import study as study_api
    from autospec.cli import wiring
    from autospec.cli.workers import run_slot_workers, slot_of, study_options

    _check_numbers(args)
    space = _space_of(args)
    if args.baseline:
        check_baseline_on_grid(space)
    timeout_s = _timeout_seconds(args.timeout)
    studies_dir = Path(args.studies_dir)
    name = study_name_for(args, space)
    launched = _launched_already(args, name, space)
    if launched is not None and launched >= args.trials:
        print(
            f"study {name} already holds {launched} launched trials (--trials {args.trials}): nothing to do; "
            f"raise --trials to launch more, or see the front with: autospec pareto --study {name}" + _where_args(args)
        )
        return 0
    plan, slot = slot_of(args, space)
    if plan is not None and slot is None:
        return run_slot_workers(args, plan, name)
    target = wiring.build_target(
        space,
        studies_dir=studies_dir,
        sim=args.sim,
        sim_profile=args.sim_profile,
        sim_load_seconds=args.sim_load_seconds,
        sim_warmup_seconds=args.sim_warmup_seconds,
        sim_time_scale=args.sim_time_scale,
        preflight=args.preflight,
        out=sys.stderr,
        slot=slot,
    )
    request = study_api.OptimizeRequest(
        space=space,
        study_name=name,
        n_trials=args.trials,
        command=target.command,
        studies_dir=studies_dir,
        storage=args.storage,
        sampler=args.sampler,
        seed=args.seed,
        env=target.env,
        launcher=target.launcher,
        preflight=target.preflight,
        to_argv=target.to_argv,
        sglang_version=target.sglang_version,
        baseline=args.baseline,
        references=args.references,
        timeout_s=timeout_s,
        learn=not args.no_learn,
        remeasure=args.remeasure,
        ready_timeout_s=args.ready_timeout,
        signals=getattr(args, "stop_signals", None),
        storage_patience_s=args.storage_patience,
        allow_foreign_gpu_memory=args.allow_foreign_gpu_memory,
        confirm=args.confirm if args.confirm is not None else space.study.confirm,
        race=not args.no_race,
        slot=slot,
        hardware=target.hardware,
        machine=target.machine,
        study_options=study_options(args, space_file(args.space)),
        model_size=_with_listed_gpus(target.model_size, args),
    )
    progress = Progress([(o.name, o.direction) for o in space.objectives], quiet=args.quiet, simulated=args.sim)
    _print_result(study_api.optimize(request, progress), args)
    return 0


def _launched_already(args: argparse.Namespace, name: str, space: SearchSpace) -> int | None:
    """The launched trials of study `name` when it already exists (None when it does not,
    or when results kept while the storage was away wait to be stored by a run); creates
    nothing. A finished study made for another space is refused here, as the run would."""
    import warnings

    import optuna

    from autospec.records import read_trials
    from autospec.study.files import StudyLayout
    from autospec.study.storage import missing_storage_file, open_storage, open_study, study_exists

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    studies_dir = Path(args.studies_dir)
    if missing_storage_file(args.storage, name, studies_dir) is not None:
        return None
    handle = open_storage(args.storage, name, studies_dir)
    if not study_exists(handle, name):
        return None
    if any(StudyLayout.beside(handle.local_path, studies_dir, name).pending_dir.glob("trial-*.json")):
        return None
    launched = sum(1 for t in read_trials(optuna.load_study(study_name=name, storage=handle.storage)) if t.counts_as_launch)
    if launched >= args.trials:
        open_study(handle, name, space, optuna.samplers.RandomSampler(), create=False)  # another space: one line, exit 2
    return launched


def check_baseline_on_grid(space: SearchSpace) -> None:
    """--baseline measures [baseline] as a point of the search, so it must be one: an
    off-grid value (steps 12 in 1..10, mem 0.83 on a 0.02 grid) would be launched as the
    nearest grid point, which is not the deployment the user compares against. Refused
    with one line naming each value and what would have run."""
    import math

    from optuna.trial import FixedTrial

    from autospec.space import suggest, to_distribution_params

    if not space.baseline:
        return
    launched = suggest(FixedTrial(to_distribution_params(space.baseline, space)), space)
    fixed = space.server.flags
    moved = []
    for flag, wanted in space.baseline.items():
        got = launched.get(flag, fixed.get(flag))
        same = (
            math.isclose(float(wanted), float(got), abs_tol=1e-9)
            if isinstance(wanted, (int, float)) and isinstance(got, (int, float)) and not isinstance(wanted, bool)
            else wanted == got
        )
        if not same:
            moved.append(f"{flag} = {wanted!r} " + ("(not a flag of the space)" if got is None else f"(would run as {got!r})"))
    if moved:
        raise UsageError(
            f"{space.source}: [baseline] is not a point of the search space, so --baseline would launch another "
            f"configuration: {', '.join(moved)}; set [baseline] to values within [params.*] and on their step grid, "
            "or widen those parameters to hold it"
        )


def _where_args(args: argparse.Namespace) -> str:
    return (f" --storage {args.storage}" if args.storage else "") + (
        f" --studies-dir {args.studies_dir}" if args.studies_dir != "studies" else ""
    )


def _with_listed_gpus(size: ModelSize, args: argparse.Namespace) -> ModelSize:
    """`size` with the GPUs ``--gpus`` lists (distinct ones), when it is given: the most a
    larger ``--tp-size`` of this study could use."""
    from autospec.study.slots import parse_gpus

    if args.gpus is None:
        return size
    return dataclasses.replace(size, gpus=len(set(parse_gpus(args.gpus))))


def _timeout_seconds(value: float | str | None) -> float | None:
    """--timeout in seconds: argparse parsed it (`duration_arg`); text from elsewhere
    (a caller's namespace) is checked the same way."""
    if value is None or isinstance(value, (int, float)):
        return value
    try:
        return float(duration_arg("--timeout")(value))
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"--timeout {exc}") from None


def _check_numbers(args: argparse.Namespace) -> None:
    """One-line errors for numbers out of range, before anything is opened."""
    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1 (got {args.trials})")
    if args.confirm is not None and args.confirm < 0:
        raise UsageError(f"--confirm must be 0 or more relaunches (got {args.confirm}); e.g. --confirm 3")
    if args.storage_patience < 0:
        raise UsageError(f"--storage-patience {args.storage_patience:g} must be >= 0 seconds; e.g. 120")
    if args.output_len is not None and args.output_len < 1:
        raise UsageError(f"--output-len {args.output_len} must be at least 1 token; e.g. --output-len 256")
    if args.ready_timeout is not None and not args.ready_timeout > 0:
        raise UsageError(f"--ready-timeout {args.ready_timeout:g} must be > 0 seconds; e.g. --ready-timeout 1800")


def _space_of(args: argparse.Namespace) -> SearchSpace:
    """The search space with the command line's overrides (flags, command, levels, length)."""
    flags: dict[str, Any] = parse_flag_overrides(args.flag)
    origins = flag_override_origins(args.flag)
    if args.model_path:
        flags["model_path"] = args.model_path
        origins["model_path"] = f"--model-path {args.model_path}"
    if args.tp_size is not None:
        flags["tp_size"] = args.tp_size
        origins["tp_size"] = f"--tp-size {args.tp_size}"
    command = tuple(shlex.split(args.server_command)) if args.server_command else None
    return load_space(args.space).with_overrides(
        flags=flags,
        command=command,
        concurrency=_levels(args.concurrency),
        output_len=args.output_len,
        flag_origins=origins,
    )


def _print_answer(result: OptimizeResult, args: argparse.Namespace) -> None:
    """The closing lines: the verdict and the picks, as `autospec pareto` gives them
    (`autospec.report.answer`), and the same in optuna-dashboard's note and figure."""

    from autospec.cli.common import open_existing_study
    from autospec.cli.dashboard import publish
    from autospec.report import pick_lines
    from autospec.report.wrapping import wrap_lines

    _, study = open_existing_study(result.study_name, args.storage, Path(args.studies_dir))
    found = publish(study)
    print("verdict:")
    for line in wrap_lines(f"  {line}" for line in [*found.verdict, *pick_lines(found.data, found.picks)]):
        print(line)


def _print_result(result: OptimizeResult, args: argparse.Namespace) -> None:
    if result.launched:
        _print_answer(result, args)
    if result.stopped_because == "timeout":
        print(f"stopped at --timeout with {result.launched}/{result.target} trials; run the same command to continue")
    elif result.stopped_because == "exhausted":
        print(f"search space exhausted after {result.launched} launched trials")
    print(
        f"study {result.study_name} in {result.storage}: {result.launched} launched trials. "
        f"See the front with: autospec pareto --study {result.study_name}" + _where_args(args)
    )
