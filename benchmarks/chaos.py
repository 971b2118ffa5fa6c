"""Chaos: SIGKILL the tuner at random moments, run the same command again, lose nothing.

    python benchmarks/chaos.py [--kills 20] [--trials 28] [--seed 0]
                               [--storage sqlite|journal|postgresql://...] [--fault zombie_child|none]
                               [--workdir DIR] [--cycle]

Each round starts `autospec optimize --sim` as a terminal would (a subprocess leading its
own session and process group), waits for a moment of a trial and SIGKILLs the whole
group. Moments: ``launch`` (server spawned, not ready), ``benchmark`` (requests running),
``teardown`` (benchmark written, server being stopped), ``storage_write`` (server gone,
trial being written to the storage) and ``random`` (a random delay, which also hits
start-up and recovery). They are drawn at random, or taken in turn with ``--cycle``. The
servers live in sessions of their own, survive the kill and must be stopped by the next
round's recovery. By default every server also forks a child that leaves its process
group (``--fault zombie_child``), which only a launch-ID match can find.

After each kill the finished trials are snapshotted. When all kills are done the same
command runs once more to completion. Checks (exit status 1 if one fails):

- the study holds exactly ``--trials`` launched trials (COMPLETE, ``launched``);
- every trial finished at any kill is still there, unchanged (state, values, params,
  user attributes): "trials lost" counts those missing or changed;
- every FAIL trial (interrupted by a kill) has a retry, unless its parameters were given up;
- no simulator process of this run is left ("leftover processes": /proc entries whose
  command line names the work directory).

It prints kills survived, trials lost and leftover processes, then the moments hit and
the time the rounds took. `run_chaos()` is the same with a small count for the test suite
(tests/study/test_chaos.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

MOMENTS = ("launch", "benchmark", "teardown", "storage_write", "random")
STUDY = "chaos"
SPACE = """
[server.flags]
model_path = "sim-model"
speculative_algorithm = "NEXTN"
tp_size = 4
attention_backend = "triton"
page_size = 16
cuda_graph_max_bs = 32

[params.speculative_num_steps]
type = "int"
low = 1
high = 4

[params.speculative_eagle_topk]
type = "categorical"
choices = [1]

[params.speculative_num_draft_tokens]
type = "draft_tokens"

[params.mem_fraction_static]
type = "float"
low = 0.80
high = 0.90
step = 0.005

[workload]
kind = "synthetic"
output_len = 24

[bench]
concurrency = [1, 4]
requests_multiplier = 1
min_requests = 2
warmup_requests = 0

[[objectives]]
metric = "output_tok_s"
concurrency = 1

[[objectives]]
metric = "agg_output_tok_s"
concurrency = 4
"""
SIM_FLAGS = ["--sim", "--sim-load-seconds", "0.1", "--sim-time-scale", "0.2", "--quiet"]
READY_200 = 'GET /health_generate HTTP/1.1" 200'


@dataclass
class ChaosResult:
    kills: int
    trials_lost: int
    leftover_processes: int
    launched: int
    target: int
    retries_missing: int
    final_exit: int
    given_up: int = 0
    checked_finished: int = 0
    checked_complete: int = 0
    moments: Counter = field(default_factory=Counter)
    round_seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    lost_detail: list[str] = field(default_factory=list)
    missing_detail: list[str] = field(default_factory=list)
    leftover_detail: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.trials_lost == 0
            and self.leftover_processes == 0
            and self.launched == self.target
            and self.retries_missing == 0
            and self.final_exit == 0
        )


# ---------------------------------------------------------------- processes and files
def sim_processes(marker: str, servers_only: bool = False) -> dict[int, str]:
    """Running simulator processes (servers, their children, resolver runs) whose command
    line names `marker`; with `servers_only`, servers and their children only."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parts = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z" or not any(marker.encode() in p for p in parts):
            continue
        is_server = b"autospec.sim" in parts
        if is_server or (not servers_only and any(p.startswith(b"autospec.sim") for p in parts)):
            found[int(entry.name)] = b" ".join(parts).decode(errors="replace")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


