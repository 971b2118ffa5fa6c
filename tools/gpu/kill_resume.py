"""The tuner is SIGKILLed while its server is benchmarked; the same command must then
stop that leftover server itself and finish the study (on a real GPU).

    python3 kill_resume.py --out OUT_DIR -- autospec optimize ARGS...

1. NVML baseline (the idle level, and who holds memory);
2. runs the command in a session of its own; when the study's trial directory shows the
   ``--kill-at``-th launched server answering benchmark requests, SIGKILLs the tuner
   process only (its server, in a session of its own, keeps running, as after an OOM
   kill or a lost SSH session);
3. after ``--wait`` seconds: NVML again (what the leftover holds, and its PIDs);
4. runs the same command again and waits for it: its exit code, its console;
5. NVML after the second run; then writes OUT_DIR/kill_resume.json and the consoles.

Reads GPU memory with nvidia-ml-py (module ``pynvml``); allocates nothing on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pynvml


def nvml() -> dict:
    """Memory in use on each GPU and the processes holding it (MiB)."""
    out = {"time": time.time(), "gpus": []}
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        used = pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        procs = [
            {"pid": p.pid, "mib": round((p.usedGpuMemory or 0) / 2**20)}
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        ]
        out["gpus"].append({"index": index, "used_mib": round(used), "processes": procs})
    return out


def benchmarked_servers(trials_dir: Path) -> list[Path]:
    """Trial folders whose server answered readiness and then got benchmark requests."""
    found = []
    for log in sorted(trials_dir.glob("trial-*/server.log")):
        text = log.read_text(errors="replace")
        marker = '/health_generate HTTP/1.1" 200'
        if marker in text and text.split(marker, 1)[1].count("POST /generate") >= 3:
            found.append(log.parent)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--trials-dir", required=True, type=Path, help="<studies-dir>/<study>-trials")
    ap.add_argument("--kill-at", type=int, default=2, help="kill while the N-th launched server is benchmarked")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds between the kill and the second run")
    ap.add_argument("--first-timeout", type=float, default=300.0)
    ap.add_argument("--second-timeout", type=float, default=330.0)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = [c for c in args.command if c != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    report: dict = {"command": command, "baseline": nvml()}

    t0 = time.monotonic()
    with open(args.out / "first.log", "w") as log:
        first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        while time.monotonic() - t0 < args.first_timeout and first.poll() is None:
            if len(benchmarked_servers(args.trials_dir)) >= args.kill_at:
                break
            time.sleep(0.5)
        if first.poll() is not None:
            report["error"] = f"the first run ended ({first.returncode}) before the kill"
        else:
            report["killed_at_s"] = round(time.monotonic() - t0, 1)
            report["killed_while"] = str(benchmarked_servers(args.trials_dir)[-1])
            os.kill(first.pid, signal.SIGKILL)  # the tuner only: its server lives in a session of its own
            first.wait()
    print(f"kill_resume: tuner killed at {report.get('killed_at_s')} s; waiting {args.wait:g} s", flush=True)
    time.sleep(args.wait)
    left = nvml()
    for gpu in left["gpus"]:
        for proc in gpu["processes"]:
            proc["cmdline"] = cmdline(proc["pid"])
    report["after_kill"] = left

    t1 = time.monotonic()
    with open(args.out / "second.log", "w") as log:
        second = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=args.second_timeout)
    report["second_exit"] = second.returncode
    report["second_seconds"] = round(time.monotonic() - t1, 1)
    time.sleep(2)
    report["after_second"] = nvml()
    (args.out / "kill_resume.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("killed_at_s", "second_exit", "second_seconds") if k in report}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
