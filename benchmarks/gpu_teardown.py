"""How long until a stopped server's GPU memory is free: launcher teardown vs a bare kill.

Needs an NVIDIA GPU, PyTorch with CUDA and nvidia-ml-py (module ``pynvml``); nothing else
but ``autospec.launcher`` (found in this checkout's ``src/`` if autospec is not installed).

A stand-in server (a small script written to a temporary folder) allocates ``--gb`` GiB
on the GPU with PyTorch, starts a child that allocates ``--gb`` GiB too (as SGLang's
scheduler does), and answers ``/health_generate`` once both hold their memory. Scenarios,
each repeated ``--repeats`` times:

- ``launcher``: ``Launcher.start`` then ``RunningServer.stop()`` (TERM to the group, KILL
  after a timeout, wait for NVML); time from the stop call until NVML shows the memory
  back at the pre-launch level.
- ``launcher-setsid``: the same with a child that calls ``setsid()`` and so leaves the
  process group (only the launcher's PID tracking finds it).
- ``bare-kill``: ``kill -9`` of the parent only, the way a crash loop or a hand-written
  restart script stops it; time until NVML shows the memory free, or "still held" after
  ``--bare-wait`` seconds (then the leftover child is cleaned up).

Prints a table (median, min-max, n) and each launcher scenario's speed-up over bare kill,
and with ``--json FILE`` writes the raw numbers. Exit code 2 when no NVIDIA GPU is usable.

    python benchmarks/gpu_teardown.py --gb 16 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

try:
    import autospec.launcher  # noqa: F401
except ImportError:  # run from a checkout without installing autospec
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import contextlib

from autospec.launcher import Launcher, LaunchRequest, NvmlGpuProbe, ProbeUnavailable
from autospec.launcher.ports import pick_free_port

MIB = 1024 * 1024
TOLERANCE_MB = 256.0

HOLDER = textwrap.dedent(
    '''
    """Stand-in server: parent and child each hold GPU memory; /health_generate once both do."""
    import argparse, os, subprocess, sys, threading, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--gb", type=float, required=True)
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--role", default="parent")
    p.add_argument("--child-setsid", default="no")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    a = p.parse_args()

    def hold():
        t = torch.empty(int(a.gb * 2**30), dtype=torch.uint8, device=f"cuda:{a.gpu}")
        t.fill_(1)
        torch.cuda.synchronize()
        return t

    if a.role == "child":
        if a.child_setsid == "yes":
            os.setsid()
        held = hold()
        print(f"child {os.getpid()} holds {a.gb} GiB", flush=True)
        while True:
            time.sleep(1)

    held = hold()
    child = subprocess.Popen([sys.executable, __file__, "--gb", str(a.gb), "--gpu", str(a.gpu),
                              "--role", "child", "--child-setsid", a.child_setsid],
                             stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline()
    print(f"parent {os.getpid()} holds {a.gb} GiB; {line.strip()}", flush=True)
    threading.Thread(target=lambda: [None for _ in child.stdout], daemon=True).start()

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path in ("/health_generate", "/health") else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        def log_message(self, *args):
            pass

    ThreadingHTTPServer((a.host, a.port), H).serve_forever()
    '''
)


def fail(message: str) -> None:
    print(f"gpu_teardown: {message}", file=sys.stderr)
    sys.exit(2)


def check_gpu(gpu: int) -> NvmlGpuProbe:
    try:
        probe = NvmlGpuProbe(gpus=[gpu])
    except ProbeUnavailable as exc:
        fail(f"no NVIDIA GPU usable here ({exc}); this benchmark needs one")
    if gpu not in probe.snapshot().used_mb:
        fail(f"NVML has no GPU {gpu}; pick one with --gpu")
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed; this benchmark allocates GPU memory with it")
    if not torch.cuda.is_available():
        fail("PyTorch sees no CUDA GPU; this benchmark needs one")
    return probe


def used_mb(probe: NvmlGpuProbe, gpu: int) -> float:
    return probe.snapshot().used_mb[gpu]


def wait_used(
    probe: NvmlGpuProbe, gpu: int, predicate: Callable[[float], bool], timeout_s: float, since: float | None = None
) -> float | None:
    """Seconds from ``since`` (default: now) until predicate(used MiB) holds, or None after timeout_s."""
    started = time.monotonic() if since is None else since
    while time.monotonic() - started < timeout_s:
        if predicate(used_mb(probe, gpu)):
            return time.monotonic() - started
        time.sleep(0.01)
    return None


def holder_command(script: Path, args: argparse.Namespace, setsid: bool) -> tuple[dict, list[str]]:
    flags = {"gb": args.gb, "gpu": args.gpu, "child_setsid": "yes" if setsid else "no"}
    return flags, [sys.executable, str(script)]


def run_launcher(probe: NvmlGpuProbe, script: Path, args: argparse.Namespace, setsid: bool, log_dir: Path, index: int) -> dict:
    baseline = used_mb(probe, args.gpu)
    flags, command = holder_command(script, args, setsid)
    launcher = Launcher(probe, term_timeout_s=args.term_timeout, gpu_free_timeout_s=args.bare_wait, gpu_tolerance_mb=TOLERANCE_MB)
    req = LaunchRequest(
        command=tuple(command),
        flags=flags,
        log_path=log_dir / f"launcher-{setsid}-{index}.log",
        ready_timeout_s=300,
        poll_interval_s=0.05,
    )
    server = launcher.start(req)
    held = used_mb(probe, args.gpu) - baseline
    if held < 2 * args.gb * 1024 * 0.9:
        server.stop()
        raise RuntimeError(f"the stand-in holds only {held:.0f} MiB; expected about {2 * args.gb * 1024:.0f}")
    started = time.monotonic()
    report = server.stop()
    stop_seconds = time.monotonic() - started
    after = used_mb(probe, args.gpu)
    freed = after <= baseline + TOLERANCE_MB
    return {
        "scenario": "launcher-setsid" if setsid else "launcher",
        "held_mib": round(held),
        "seconds_until_free": round(stop_seconds, 3) if freed else None,
        "freed": freed,
        "report": report.as_dict(),
    }


def run_bare_kill(probe: NvmlGpuProbe, script: Path, args: argparse.Namespace, index: int) -> dict:
    baseline = used_mb(probe, args.gpu)
    _flags, command = holder_command(script, args, setsid=False)
    argv = command + ["--gb", str(args.gb), "--gpu", str(args.gpu), "--port", str(pick_free_port())]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed once parent and child both hold their memory
    held = used_mb(probe, args.gpu) - baseline
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)  # the parent only
    proc.wait()
    freed_after = wait_used(probe, args.gpu, lambda used: used <= baseline + TOLERANCE_MB, args.bare_wait, since=started)
    still_held = max(used_mb(probe, args.gpu) - baseline, 0.0)
    survivors = sorted(probe.snapshot().pids)
    # clean up what the bare kill left (the child, still in the group)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    wait_used(probe, args.gpu, lambda used: used <= baseline + TOLERANCE_MB, 60)
    return {
        "scenario": "bare-kill",
        "held_mib": round(held),
        "seconds_until_free": round(freed_after, 3) if freed_after is not None else None,
        "freed": freed_after is not None,
        "still_held_mib_after_wait": round(still_held) if freed_after is None else 0,
        "nvml_pids_after_wait": survivors if freed_after is None else [],
        "ready_line": line.strip(),
    }


def summarize(results: list[dict], bare_wait: float) -> list[str]:
    lines = [f"{'scenario':<17} {'n':>2} {'median s':>9} {'min-max s':>15}  memory freed"]
    medians: dict[str, float | None] = {}
    for scenario in ("launcher", "launcher-setsid", "bare-kill"):
        rows = [r for r in results if r["scenario"] == scenario]
        if not rows:
            continue
        times = [r["seconds_until_free"] for r in rows if r["freed"]]
        freed = f"{len(times)}/{len(rows)}"
        if times:
            med = statistics.median(times)
            medians[scenario] = med if len(times) == len(rows) else None
            lines.append(f"{scenario:<17} {len(rows):>2} {med:>9.3f} {min(times):>7.3f}-{max(times):<7.3f}  {freed}")
        else:
            medians[scenario] = None
            lines.append(
                f"{scenario:<17} {len(rows):>2} {'>' + format(bare_wait, 'g'):>9} {'-':>15}  {freed} "
                f"(still held after {bare_wait:g} s)"
            )
    bare = medians.get("bare-kill")
    for scenario in ("launcher", "launcher-setsid"):
        own = medians.get(scenario)
        if own:
            if bare:
                lines.append(f"bare-kill / {scenario}: {bare / own:.1f}x slower to free the memory")
            else:
                lines.append(f"bare-kill / {scenario}: more than {bare_wait / own:.0f}x (bare kill never freed it)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=8.0, help="GiB held by the parent and by the child (default 8)")
    parser.add_argument("--gpu", type=int, default=0, help="NVML/CUDA index of the GPU (default 0)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per scenario (default 3)")
    parser.add_argument("--bare-wait", type=float, default=20.0, help="seconds to wait for memory after a bare kill (default 20)")
    parser.add_argument("--term-timeout", type=float, default=30.0, help="launcher's TERM timeout (default 30)")
    parser.add_argument("--json", type=Path, help="write the raw results here")
    args = parser.parse_args(argv)

    probe = check_gpu(args.gpu)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gpu-teardown-") as tmp:
        folder = Path(tmp)
        script = folder / "holder.py"
        script.write_text(HOLDER)
        baseline = used_mb(probe, args.gpu)
        print(
            f"GPU {args.gpu}: {probe.snapshot().names.get(args.gpu)}, {baseline:.0f} MiB in use before; "
            f"each process holds {args.gb:g} GiB",
            flush=True,
        )
        for index in range(args.repeats):
            for run in (
                lambda i=index: run_launcher(probe, script, args, False, folder, i),
                lambda i=index: run_launcher(probe, script, args, True, folder, i),
                lambda i=index: run_bare_kill(probe, script, args, i),
            ):
                row = run()
                results.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "report"}), flush=True)
    print()
    print("\n".join(summarize(results, args.bare_wait)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
