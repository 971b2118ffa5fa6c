"""The simulator in-process: what a real ``optimize --sim`` launch would answer,
deterministically and in milliseconds (no server process, no HTTP), and the noiseless truth
the benchmarks value studies with.

Usage (from a script in benchmarks/, which has this folder on sys.path):

    from _simulated import PredictedOracle, run_study, true_values
    study = run_study(load_space("default"), seed=1, n_trials=20, studies_dir=tmp)
    ref = true_values(load_profile(), space, {**space.server.flags, **candidate})

`run_study` runs the product's study (`autospec.study.building.build_run`) with the
product's `TrialChain`, whose launcher, bench and clock are simulated
(`_simulated_chain.simulated_chain`). What is the real thing, reused in-process here:
  - the simulator's argument parser (``autospec.sim.args``), resolver (``resolve_args``),
    memory model (``init_outcome``), ``server_args`` line and start-up sequence
    (``autospec.sim.startup.Startup``, driven with a zero time scale), so the server log
    holds the lines a real launch prints;
  - the launcher's own ``parse_startup`` and ``classify_failure`` on that log;
  - the simulator's noiseless ``predict`` for the truth (`PredictedOracle`).
What is modelled (the constants below): GPU seconds of a launch and its teardown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import math
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autospec.feasibility.sim_preflight import ResolverAnswers
from autospec.launcher import classify_failure, flag_words, parse_startup
from autospec.sim import ArgumentRejected, classify_prompt, init_outcome, resolve_args
from autospec.sim import args as sim_args
from autospec.sim import logs as sim_logs
from autospec.sim.faults import Faults
from autospec.sim.gpu_state import GpuStateFile
from autospec.sim.parsing import count_tokens
from autospec.sim.predict import _replay as replay_requests  # the noiseless per-request replay
from autospec.sim.predict import noiseless_emit, predict
from autospec.sim.profile import Profile, load_profile
from autospec.sim.server import ServerSetup
from autospec.sim.server_args import build_server_args
from autospec.sim.startup import Startup

__all__ = [
    "SimLaunch",
    "PredictedOracle",
    "InProcessSimPreflight",
    "simulate_launch",
    "startable",
    "true_values",
    "run_study",
    "sim_command",
    "PREDICTABLE_METRICS",
    "TEARDOWN_SECONDS",
    "FAILED_TEARDOWN_SECONDS",
    "REJECT_SECONDS",
]

# ----------------------------------------------------------------------------- constants

#: Stopping a served SGLang server: SIGTERM to the group, draining, process exit, CUDA
#: context release (the launcher waits for GPU memory and port). A few seconds on a GPU host.
TEARDOWN_SECONDS = 5.0
#: Teardown after a failed start: the server already died (SIGKILL by SGLang's own failure
#: chain); the launcher only waits for the GPU memory and the port to be released.
FAILED_TEARDOWN_SECONDS = 2.0
#: A rejected argument list (argparse exit 2, or SGLang's resolver exit 1): interpreter
#: start and imports, then the argument checks, before any GPU work.
REJECT_SECONDS = 3.0
#: Where along the load the real simulator dies (autospec/sim/startup.py): weights OOM
#: after 0.7 x load; KV pool after 0.7 + 0.05; graph capture failure after the KV pool and
#: 0.1 x load of capture (0.85); any other init failure at the KV-pool point.
FAIL_AT_FRACTION = {"weights_oom": 0.7, "kv_pool_too_small": 0.75, "cuda_graph_oom": 0.85, "invalid_draft_tree": 0.85}
OTHER_FAIL_AT_FRACTION = 0.75
#: Shares of the load in the log's timing lines (autospec/sim/startup.py, at time scale 1).
WEIGHTS_SHARE, GRAPH_SHARE = 0.7, 0.25
#: The port written into the argv (a real launch picks a free one; nothing binds here).
SIM_PORT = 30000
#: The pid written into the failure chain's ``kill_process_tree`` line.
SIM_PID = 4242
HOST = "127.0.0.1"

#: Metrics the simulated chain supplies (autospec metric names): from `predict`'s figures,
#: and per-request percentiles from the same noiseless scheduler replay that `predict`
#: runs (``autospec.sim.predict._replay``). Not predictable: itl_ms_* (chunk gaps).
PREDICTABLE_METRICS = (
    "output_tok_s",
    "agg_output_tok_s",
    "decode_tok_s",
    "ttft_ms_mean",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "tpot_ms_mean",
    "tpot_ms_p50",
    "tpot_ms_p90",
    "tpot_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p90",
    "e2e_ms_p99",
    "accept_length",
    "error_rate",
)

# ----------------------------------------------------------------------------- compat


def sim_command(
    profile: Profile | None = None, *, load_seconds: float | None = None, warmup_seconds: float | None = None
) -> tuple[str, ...]:
    """``python -m autospec.sim ...`` as ``optimize --sim`` builds it (time scale 1; the
    profile as an absolute path unless it is the default). Recorded in ``server_args``."""
    command = [sys.executable, "-m", "autospec.sim"]
    for flag, seconds in (("--sim-load-seconds", load_seconds), ("--sim-warmup-seconds", warmup_seconds)):
        if seconds is not None:
            command += [flag, f"{seconds:g}"]
    command += ["--sim-time-scale", "1"]
    if profile is not None and Path(profile.source).resolve() != Path(load_profile().source).resolve():
        command += ["--sim-profile", str(Path(profile.source).resolve())]
    return tuple(command)


def _sim_options(command: Sequence[str]) -> list[str]:
    """The ``--sim-*`` words of a ``python -m autospec.sim`` command (empty otherwise)."""
    command = list(command)
    return command[command.index("autospec.sim") + 1 :] if "autospec.sim" in command else []


_PARSER: list[Any] = []
_BUILD_PARSER = sim_args.build_parser  # the original, before `_parse` patches the name


def _cached_parser() -> Any:
    """The simulator's argparse parser, built once (building it is most of a parse's
    cost; `parse_args` does not change a parser, so one serves every call)."""
    if not _PARSER:
        _PARSER.append(_BUILD_PARSER())
    return _PARSER[0]


def _parse(words: Sequence[str]) -> tuple[Any | None, str]:
    """The simulator's own `parse_command_line` on `words` (its parser built once): the
    CommandLine and "", or None and what argparse printed on stderr when it exits (as
    SGLang's parser does, exit 2)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), _patched(sim_args, "build_parser", _cached_parser):
            return sim_args.parse_command_line(list(words), environ={}), ""
    except SystemExit:
        return None, err.getvalue()


# ----------------------------------------------------------------------------- preflight


class InProcessSimPreflight(ResolverAnswers):
    """The simulator's resolver as a preflight oracle, in-process: the same answers as
    `autospec.feasibility.sim_preflight.SimPreflight` (which runs ``python -m
    autospec.sim.resolve`` per argv), the profile's SGLang version included."""

    batch_saves_time = False  # as SimPreflight: no batch to save an interpreter start on

    def __init__(self, profile: Profile, command: Sequence[str] = ()) -> None:
        super().__init__()
        self.profile = profile
        self._options = _sim_options(command)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def sglang_version(self) -> str:
        return self.profile.sglang_version

    def _resolve(self, argv: list[str]) -> dict[str, Any]:
        """`autospec.sim.resolve.main` + `SimPreflight._resolve`, without the subprocess."""
        cmd, err = _parse(self._options + argv)
        if cmd is None:
            tail = (err.strip().splitlines() or ["no output"])[-1]
            return {"ok": False, "error": tail, "sglang_version": None}
        try:
            cfg = resolve_args(self.profile, cmd.flags)
        except ArgumentRejected as exc:
            return {"ok": False, "error": str(exc), "sglang_version": self.profile.sglang_version}
        resolved = json.loads(json.dumps(cfg.as_dict(), default=str))
        return {"ok": True, "resolved": resolved, "sglang_version": self.profile.sglang_version}


# ----------------------------------------------------------------------------- one launch


@dataclass
class SimLaunch:
    """What starting the simulator with some flags ends in.

    ``kind`` is "ok" or the launcher's failure kind (``classify_failure`` on the log);
    ``error`` the launcher's `LaunchError` for a failure; ``startup`` the launcher's
    `StartupFacts` (timing facts replaced by the modelled ones) for a success; ``seconds``
    the modelled time from spawn to ready (or to death); ``flags`` what the simulator
    parsed from the argv (None when argparse refused it); ``cfg``/``outcome`` the model's."""

    kind: str
    argv: list[str]
    log_text: str
    seconds: float
    flags: dict[str, Any] | None = None
    cfg: Any = None
    outcome: Any = None
    startup: Any = None
    error: Any = None
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def simulate_launch(
    profile: Profile,
    flags: Mapping[str, Any],
    *,
    command: Sequence[str] = (),
    load_seconds: float | None = None,
    warmup_seconds: float | None = None,
    log_path: Path | str | None = None,
) -> SimLaunch:
    """Start the simulator with `flags` (the full server flags) in-process.

    Mirrors ``python -m autospec.sim`` (its ``__main__``: argparse, resolver, notes, the
    ``server_args`` line, then `Startup`), with `profile` in place of ``--sim-profile``.
    `load_seconds`/`warmup_seconds` (default: the profile's) drive the modelled seconds
    and the log's timing facts. `log_path` only goes into a failure's message, as the
    real launcher's does. ``argv`` is redacted as the launcher stores it. A configuration
    the server refuses is a failed launch; flag names or values the launcher itself
    cannot turn into argv raise its UsageError, as in the real chain."""
    load = profile.load_seconds if load_seconds is None else load_seconds
    warmup = profile.warmup_seconds if warmup_seconds is None else warmup_seconds
    words = flag_words(flags) + ["--host", HOST, "--port", str(SIM_PORT)]
    argv = _redacted(list(command) + words if command else words, flags)
    out = io.StringIO()
    log = sim_logs.SglangLog(out)

    cmd, err = _parse(words)
    if cmd is None:  # argparse: usage + error on stderr, exit 2
        out.write(err)
        return _failed(argv, out.getvalue(), 2, REJECT_SECONDS, log_path)
    try:
        cfg = resolve_args(profile, cmd.flags)
    except ArgumentRejected as exc:  # SGLang's resolver: traceback, exit 1
        if cmd.flags.get("speculative_algorithm") and cmd.flags.get("max_running_requests") is None:
            log.info(sim_logs.MAX_RUNNING_RESET)
        if sim_logs.uses_resolve_once(profile.sglang_version):
            log.info(sim_logs.kill_process_tree(SIM_PID, include_parent=False))
        algorithm = str(cmd.flags.get("speculative_algorithm") or "").upper() or None
        log.raw(sim_logs.argument_error_traceback(exc.traceback_line, profile.sglang_version, algorithm=algorithm))
        return _failed(argv, out.getvalue(), 1, REJECT_SECONDS, log_path, flags=cmd.flags)
    for note in cfg.notes:
        log.info(note)
    outcome = init_outcome(profile, cfg)
    seed = cmd.sim.seed if cmd.sim.seed is not None else profile.seed
    server_args = build_server_args(profile, cfg, cmd, seed)
    log.info(sim_logs.format_server_args(server_args))
    ready = _run_startup(profile, cfg, outcome, server_args, cmd, seed, out)
    text = out.getvalue()
    if not ready:
        seconds = FAIL_AT_FRACTION.get(outcome.status, OTHER_FAIL_AT_FRACTION) * load
        launch = _failed(argv, text, -9, seconds, log_path, flags=cmd.flags)  # SGLang SIGKILLs itself
        launch.cfg, launch.outcome = cfg, outcome
        return launch
    facts = parse_startup(text)
    facts = dataclasses.replace(
        facts,
        weight_load_seconds=round(WEIGHTS_SHARE * load, 3) if facts.weight_load_seconds is not None else None,
        cuda_graph_seconds=round(GRAPH_SHARE * load, 3) if facts.cuda_graph_seconds is not None else None,
        ready_seconds=round(load + warmup, 3),  # the launcher measures spawn -> ready
    )
    return SimLaunch("ok", argv, text, load + warmup, flags=dict(cmd.flags), cfg=cfg, outcome=outcome, startup=facts)


def _redacted(argv: list[str], flags: Mapping[str, Any]) -> list[str]:
    """`argv` with secret flag values replaced, as the launcher stores ``server_args``."""
    import os

    from autospec.launcher.request import LaunchRequest, Redactor

    request = LaunchRequest(command=("server",), flags=flags, log_path=Path(os.devnull))
    return Redactor.for_launch(request, {}).argv(argv)


def _failed(
    argv: list[str],
    text: str,
    returncode: int,
    seconds: float,
    log_path: Path | str | None,
    *,
    flags: Mapping[str, Any] | None = None,
) -> SimLaunch:
    error = classify_failure(text, returncode, timed_out=False, log_path=log_path, seconds=round(seconds, 3))
    return SimLaunch(
        error.kind, argv, text, seconds, flags=dict(flags) if flags is not None else None, error=error, returncode=returncode
    )


def _run_startup(
    profile: Profile, cfg: Any, outcome: Any, server_args: dict[str, Any], cmd: Any, seed: int, stream: io.StringIO
) -> bool:
    """The simulator's start-up sequence (`Startup.run`) at time scale 0 into `stream`;
    True when it reached readiness. `die` writes SGLang's failure chain as
    `SimServer.die` does (without killing anything)."""
    setup = ServerSetup(
        profile=profile,
        cfg=cfg,
        outcome=outcome,
        server_args=server_args,
        host=cmd.host,
        port=cmd.port,
        served_model_name=str(server_args["served_model_name"]),
        model_path=cfg.model_path,
        time_scale=0.0,
        noise=False,
        seed=seed,
        load_seconds=0.0,
        warmup_seconds=0.0,
        faults=Faults(),
        state_dir=None,
        cmdline="python -m autospec.sim",
        disable_cuda_graph=bool(cmd.flags.get("disable_cuda_graph")),
    )
    log = sim_logs.SglangLog(stream, rank_prefix=" TP0" if cfg.tp_size > 1 else "")
    ready: list[bool] = []

    def die(frames: list, error_line: str) -> None:
        lines = sim_logs.scheduler_traceback(frames, error_line)
        log.rank(lines[0])
        log.raw(lines[1:])
        log.info(sim_logs.SIGQUIT_FROM_CHILD)
        log.info(sim_logs.kill_process_tree(SIM_PID, include_parent=True))

    startup = Startup(setup, log, GpuStateFile(None), die=die, on_ready=lambda: ready.append(True))
    _drive(startup.run())
    return bool(ready)


def _drive(coro: Any) -> None:
    """Run a coroutine whose only awaits are zero-length sleeps, without an event loop."""
    try:
        while True:
            if coro.send(None) is not None:
                coro.close()
                raise RuntimeError("the simulator's start-up awaited a real event; cannot run it in-process")
    except StopIteration:
        return


# ----------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class LevelFigures:
    """Noiseless figures of one concurrency level: metric name -> value (NaN where the
    real benchmark could not form it), and the level's modelled wall seconds."""

    concurrency: int
    num_requests: int
    metrics: dict[str, float]
    seconds: float


class PredictedOracle:
    """Noiseless answers for one profile and one search space (cached per configuration):
    does it start (`startable`), and what would the benchmark measure (`level`,
    `true_values`)? Values come from `autospec.sim.predict.predict`; see `level`.

    `steady_waves` > 0: ``agg_output_tok_s`` is predicted over at least that many waves of
    the level's concurrency instead of the level's own requests. The tool's bench reports
    the steady window of a level (`autospec.metrics.steady`: ramp-up and drain left out),
    which the whole-level aggregate of a short level is not: 64 requests at C=32 on a
    server that runs 21 at once end with a wave of one request and read 11% below the
    steady rate (seed profile, steps 3, mem 0.92). 0 (the default): the whole level, as
    before."""

    def __init__(self, profile: Profile | None, space: Any, steady_waves: int = 0) -> None:
        self.profile = profile or load_profile()
        self.space = space
        self.steady_waves = int(steady_waves)
        self._check_metrics()
        self._launches: dict[str, SimLaunch] = {}
        self._levels: dict[tuple[str, int, bool], LevelFigures] = {}
        self._prompts: dict[tuple[int, int], tuple[str, int]] = {}

    def _check_metrics(self) -> None:
        for spec in (*self.space.objectives, *self.space.constraints):
            if spec.metric not in PREDICTABLE_METRICS:
                raise ValueError(
                    f"{spec.name}: the simulated chain cannot predict {spec.metric!r}; "
                    f"it knows {', '.join(PREDICTABLE_METRICS)} (run a real --sim study for the others)"
                )
        if not self.space.workload.ignore_eos:
            warnings.warn(
                "workload ignore_eos=false: the real simulator stops requests at seeded EOS positions; "
                "the simulated chain assumes every request runs to output_len",
                stacklevel=3,
            )

    @staticmethod
    def _key(flags: Mapping[str, Any]) -> str:
        return json.dumps(dict(flags), sort_keys=True, default=str)

    def full_flags(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """The space's fixed server flags with `flags` (a candidate or full flags) on top."""
        return {**self.space.server.flags, **flags}

    def launch(self, flags: Mapping[str, Any], **kwargs: Any) -> SimLaunch:
        """`simulate_launch` of the full `flags`, cached (kwargs bypass the cache)."""
        if kwargs:
            return simulate_launch(self.profile, flags, **kwargs)
        key = self._key(flags)
        if key not in self._launches:
            self._launches[key] = simulate_launch(self.profile, flags)
        return self._launches[key]

    def startable(self, flags: Mapping[str, Any]) -> bool:
        """True when the server would start with these full flags."""
        return self.launch(flags).ok

    def prompt_workload(self, num_requests: int, seed_offset: int = 0) -> tuple[str, int]:
        """(simulator workload name, mean prompt tokens) of the prompts the benchmark sends,
        classified as the simulator's API classifies each prompt. ValueError if mixed."""
        key = (num_requests, seed_offset)
        if key not in self._prompts:
            spec = self.space.workload
            texts = [
                ("\n".join(m["content"] for m in p.messages) if spec.api == "chat" else p.text)
                for p in _bench_prompts(spec, num_requests, seed_offset)
            ]
            kinds = sorted({classify_prompt(t) for t in texts})
            if len(kinds) != 1:
                raise ValueError(
                    f"the workload's prompts classify as several simulator workloads ({kinds}); "
                    "predict() models one kind per level"
                )
            tokens = round(sum(count_tokens(t) for t in texts) / len(texts)) if texts else spec.input_len
            self._prompts[key] = (kinds[0], max(tokens, 1))
        return self._prompts[key]

    def level(self, flags: Mapping[str, Any], concurrency: int, *, first: bool = False) -> LevelFigures:
        """Figures of one level for a configuration that starts (full flags as parsed by
        the simulator), noiseless. Mapping from `predict`'s Prediction: output_tok_s =
        per_request_tok_s, agg_output_tok_s = aggregate_tok_s, decode_tok_s, ttft_ms_mean
        = ttft_s x 1000; accept_length = completion tokens / verify passes, as the
        benchmark computes it (Prediction.accept_length is per verify pass and leaves out
        the prefill token; NaN without speculation, as the real benchmark has no
        spec_verify_ct then); error_rate 0; ttft/tpot/e2e percentiles and tpot_ms_mean
        from predict's replay (`_percentiles`; with queueing, the TTFT median is not the
        mean). Seconds: the measured span (total tokens / aggregate_tok_s), plus the
        warmup requests' span on the `first` level."""
        key = (self._key(flags), concurrency, first)
        if key in self._levels:
            return self._levels[key]
        bench, wl = self.space.bench, self.space.workload
        n = bench.num_requests(concurrency)
        kind, tokens = self.prompt_workload(n)
        common = dict(input_len=tokens, output_len=wl.output_len, temperature=wl.temperature)
        pred = predict(self.profile, flags, concurrency, kind, num_requests=n, **common)
        if not pred.ok:
            raise RuntimeError(f"predict() says {pred.init} for a configuration that started: {pred.message}")
        cfg = resolve_args(self.profile, flags)
        init = init_outcome(self.profile, cfg)
        if tokens + wl.output_len > init.context_len:
            raise ValueError(
                f"requests of {tokens}+{wl.output_len} tokens exceed the model context "
                f"({init.context_len}); "
                "the real simulator answers 400 and the simulated chain does not model request errors"
            )
        seconds = wl.output_len * n / pred.aggregate_tok_s
        if first and bench.warmup_requests:
            w = bench.warmup_requests
            warm_kind, warm_tokens = self.prompt_workload(w, seed_offset=1)
            warm = predict(
                self.profile, flags, min(concurrency, w), warm_kind, num_requests=w, **{**common, "input_len": warm_tokens}
            )
            seconds += wl.output_len * w / warm.aggregate_tok_s
        aggregate = pred.aggregate_tok_s
        if self.steady_waves > 0 and self.steady_waves * concurrency > n:
            steady = predict(self.profile, flags, concurrency, kind, num_requests=self.steady_waves * concurrency, **common)
            aggregate = steady.aggregate_tok_s
        metrics = {
            "output_tok_s": pred.per_request_tok_s,
            "agg_output_tok_s": aggregate,
            "decode_tok_s": pred.decode_tok_s if wl.output_len > 1 else math.nan,
            "ttft_ms_mean": pred.ttft_s * 1000.0,
            "accept_length": _bench_accept_length(pred.accept_length, wl.output_len) if cfg.speculative else math.nan,
            "error_rate": 0.0,
            **_percentiles(self.profile, cfg, init, pred.accept_length, concurrency, n, tokens, wl.output_len),
        }
        for name in PREDICTABLE_METRICS:
            metrics.setdefault(name, math.nan)
        figures = LevelFigures(concurrency, n, metrics, seconds)
        self._levels[key] = figures
        return figures

    def measure(self, flags: Mapping[str, Any]) -> tuple[list[float], dict[str, float]] | None:
        """(objective values in the space's order, {constraint name: violation}) for the
        full `flags`, noiselessly; None when the server would not start."""
        launch = self.launch(flags)
        if not launch.ok:
            return None
        flags = launch.flags or {}
        levels = {c: self.level(flags, c, first=(i == 0)) for i, c in enumerate(self.space.bench.concurrency)}
        values = [levels[o.concurrency].metrics[o.metric] for o in self.space.objectives]
        constraints = {c.name: c.violation(levels[c.concurrency].metrics[c.metric]) for c in self.space.constraints}
        return values, constraints

    def true_values(self, flags: Mapping[str, Any]) -> list[float] | None:
        """Noiseless objective values of a candidate (merged over the space's fixed flags),
        or None when it is rejected or does not start. Constraints are not applied."""
        measured = self.measure(self.full_flags(flags))
        return None if measured is None else measured[0]


def _percentiles(
    profile: Profile, cfg: Any, init: Any, accept: float, concurrency: int, n: int, input_len: int, output_len: int
) -> dict[str, float]:
    """ttft/tpot/e2e figures in ms as `autospec.metrics.summarize` forms them, from the
    per-request (sent, first token, done) times of predict's own noiseless replay."""
    from autospec.metrics import stats

    records = replay_requests(profile, cfg, init.max_running_requests, accept, concurrency, n, input_len, output_len)
    ttft = [(first - sent) * 1000.0 for sent, first, _ in records]
    e2e = [(done - sent) * 1000.0 for sent, _, done in records]
    tpot = [(done - first) * 1000.0 / (output_len - 1) for _, first, done in records] if output_len > 1 else []
    out = {"tpot_ms_mean": stats.mean(tpot)}
    for q in (50, 90, 99):
        out[f"ttft_ms_p{q}"] = stats.percentile(ttft, q)
        out[f"tpot_ms_p{q}"] = stats.percentile(tpot, q)
        out[f"e2e_ms_p{q}"] = stats.percentile(e2e, q)
    return out


def _bench_prompts(spec: Any, n: int, seed_offset: int = 0) -> list[Any]:
    """The first `n` prompts the benchmark sends for the space's workload (seed shifted
    by `seed_offset`: the warmup uses seed + 1)."""
    from autospec.bench.workloads import prompts

    workload = dataclasses.replace(spec, seed=spec.seed + seed_offset) if seed_offset else spec
    return prompts(workload, n)


@functools.lru_cache(maxsize=4096)
def verify_steps(per_step: float, output_len: int) -> int:
    """Verify passes of a noiseless request of `output_len` tokens whose steps emit
    `per_step` tokens on average (the first token comes from prefill): the server's
    `spec_verify_ct`."""
    remaining, acc, steps = output_len - 1, 0.0, 0
    while remaining > 0:
        k, acc = noiseless_emit(acc, per_step, remaining)
        remaining -= k
        steps += 1
    return steps


def _bench_accept_length(per_step: float, output_len: int) -> float:
    """The benchmark's accept length for noiseless steps emitting `per_step` tokens on
    average: completion tokens / verify passes."""
    steps = verify_steps(per_step, output_len)
    return output_len / steps if steps else math.nan


def startable(profile: Profile, flags: Mapping[str, Any]) -> bool:
    """True when the simulator would start with these full server flags."""
    return simulate_launch(profile, flags).ok


def true_values(profile: Profile, space: Any, flags: Mapping[str, Any]) -> list[float] | None:
    """Noiseless objective values of `flags` (a candidate or full flags; the space's fixed
    flags are put underneath), or None when rejected / not starting. For many calls, keep
    one `PredictedOracle(profile, space)` instead (it caches)."""
    return PredictedOracle(profile, space).true_values(flags)


# ----------------------------------------------------------------------------- the study


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def run_study(
    space: Any,
    *,
    seed: int,
    sampler: str = "model",
    n_trials: int = 20,
    profile: Profile | None = None,
    noise: float = 0.0,
    launch_noise: float = 0.0,
    studies_dir: Path | str,
    learn: bool = True,
    sglang_version: str | None = None,
    extra: Mapping[str, Any] | None = None,
    preflight: bool = True,
    study_name: str | None = None,
    observer: Any = None,
) -> Any:
    """Run the product's study (`build_run(...).run()`) with the simulated launcher, bench
    and clock in its `TrialChain` (`_simulated_chain.simulated_chain`), and return the
    Optuna study.

    As ``optimize --sim`` wires it: the simulator command, ``flag_words`` as argv builder,
    and (`preflight`) the simulator's resolver as preflight, run in-process
    (`InProcessSimPreflight`); `sglang_version` None takes what that preflight reports, as
    the CLI does. `noise`: each request's relative spread; `launch_noise`: the spread of a
    launch's speed (`_simulated_chain`). `extra`: further OptimizeRequest keywords (e.g.
    ``{"baseline": True, "storage": "..."}``). The study is named `study_name` (default
    ``sim-<sampler>-seed<seed>``) in `studies_dir`; an existing study of that name is
    continued, as the real loop does."""
    import functools

    import optuna
    from _simulated_chain import simulated_chain

    from autospec.study.building import build_run
    from autospec.study.request import OptimizeRequest
    from autospec.study.storage import open_storage

    profile = profile or load_profile()
    command = sim_command(profile)
    pre = InProcessSimPreflight(profile, command) if preflight else None
    version = sglang_version or (pre.sglang_version() if pre is not None else profile.sglang_version)
    name = study_name or f"sim-{sampler}-seed{seed}"
    studies_dir = Path(studies_dir)
    request = OptimizeRequest(
        space=space,
        study_name=name,
        n_trials=n_trials,
        command=command,
        studies_dir=studies_dir,
        sampler=sampler,
        seed=seed,
        preflight=pre,
        to_argv=flag_words,
        sglang_version=version,
        learn=learn,
        # search quality is measured on the search alone (reference points would take launches)
        **{"references": False, **dict(extra or {})},
    )
    oracle = PredictedOracle(profile, space)
    chain = functools.partial(simulated_chain, profile=profile, noise=noise, launch_noise=launch_noise, seed=seed, oracle=oracle)
    build_run(request, observer, make_chain=chain).run()
    handle = open_storage(request.storage, name, studies_dir)
    return optuna.load_study(study_name=name, storage=handle.storage)


def run_study_as_asked(args: Any, space: Any, profile: Profile | None, seed: int, studies_dir: Path, study_name: str) -> Any:
    """`run_study` with a benchmark's common options (`args.sampler`, `.trials`, `.noise`,
    `.launch_noise`, `.confirm`), so every script runs the in-process study the same way."""
    return run_study(
        space,
        seed=seed,
        sampler=args.sampler,
        n_trials=args.trials,
        profile=profile,
        noise=args.noise,
        launch_noise=args.launch_noise,
        studies_dir=studies_dir,
        study_name=study_name,
        extra={"confirm": args.confirm},
    )
