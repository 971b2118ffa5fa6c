"""How fast can autospec's benchmark client consume streams, on one core?

Starts the simulator configured to be as fast as possible (noise off, every simulated
duration scaled by --time-scale, default 1e-4), pins it to one CPU and this process
(the client) to another where the machine has two, runs one closed-loop level and
reports, for the client: streamed events (chunks) and tokens per second of wall time
and per second of the client's own CPU time (what one fully busy core sustains).
The baseline is the seed's C=32 aggregate of about 2,000 tok/s: a ratio well above 1
means the client cannot be what limits a real benchmark.

Two server settings are measured: speculative decoding (NEXTN, 3 steps: several
tokens per event) and none (one token per event, the client's worst case).

    python benchmarks/client_capacity.py [--concurrency 32] [--seconds 5] [--output-len 1024]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import time

from _sim_server import cpu_seconds, pick_free_port, sim_argv, spawn_ready, stop_sim

from autospec.bench import LevelPlan, Workload, run_levels

SEED_AGGREGATE_TOK_S = 2000.0  # the seed's C=32 aggregate (data/seed_speculation.csv: 1979 at steps=3)
SPEC_FLAGS = [
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]


def _start_sim(port: int, time_scale: float, spec: bool, max_running: int) -> subprocess.Popen:
    """The simulator pinned to the last CPU, so that it does not take the client's."""
    cpus = sorted(os.sched_getaffinity(0))
    options = ["--model-path", "sim", "--sim-noise", "off", "--sim-load-seconds", "0"]
    options += ["--sim-time-scale", f"{time_scale:g}", "--max-running-requests", str(max_running)]
    preexec = (lambda: os.sched_setaffinity(0, {cpus[-1]})) if len(cpus) > 1 else None
    return spawn_ready(sim_argv(port, *options, *(SPEC_FLAGS if spec else [])), port, preexec)


def measure(spec: bool, concurrency: int, seconds: float, time_scale: float, output_len: int) -> dict:
    port = pick_free_port()
    sim = _start_sim(port, time_scale, spec, max_running=concurrency)
    try:
        # ignore_eos off: the sim ends requests at seeded lengths, so they finish at
        # different steps and the batch never drains (a drained batch waits real time
        # for the next burst of arrivals, which would throttle the sim, not the client).
        workload = Workload("synthetic", output_len=output_len, ignore_eos=False)
        plan = LevelPlan(concurrency, duration_s=seconds, warmup_requests=concurrency)
        sim_cpu0 = cpu_seconds(sim.pid)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.perf_counter()
        result = run_levels(f"http://127.0.0.1:{port}", workload, [plan], timeout_s=120)[concurrency]
        wall = time.perf_counter() - wall0
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        sim_cpu = cpu_seconds(sim.pid) - sim_cpu0
    finally:
        stop_sim(sim)
    client_cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    ok = [r for r in result.records if r.ok]
    tokens = sum(r.completion_tokens for r in ok)
    chunks = sum(len(r.chunk_times) for r in ok)
    return {
        "setting": "NEXTN steps=3" if spec else "no speculation",
        "requests": len(ok),
        "failed": len(result.records) - len(ok),
        "tokens": tokens,
        "chunks": chunks,
        "wall_s": wall,
        "client_cpu_s": client_cpu,
        "sim_cpu_s": sim_cpu,
        "tok_s": tokens / wall,
        "chunks_s": chunks / wall,
        "tok_per_cpu_s": tokens / client_cpu,
        "chunks_per_cpu_s": chunks / client_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--time-scale", type=float, default=1e-4)
    parser.add_argument("--output-len", type=int, default=1024)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[0]})
    print(
        f"client on CPU {cpus[0]}, simulator on CPU {cpus[-1]}; C={args.concurrency}, "
        f"{args.seconds:g} s per setting, output {args.output_len} tokens, time scale {args.time_scale:g}"
    )
    print(
        f"{'setting':<16} {'tok/s':>9} {'chunks/s':>9} {'tok/cpu-s':>10} {'chunks/cpu-s':>12} "
        f"{'client cpu':>10} {'sim cpu':>8} {'x seed agg':>10} {'x seed (1 core)':>15}"
    )
    for spec in (True, False):
        m = measure(spec, args.concurrency, args.seconds, args.time_scale, args.output_len)
        print(
            f"{m['setting']:<16} {m['tok_s']:>9.0f} {m['chunks_s']:>9.0f} {m['tok_per_cpu_s']:>10.0f} "
            f"{m['chunks_per_cpu_s']:>12.0f} {m['client_cpu_s'] / m['wall_s']:>9.0%} "
            f"{m['sim_cpu_s'] / m['wall_s']:>8.0%} {m['tok_s'] / SEED_AGGREGATE_TOK_S:>9.1f}x "
            f"{m['tok_per_cpu_s'] / SEED_AGGREGATE_TOK_S:>14.1f}x" + (f"  ({m['failed']} failed)" if m["failed"] else "")
        )
    print(
        "tok/s, chunks/s: achieved over wall time (limited by whichever process saturates first); "
        "per cpu-s: per second of the client's own CPU time, i.e. what one busy core sustains; "
        f"x seed: ratio to the seed's {SEED_AGGREGATE_TOK_S:,.0f} tok/s C=32 aggregate."
    )


if __name__ == "__main__":
    main()