class Round:
    """One run of the tuner and the trial folders it creates."""

    def __init__(self, workdir: Path, argv: list[str], env: dict[str, str]) -> None:
        self.workdir = workdir
        self.trials_dir = workdir / "studies" / f"{STUDY}-trials"
        self.before = set(self._dirs())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autospec.cli.main", *argv],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.started = time.monotonic()

    def _dirs(self) -> list[Path]:
        try:
            return sorted(p for p in self.trials_dir.iterdir() if p.is_dir())
        except OSError:
            return []

    def new_dirs(self) -> list[Path]:
        return [d for d in self._dirs() if d not in self.before]

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_for(self, predicate: Callable[[], bool], poll_s: float) -> bool:
        """True when `predicate` held; False when the tuner exited first."""
        while self.running():
            if predicate():
                return True
            time.sleep(poll_s)
        return False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    # ------------------------------------------------------------ moments
    def _nth(self, nth: int, ready: Callable[[Path], bool]) -> bool:
        """The `nth` or a later trial launched this round is `ready` (one that failed to
        start never reaches the benchmark; the next one will)."""
        return any(ready(d) for d in self.new_dirs()[nth - 1 :])

    def reach(self, moment: str, nth: int, rng: random.Random) -> bool:
        """Wait for `moment` of the `nth` trial this round launches (plus a small random
        delay inside it); False when the tuner finished before."""
        marker = str(self.workdir)
        if moment == "launch":
            hit = self.wait_for(lambda: self._nth(nth, lambda d: (d / "server.log").is_file()), 0.01)
            delay = rng.uniform(0.0, 0.8)
        elif moment == "benchmark":

            def benchmarking(d: Path) -> bool:
                text = _read(d / "server.log")
                return READY_200 in text and "POST /generate" in text.split(READY_200, 1)[1]

            hit = self.wait_for(lambda: self._nth(nth, benchmarking), 0.01)
            delay = rng.uniform(0.0, 0.15)
        elif moment == "teardown":
            hit = self.wait_for(lambda: self._nth(nth, lambda d: (d / "bench.json").is_file()), 0.005)
            delay = rng.uniform(0.0, 0.03)
        elif moment == "storage_write":
            hit = self.wait_for(
                lambda: self._nth(nth, lambda d: (d / "bench.json").is_file()) and not sim_processes(marker, True),
                0.002,
            )
            delay = rng.uniform(0.0, 0.02)
        else:
            hit = True
            delay = rng.uniform(0.5, 3.0 + 3.0 * nth)
        if not hit:
            return False
        time.sleep(delay)
        return self.running()


# ---------------------------------------------------------------- the study
def _storage_spec(storage: str, workdir: Path) -> str:
    if storage == "sqlite":
        return f"sqlite:///{workdir / 'studies' / (STUDY + '.db')}"
    if storage == "journal":
        return str(workdir / "studies" / f"{STUDY}.log")
    return storage


def _load(spec: str, workdir: Path) -> optuna.Study | None:
    from autospec.study.storage import open_storage, study_exists

    handle = open_storage(spec, STUDY, workdir / "studies")
    if not study_exists(handle, STUDY):
        return None
    return optuna.load_study(study_name=STUDY, storage=handle.storage)


def _snapshot(study: optuna.Study | None) -> dict[int, Any]:
    if study is None:
        return {}
    return {
        t.number: (t.state.name, t.values, t.params, t.user_attrs)
        for t in study.get_trials(deepcopy=True)
        if t.state.is_finished()
    }


def run_chaos(
    workdir: Path,
    *,
    kills: int,
    trials: int,
    seed: int = 0,
    storage: str = "sqlite",
    fault: str | None = "zombie_child",
    moments: tuple[str, ...] | None = None,
    nths: tuple[int, ...] = (1, 2),
    log: Callable[[str], None] = lambda line: None,
) -> ChaosResult:
    """SIGKILL the tuner `kills` times (at `moments` in turn, or random ones; in the first
    or a later trial a round launches, from `nths`, in turn with `moments` or at random),
    then finish the study and check it (see the module docstring)."""
    from autospec.study.processes.recovery import MAX_STALE_RETRIES

    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "studies").mkdir(exist_ok=True)
    (workdir / "space.toml").write_text(SPACE)
    spec = _storage_spec(storage, workdir)
    argv = [
        "optimize",
        "--space",
        str(workdir / "space.toml"),
        "--study",
        STUDY,
        "--storage",
        spec,
        "--studies-dir",
        str(workdir / "studies"),
        "--trials",
        str(trials),
        "--seed",
        str(seed),
        *SIM_FLAGS,
    ]
    env = dict(os.environ)
    env.pop("AUTOSPEC_SIM_FAULTS", None)
    if fault:
        env["AUTOSPEC_SIM_FAULTS"] = fault

    t0 = time.monotonic()
    finished: dict[int, Any] = {}
    lost: list[str] = []
    hits: Counter = Counter()
    rounds: list[float] = []
    done_kills = 0
    while done_kills < kills:
        moment = moments[done_kills % len(moments)] if moments else rng.choice(MOMENTS)
        nth = nths[done_kills % len(nths)] if moments else rng.choice(nths)
        rnd = Round(workdir, argv, env)
        reached = rnd.reach(moment, nth, rng)
        if not reached:
            code = rnd.proc.wait()
            log(f"round ended before {moment} (exit {code}); the study is complete")
            break
        rnd.kill()
        done_kills += 1
        hits[moment] += 1
        rounds.append(time.monotonic() - rnd.started)
        now = _snapshot(_load(spec, workdir))
        for number, data in finished.items():
            if now.get(number) != data:
                lost.append(f"trial {number} changed or vanished after kill {done_kills}")
        for number, data in now.items():
            finished.setdefault(number, data)
        measured = sum(1 for state, _, _, attrs in now.values() if state == "COMPLETE" and attrs.get("launched"))
        log(
            f"kill {done_kills:2d} at {moment:<13} of trial {nth} of the round after {rounds[-1]:5.1f}s; "
            f"finished trials: {len(now)} ({measured} launched and stored)"
        )

    final = Round(workdir, argv, env)
    try:
        final_exit = final.proc.wait(timeout=1200)
    except subprocess.TimeoutExpired:
        final.kill()
        final_exit = -1
    final_err = final.proc.stderr.read() if final.proc.stderr else ""
    if final_exit != 0:
        log(f"final run exited {final_exit}: {final_err.strip()[-500:]}")

    study = _load(spec, workdir)
    now = _snapshot(study)
    for number, data in finished.items():
        if now.get(number) != data:
            lost.append(f"trial {number} changed or vanished by the end")
    trials_now = study.get_trials(deepcopy=False) if study is not None else []
    launched = sum(1 for t in trials_now if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("launched"))
    retried = {t.user_attrs.get("retry_of") for t in trials_now}
    by_number = {t.number: t for t in trials_now}

    def given_up(t: optuna.trial.FrozenTrial) -> bool:
        depth = 0
        current_or_none: optuna.trial.FrozenTrial | None = t
        while current_or_none is not None and current_or_none.user_attrs.get("outcome") in ("stale", "orphaned"):
            depth += 1
            retry_of = current_or_none.user_attrs.get("retry_of")
            current_or_none = by_number.get(retry_of) if retry_of is not None else None
        return depth > MAX_STALE_RETRIES

    def chosen(t: optuna.trial.FrozenTrial) -> bool:  # killed before any parameter: nothing to retry
        return bool(t.params) or bool(t.system_attrs.get("fixed_params"))

    failed = [t for t in trials_now if t.state == optuna.trial.TrialState.FAIL and t.number not in retried and chosen(t)]
    missing = [t.number for t in failed if not given_up(t)]
    missing_detail = [
        f"trial {n} ({by_number[n].user_attrs.get('outcome')}) has no retry: {by_number[n].params}" for n in missing
    ]
    leftovers = sim_processes(str(workdir))
    return ChaosResult(
        kills=done_kills,
        trials_lost=len(set(lost)),
        leftover_processes=len(leftovers),
        launched=launched,
        target=trials,
        retries_missing=len(missing),
        final_exit=final_exit,
        moments=hits,
        round_seconds=rounds,
        given_up=len(failed) - len(missing),
        checked_finished=len(finished),
        checked_complete=sum(1 for state, _, _, attrs in finished.values() if state == "COMPLETE" and attrs.get("launched")),
        wall_seconds=time.monotonic() - t0,
        lost_detail=sorted(set(lost)),
        leftover_detail=leftovers,
        missing_detail=missing_detail,
    )


