"""Does the simulator vary like the H200 does: per request, between launches, between machines?

Starts ``python -m autospec.sim`` ``--machines`` x ``--launches`` times (each launch its
own ``--sim-seed``, each machine its own ``--sim-machine`` name), sends every launch the
same stream through the HTTP API (``POST /generate``, C=1, ``--requests`` requests of one
synthetic prompt, ``--output-len`` tokens with ignore_eos, temperature ``--temperature``)
and measures each request's speed as a client sees it (completion tokens / (done - sent)).
It prints, with their ratio to the targets of issue 37 (SGLang 0.5.16 on H200s):

- per request      sd of the per-request speed within a launch, over its mean (target 15%)
- between launches sd of a launch's mean speed between launches of one machine, pooled
                   over machines (from each machine's launches; target 1-2%: 1.5%)
- between machines sd of a machine's mean speed between machines, its launches' share
                   taken out (target 5%)

and the mean accept length (``meta_info.spec_verify_ct``) of the first three requests and
of requests 20-25, to show NGRAM's climb (H200: 2.0-2.5 rising to 3.0-3.4).

    .venv/bin/python benchmarks/sim_spreads.py [--machines 8] [--launches 2] [--requests 30]
        [--profile qwen25-coder-7b-ngram-1x-l4] [--algorithm NGRAM] [--time-scale 0.25]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import time
from dataclasses import dataclass

import httpx
from _sim_server import pick_free_port, sim_argv, spawn_ready, stop_sim

TARGETS = {"per request": 0.15, "between launches": 0.015, "between machines": 0.05}
PROMPT = " ".join(f"w{i % 50}" for i in range(32))  # machine-made: the simulator's "synthetic" kind


@dataclass(frozen=True)
class Launch:
    """One launch's per-request speeds (tok/s, simulated time) and accept lengths, in order."""

    machine: str
    speeds: tuple[float, ...]
    accepts: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.speeds)


def start(args: argparse.Namespace, machine: str, seed: int) -> tuple[subprocess.Popen, str]:
    port = pick_free_port()
    argv = sim_argv(
        port, "--model-path", "sim",
        "--speculative-algorithm", args.algorithm, "--sim-profile", args.profile, "--sim-seed", str(seed),
        "--sim-machine", machine, "--sim-load-seconds", "0", "--sim-warmup-seconds", "0",
        "--sim-time-scale", f"{args.time_scale:g}",
    )  # fmt: skip
    return spawn_ready(argv, port), f"http://127.0.0.1:{port}"


def one_launch(args: argparse.Namespace, machine: str, seed: int) -> Launch:
    proc, url = start(args, machine, seed)
    speeds, accepts = [], []
    body = {
        "text": PROMPT,
        "sampling_params": {"max_new_tokens": args.output_len, "ignore_eos": True, "temperature": args.temperature},
    }
    try:
        with httpx.Client(base_url=url, timeout=120) as http:
            for _ in range(args.requests):
                sent = time.perf_counter()
                meta = http.post("/generate", json=body).raise_for_status().json()["meta_info"]
                done = time.perf_counter()
                tokens = int(meta["completion_tokens"])
                speeds.append(tokens / (done - sent) * args.time_scale)
                accepts.append(tokens / max(int(meta.get("spec_verify_ct") or tokens), 1))
    finally:
        stop_sim(proc)
    return Launch(machine, tuple(speeds), tuple(accepts))


def spreads(launches: list[Launch]) -> dict[str, float]:
    """The three relative spreads of the module docstring."""
    per_request = statistics.fmean(statistics.stdev(x.speeds) / x.mean for x in launches)
    machines = sorted({x.machine for x in launches})
    by_machine = {m: [x.mean for x in launches if x.machine == m] for m in machines}
    grand = statistics.fmean(x.mean for x in launches)
    within = [v for means in by_machine.values() for v in means]
    launch_var = sum(statistics.variance(m) * (len(m) - 1) for m in by_machine.values()) / (len(within) - len(machines))
    per_machine = len(launches) / len(machines)
    machine_means = [statistics.fmean(m) for m in by_machine.values()]
    machine_var = max(statistics.variance(machine_means) - launch_var / per_machine, 0.0)
    return {
        "per request": per_request,
        "between launches": math.sqrt(launch_var) / grand,
        "between machines": math.sqrt(machine_var) / grand,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--machines", type=int, default=8)
    parser.add_argument("--launches", type=int, default=2, help="launches per machine (at least 2)")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--profile", default="qwen25-coder-7b-ngram-1x-l4")
    parser.add_argument("--algorithm", default="NGRAM")
    parser.add_argument("--time-scale", type=float, default=0.25)
    args = parser.parse_args()
    if args.launches < 2 or args.machines < 2 or args.requests < 2:
        raise SystemExit("give --launches, --machines and --requests of at least 2 each")
    launches = []
    for m in range(args.machines):
        for launch in range(args.launches):
            launches.append(one_launch(args, f"machine-{m}", seed=1000 * m + launch + 1))
            print(f"machine-{m} launch {launch + 1}: {launches[-1].mean:8.1f} tok/s", flush=True)
    print(f"\n{args.profile}, {args.algorithm}, C=1, {args.requests} requests x {args.output_len} tokens per launch")
    print(f"{'spread':<18} {'measured':>9} {'target':>7} {'ratio':>6}")
    for name, value in spreads(launches).items():
        print(f"{name:<18} {value:9.2%} {TARGETS[name]:7.1%} {value / TARGETS[name]:6.2f}")
    early = statistics.fmean(a for x in launches for a in x.accepts[:3])
    late = [a for x in launches for a in x.accepts[19:25]]
    print(f"accept length: requests 1-3 {early:.2f}" + (f", requests 20-25 {statistics.fmean(late):.2f}" if late else ""))
    first = statistics.fmean(x.speeds[0] for x in launches)
    later = [x.speeds[24] for x in launches if len(x.speeds) > 24]
    print(f"speed: request 1 {first:.1f} tok/s" + (f", request 25 {statistics.fmean(later):.1f}" if later else ""))


if __name__ == "__main__":
    main()
