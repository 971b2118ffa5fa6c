"""`autospec bench`: benchmark one server configuration, without a study.

    autospec bench --url http://127.0.0.1:30000 --concurrency 1,4,32
    autospec bench --sim --flag speculative_algorithm=NEXTN --flag speculative_num_steps=3
    autospec bench --server-command "python -m sglang.launch_server" --model-path M --tp-size 4 \
        --flag speculative_algorithm=NEXTN --prompt-set chat --api chat --json out.json
    autospec bench --url http://127.0.0.1:30000 --precise --target-ci 0.02 --max-seconds 30

Parse -> workload and level plans -> (launch) -> measure -> table (and JSON). The
figures and their definitions are those of `autospec.metrics` (docs/benchmarking.md).
Exit codes: 0 every level passed; 1 a level failed its error threshold or the server
could not start; 2 bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from autospec.cli.common import add_sim_timing_arguments, renamed_option
from autospec.errors import UsageError

if TYPE_CHECKING:
    from autospec.bench import LevelPlan, PrecisionGoal, Workload
    from autospec.launcher import LaunchRequest
    from autospec.metrics import LevelSummary

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bench",
        help="benchmark one configuration (a running server, the simulator, or a launched SGLang)",
        description="Benchmark one server configuration at several concurrency levels and print "
        "per-request and aggregate speed, latency percentiles, accept length and errors.",
    )
    _add_server_arguments(p)
    _add_workload_arguments(p)
    _add_level_arguments(p)
    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="PATH", help="write summaries (and the setup) as JSON; '-' for stdout")
    out.add_argument("--records", metavar="PATH", help="write every request record as JSON lines")
    out.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=run)


def _add_server_arguments(p: argparse.ArgumentParser) -> None:
    """Which server: a running one, the simulator, or SGLang launched here."""
    from autospec.cli.common import add_flag_option

    target = p.add_argument_group("server (pick one)")
    where = target.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="benchmark a server that is already running, e.g. http://127.0.0.1:30000")
    where.add_argument("--sim", action="store_true", help="launch the bundled simulator with the given flags")
    where.add_argument("--server-command", help="launch SGLang with this command, e.g. 'python -m sglang.launch_server'")
    target.add_argument("--model-path", help="model to serve when launching (default 'sim' with --sim)")
    target.add_argument("--tp-size", type=int, help="tensor parallel size when launching")
    add_flag_option(target, "server flag when launching, SGLang's name (repeatable), e.g. speculative_num_steps=3")
    target.add_argument("--server-log", help="server log file when launching (default: a temporary file)")
    target.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds the server may take to start")
    target.add_argument(
        "--sim-profile",
        metavar="FILE|NAME",
        help="simulator profile: a TOML file or a bundled profile's name "
        "(default: the seed-calibrated profile; a wrong name lists the bundled ones)",
    )
    add_sim_timing_arguments(target)
    target.add_argument("--sim-noise", choices=("on", "off"), default="on", help="simulator noise (default on)")


def _add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """What the requests are."""
    load = p.add_argument_group("workload")
    load.add_argument(
        "--workload",
        choices=("synthetic", "random", "file", "builtin"),
        help="prompt source (default synthetic; implied by --prompts / --prompt-set)",
    )
    load.add_argument("--prompts", help="JSONL ({'prompt'} or {'messages'} per line) or ShareGPT JSON file")
    load.add_argument("--prompt-set", choices=("chat", "code", "summarize"), help="a built-in prompt set")
    load.add_argument(
        "--api",
        choices=("generate", "completions", "chat"),
        default="generate",
        help="native /generate (default; reports accept length) or the OpenAI endpoints",
    )
    load.add_argument("--model", help="model name for the OpenAI endpoints (default: the server's first)")
    load.add_argument("--input-len", type=int, default=32, help="prompt words for synthetic/random (default 32)")
    load.add_argument("--output-len", type=int, default=256, help="output tokens per request (default 256)")
    load.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    load.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (default 1.0)")
    load.add_argument(
        "--top-k", type=int, default=None, help="sample among the k most likely tokens (default: unset, every token)"
    )
    load.add_argument("--no-ignore-eos", action="store_true", help="let requests stop at end-of-sequence")
    load.add_argument("--prompt-seed", type=int, default=0, help="prompt order / random prompt seed (default 0)")
    renamed_option(load, "--seed", "--prompt-seed", type=int)


def _add_level_arguments(p: argparse.ArgumentParser) -> None:
    """The concurrency levels and how long each is measured."""
    levels = p.add_argument_group("levels")
    levels.add_argument("--concurrency", default="1,32", help="comma-separated levels (default 1,32)")
    count = levels.add_mutually_exclusive_group()
    count.add_argument("--num-requests", type=int, help="requests per level (default 2 x C, 4 at C=1)")
    count.add_argument("--duration", type=float, help="seconds per level instead of a request count")
    warmup = levels.add_mutually_exclusive_group()
    warmup.add_argument("--warmup", type=int, default=0, help="warmup requests before each level (excluded)")
    warmup.add_argument(
        "--warmup-waves",
        type=int,
        help="warmup waves of C requests before each level at C, as `autospec optimize` warms up ([bench] warmup_requests)",
    )
    levels.add_argument(
        "--warmup-output-len", type=int, default=0, help="output tokens of a warmup request (default: the workload's)"
    )
    levels.add_argument(
        "--stagger",
        action="store_true",
        help="start each level above C=1 phase-spread: worker i's first request asks for (i+1)/C of the "
        "output tokens, so requests end spread out as under steady traffic, not in lockstep waves "
        "(studies start in lockstep; docs/benchmarking.md)",
    )
    levels.add_argument(
        "--freeze-gc",
        action="store_true",
        help="after each level's warmup, ask the server to freeze its garbage collectors (SGLang's "
        "POST /freeze_gc; what `autospec optimize` does by default: [bench] freeze_gc)",
    )
    levels.add_argument(
        "--request-timeout", type=float, default=600.0, metavar="SECONDS", help="seconds one request may take (default 600)"
    )
    renamed_option(levels, "--timeout", "--request-timeout", type=float)
    levels.add_argument(
        "--max-error-rate", type=float, default=0.05, help="a level with a larger failed share fails (default 0.05)"
    )
    levels.add_argument(
        "--adaptive", action="store_true", help="repeat each level until the 95%% intervals are within --target-ci"
    )
    levels.add_argument(
        "--target-ci", type=float, default=0.02, help="adaptive: interval half-width as a share of the value (default 0.02)"
    )
    levels.add_argument("--max-repeats", type=int, default=6, help="adaptive: most runs per level (default 6)")
    levels.add_argument(
        "--precise",
        action="store_true",
        help="keep each level running past its request count until the 95%% intervals of per-request "
        "and aggregate tok/s are within --target-ci, or --max-seconds or --max-requests is reached "
        "(one run per level: one ramp-up, one drain)",
    )
    levels.add_argument(
        "--max-seconds", type=float, default=30.0, help="precise: most seconds one level may measure (default 30)"
    )
    levels.add_argument("--max-requests", type=int, help="precise: most requests one level may send (default 128 x C)")


# ---------------------------------------------------------------- argument -> objects


def workload_from_args(args: argparse.Namespace) -> Workload:
    from autospec.bench import Workload

    kind = args.workload or ("file" if args.prompts else "builtin" if args.prompt_set else "synthetic")
    if (args.prompts and kind != "file") or (args.prompt_set and kind != "builtin"):
        raise UsageError("--prompts needs --workload file and --prompt-set needs --workload builtin; drop --workload")
    return Workload(
        kind=kind,
        input_len=args.input_len,
        output_len=args.output_len,
        temperature=args.temperature,
        top_p=args.top_p,
        ignore_eos=not args.no_ignore_eos,
        api=args.api,
        path=args.prompts,
        name=args.prompt_set,
        seed=args.prompt_seed,
        top_k=args.top_k,
    )


def plans_from_args(args: argparse.Namespace) -> list[LevelPlan]:
    from autospec.bench import LevelPlan
    from autospec.cli.common import parse_concurrency

    if args.max_error_rate < 0 or args.max_error_rate > 1:
        raise UsageError(f"--max-error-rate {args.max_error_rate} must be within 0..1; e.g. 0.05")
    if not args.request_timeout > 0:
        raise UsageError(f"--request-timeout {args.request_timeout:g} must be > 0; pass seconds per request, e.g. 600")
    if args.precise and (args.adaptive or args.duration is not None):
        raise UsageError("--precise runs each level open-ended from its request count; drop --adaptive and --duration")
    if args.precise and not 0 < args.target_ci < 1:
        raise UsageError(f"--target-ci {args.target_ci} must be within (0, 1); e.g. 0.02 for +-2%")
    if args.precise and args.max_seconds < 0:
        raise UsageError(f"--max-seconds {args.max_seconds} must be >= 0")
    if args.warmup < 0 or (args.warmup_waves is not None and args.warmup_waves < 0) or args.warmup_output_len < 0:
        raise UsageError("--warmup, --warmup-waves and --warmup-output-len must be >= 0; use 0 for none")
    return [
        LevelPlan(
            c,
            num_requests=args.num_requests,
            duration_s=args.duration,
            warmup_requests=args.warmup if args.warmup_waves is None else args.warmup_waves * c,
            warmup_output_len=args.warmup_output_len,
            freeze_gc=args.freeze_gc,
            stagger=args.stagger,
        )
        for c in parse_concurrency(args.concurrency)
    ]


def launch_request_from_args(args: argparse.Namespace, log_path: Path) -> LaunchRequest:
    from autospec.cli.common import parse_flag_overrides
    from autospec.launcher import LaunchRequest

    flags = parse_flag_overrides(args.flag)
    if args.model_path:
        flags["model_path"] = args.model_path
    if args.tp_size:
        flags["tp_size"] = args.tp_size
    if args.sim:
        from autospec.cli.wiring import sim_command

        flags.setdefault("model_path", "sim")
        command = list(
            sim_command(
                profile=args.sim_profile,
                load_seconds=args.sim_load_seconds,
                warmup_seconds=args.sim_warmup_seconds,
                time_scale=args.sim_time_scale,
                noise=args.sim_noise == "on",
            )
        )
    else:
        command = shlex.split(args.server_command)
        if not command:
            raise UsageError("--server-command is empty; e.g. --server-command 'python -m sglang.launch_server'")
        if command[0] in ("python", "python3"):
            command[0] = sys.executable
        if "model_path" not in flags:
            raise UsageError("launching SGLang needs --model-path (or --flag model_path=...)")
    return LaunchRequest(command=tuple(command), flags=flags, log_path=log_path, ready_timeout_s=args.ready_timeout)


# ---------------------------------------------------------------- measuring


def precision_goal(plan: LevelPlan, args: argparse.Namespace) -> PrecisionGoal:
    """--precise: per-request and aggregate tok/s to --target-ci, from the plan's request
    count (the floor) up to --max-requests or --max-seconds of this level."""
    from autospec.bench import Figure, PrecisionGoal
    from autospec.config import DEFAULT_MAX_WAVES

    floor = plan.request_limit
    assert floor is not None  # --precise refuses --duration, so every plan counts its requests
    ceiling = args.max_requests or DEFAULT_MAX_WAVES * plan.concurrency
    if ceiling < floor:
        raise UsageError(f"--max-requests {ceiling} is below the level's {floor} requests; raise it")
    figures = (Figure("output_tok_s", args.target_ci), Figure("agg_output_tok_s", args.target_ci))
    return PrecisionGoal(
        figures, min_requests=floor, max_requests=ceiling, cap_s=args.max_seconds, max_error_rate=args.max_error_rate
    )


async def _measure(
    url: str, workload: Workload, plans: list[LevelPlan], args: argparse.Namespace, out: TextIO, log_path: str | None = None
) -> list[dict[str, Any]]:
    from autospec.bench import (
        AcceptTracker,
        AdaptiveSettings,
        BenchClient,
        run_level_adaptive_with,
        run_level_precise_with,
        run_level_with,
    )
    from autospec.metrics import summarize, with_accept_length

    levels: list[dict[str, Any]] = []
    settings = None
    if args.adaptive:
        settings = AdaptiveSettings(
            target_rel_half_width=args.target_ci,
            max_repeats=args.max_repeats,
            min_repeats=min(2, args.max_repeats),
            max_error_rate=args.max_error_rate,
        )
    async with BenchClient(url, workload, model=args.model, timeout_s=args.request_timeout) as client:
        await client.resolve_model()
        tracker = AcceptTracker(client, log_path)
        for plan in plans:
            await tracker.begin()
            if settings is not None:
                adaptive = await run_level_adaptive_with(client, plan, settings)
                results, summary, note = list(adaptive.results), adaptive.summary, adaptive.reason
            elif args.precise:
                precise = await run_level_precise_with(client, plan, precision_goal(plan, args))
                results, summary = [precise.result], precise.summary
                note = f"{precise.stop.reason}: {precise.stop.detail}"
            else:
                result = await run_level_with(client, plan)
                results, summary, note = [result], summarize(result, max_error_rate=args.max_error_rate), None
            estimate = await tracker.end(results)
            if estimate is not None:
                summary = with_accept_length(summary, estimate.value, estimate.source)
            levels.append({"plan": plan, "results": results, "summary": summary, "note": note})
            if not args.quiet:
                print(
                    f"autospec: C={plan.concurrency} done: {summary.n_ok} ok, {summary.n_errors} failed"
                    + (f" ({note})" if note else ""),
                    file=sys.stderr,
                )
    return levels


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _pm(value: float, interval: tuple[float, float]) -> str:
    if math.isnan(value):
        return "-"
    lo, hi = interval
    if math.isnan(lo) or math.isnan(hi):
        return f"{value:.1f}"
    return f"{value:.1f} ±{(hi - lo) / 2:.1f}"


def _steady(s: LevelSummary) -> str:
    if math.isnan(s.steady_share):
        return "-"
    text = f"{s.steady_share:.0%}" + (" short" if s.steady_short else "")
    text += f", {s.steady_slices} waves" if s.agg_ci_method in ("batch-means", "short-window") else ""
    return text + (f", after {s.steady_transient_s:.1f} s stall" if s.steady_transient_s > 0 else "")


def render_table(levels: list[dict[str, Any]]) -> str:
    from autospec.cli.render import table

    headers = [
        "C",
        "n",
        "ok",
        "err",
        "per-req tok/s",
        "decode tok/s",
        "agg tok/s",
        "steady",
        "whole tok/s",
        "TTFT p50/p99 ms",
        "TPOT p50 ms",
        "ITL p50 ms",
        "accept",
        "status",
    ]
    rows = []
    for level in levels:
        s = level["summary"]
        accept = _fmt(s.accept_length, 2)
        if s.accept_length is not None and s.accept_length_source not in (None, "response"):
            accept += f" ({s.accept_length_source})"
        status = "FAILED" if s.failed else "ok"
        if s.stop_reason and not s.failed:
            status += f", {s.stop_reason}"
        if s.gc_frozen is False:
            status += ", GC not frozen (no /freeze_gc)"
        rows.append(
            [
                s.concurrency,
                s.n_requests,
                s.n_ok,
                s.n_errors,
                _pm(s.output_tok_s, s.output_tok_s_ci),
                _fmt(s.decode_tok_s),
                _pm(s.agg_output_tok_s, s.agg_output_tok_s_ci),
                _steady(s),
                _fmt(s.agg_output_tok_s_whole),
                f"{_fmt(s.ttft_ms_p50)}/{_fmt(s.ttft_ms_p99)}",
                _fmt(s.tpot_ms_p50, 2),
                _fmt(s.itl_ms_p50, 2),
                accept,
                status,
            ]
        )
    legend = (
        "per-req = completion tokens / (done - sent), mean over requests; agg = tokens per second while C "
        "requests were in flight, ramp-up, drain and a one-off stall left out (steady = the share of the level "
        "at full concurrency, 'after N s stall' = the seconds of it left out for a one-off stall; "
        "whole = all tokens / level wall time; N waves = whole waves the steady window held); ± = half-width "
        "of the 95% interval (t over requests; agg: batch means over waves, or with under 3 waves sub-wave "
        "slices and a bootstrap over the window's requests; t over repeat runs); accept in () came from the "
        "server, not the responses"
    )
    return table(headers, rows, align_right=[True] * 13 + [False]) + "\n" + legend


def report_json(levels: list[dict[str, Any]], workload: Workload, server: dict[str, Any]) -> dict[str, Any]:
    import dataclasses

    return {
        "workload": workload.as_dict(),
        "server": server,
        "levels": [
            {
                "plan": dataclasses.asdict(level["plan"]),
                "summary": level["summary"].as_dict(),
                "repeats": len(level["results"]),
                "adaptive": level["note"] if not level["summary"].stop_reason else None,
                "precision": level["note"] if level["summary"].stop_reason else None,
            }
            for level in levels
        ],
    }


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from autospec.bench import prompts

    out = out or sys.stdout
    workload = workload_from_args(args)
    prompts(workload, 1)  # a bad prompt file fails here, before any server starts
    plans = plans_from_args(args)
    running = None
    server_info: dict[str, Any] = {"url": args.url}
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UsageError(f"--url {args.url!r} is not an http(s) URL; e.g. http://127.0.0.1:30000")
    if not args.url:
        from autospec.cli.wiring import default_probe
        from autospec.launcher import Launcher, NullGpuProbe

        if args.server_log:
            log_path = Path(args.server_log)
        else:
            log_path = Path(tempfile.mkdtemp(prefix="autospec-bench-")) / "server.log"
        request = launch_request_from_args(args, log_path)
        if not args.quiet:
            print(f"autospec: starting the server (log: {log_path})", file=sys.stderr)
        running = Launcher(probe=NullGpuProbe() if args.sim else default_probe()).start(request)
        server_info = {
            "url": running.url,
            "argv": list(running.argv),
            "log_path": str(log_path),
            "startup": running.startup.as_dict(),
        }
    try:
        levels = asyncio.run(_measure(server_info["url"], workload, plans, args, out, server_info.get("log_path")))
    finally:
        if running is not None:
            running.stop()
    print(render_table(levels), file=out)
    payload = report_json(levels, workload, server_info)
    if args.json == "-":
        print(json.dumps(payload, indent=2), file=out)
    elif args.json:
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    if args.records:
        with open(args.records, "w", encoding="utf-8") as f:
            for level in levels:
                for repeat, result in enumerate(level["results"]):
                    for record in result.records:
                        line = {"concurrency": result.concurrency, "repeat": repeat, **record.as_dict()}
                        f.write(json.dumps(line) + "\n")
    failed = [level["summary"] for level in levels if level["summary"].failed]
    for s in failed:
        print(f"autospec: level C={s.concurrency} failed: {s.failed_reason}", file=sys.stderr)
    return 1 if failed else 0