def main(argv: list[str] | None = None) -> int:
    from autospec.study.processes.recovery import MAX_STALE_RETRIES

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--trials", type=int, default=None, help="target launched trials (default: 2 x kills)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--storage", default="sqlite", help="sqlite, journal, or a postgresql:// URL")
    parser.add_argument("--fault", default="zombie_child", help="simulator fault of every server, or 'none'")
    parser.add_argument("--cycle", action="store_true", help="take the moments in turn instead of at random")
    parser.add_argument("--workdir", help="keep everything here (default: a temporary folder, removed)")
    args = parser.parse_args(argv)

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="autospec-chaos-"))
    trials = args.trials or 2 * args.kills
    print(
        f"chaos: {args.kills} kills, target {trials} launched trials, storage {args.storage}, "
        f"fault {args.fault}, seed {args.seed}, in {workdir}"
    )
    try:
        result = run_chaos(
            workdir,
            kills=args.kills,
            trials=trials,
            seed=args.seed,
            storage=args.storage,
            fault=None if args.fault == "none" else args.fault,
            moments=MOMENTS if args.cycle else None,
            log=lambda line: print("  " + line, flush=True),
        )
    finally:
        left = sim_processes(str(workdir))
        for pid in left:  # never leave anything running, whatever happened
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    rounds = sorted(result.round_seconds)
    median = rounds[len(rounds) // 2] if rounds else 0.0
    print(f"kills survived:      {result.kills}")
    print(f"trials lost:         {result.trials_lost}")
    print(f"leftover processes:  {result.leftover_processes}")
    print(f"launched trials:     {result.launched} (target {result.target})")
    print(
        f"retries missing:     {result.retries_missing} (parameters given up after "
        f"{MAX_STALE_RETRIES + 1} kills in a row: {result.given_up})"
    )
    print(
        f"checked unchanged:   {result.checked_finished} trials finished before a kill "
        f"({result.checked_complete} of them launched and measured)"
    )
    print(f"final run exit code: {result.final_exit}")
    print("moments hit:         " + ", ".join(f"{m} {result.moments[m]}" for m in MOMENTS))
    print(f"time:                {result.wall_seconds:.0f} s in all; a killed round ran {median:.1f} s (median of {len(rounds)})")
    for line in result.lost_detail:
        print(f"  lost: {line}")
    for line in result.missing_detail:
        print(f"  no retry: {line}")
    for pid, cmd in result.leftover_detail.items():
        print(f"  leftover: {pid} {cmd[:120]}")
    ok = result.ok and result.kills == args.kills
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
