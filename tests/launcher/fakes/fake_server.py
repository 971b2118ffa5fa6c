"""A tiny stand-in server for launcher tests (stdlib only, starts in tens of milliseconds).

It accepts any SGLang flags (ignored) plus its own ``--fake-*`` options, serves
``/health_generate`` (or only ``/ready``) on ``--host``/``--port``, and can misbehave:
crash at start, hang, crash after ready, ignore SIGTERM, start a child that leaves the
process group and holds simulated GPU memory, print a fixture log. Every process it
starts writes its PID to ``$FAKE_PID_DIR/<pid>`` so tests can check none survive.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def record_pid() -> None:
    pid_dir = os.environ.get("FAKE_PID_DIR")
    if pid_dir:
        Path(pid_dir, str(os.getpid())).write_text(" ".join(sys.argv))


def hold_sim_memory(state_dir: str | None, mem_mb: float) -> None:
    if state_dir and mem_mb > 0:
        path = Path(state_dir, f"{os.getpid()}.json")
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "gpus": [0], "mem_mb": mem_mb, "cmdline": " ".join(sys.argv)}))
        tmp.replace(path)


def run_child(args: argparse.Namespace) -> None:
    record_pid()
    if args.fake_child_ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hold_sim_memory(args.fake_sim_gpu_state_dir, args.fake_child_mem_mb)
    print(f"child {os.getpid()} holding {args.fake_child_mem_mb} MB", flush=True)
    while True:
        time.sleep(1)


def start_child(args: argparse.Namespace) -> subprocess.Popen:
    argv = [sys.executable, __file__, "--fake-as-child", "--fake-child-mem-mb", str(args.fake_child_mem_mb)]
    if args.fake_sim_gpu_state_dir:
        argv += ["--fake-sim-gpu-state-dir", args.fake_sim_gpu_state_dir]
    if args.fake_child_ignore_term:
        argv.append("--fake-child-ignore-term")
    child = subprocess.Popen(argv, start_new_session=(args.fake_child == "setsid"))
    # Wait until the child recorded itself, so "ready" means it holds its memory.
    marker_dir = os.environ.get("FAKE_PID_DIR")
    deadline = time.monotonic() + 10
    while marker_dir and not Path(marker_dir, str(child.pid)).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if args.fake_sim_gpu_state_dir and args.fake_child_mem_mb > 0:
        record = Path(args.fake_sim_gpu_state_dir, f"{child.pid}.json")
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return child


def serve(args: argparse.Namespace, ready: threading.Event) -> ThreadingHTTPServer:
    paths = {"/ready"} if args.fake_only_ready else {"/health_generate", "/health"}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in paths:
                self.send_response(404)
            else:
                self.send_response(200 if ready.is_set() else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fake-mode", default="ok", choices=["ok", "crash_at_start", "hang", "crash_after_ready", "no_listen"])
    parser.add_argument("--fake-ready-after", type=float, default=0.0)
    parser.add_argument("--fake-crash-after", type=float, default=0.5)
    parser.add_argument("--fake-exit-code", type=int, default=1)
    parser.add_argument("--fake-log-file", default=None)
    parser.add_argument("--fake-ignore-term", action="store_true")
    parser.add_argument("--fake-child", default="none", choices=["none", "group", "setsid"])
    parser.add_argument("--fake-child-ignore-term", action="store_true")
    parser.add_argument("--fake-child-mem-mb", type=float, default=0.0)
    parser.add_argument("--fake-mem-mb", type=float, default=0.0)
    parser.add_argument("--fake-sim-gpu-state-dir", default=None)
    parser.add_argument("--fake-only-ready", action="store_true")
    parser.add_argument("--fake-retractions", type=int, default=0)
    parser.add_argument("--fake-print-env", default=None)
    parser.add_argument("--fake-as-child", action="store_true")
    args, _sglang_flags = parser.parse_known_args()

    if args.fake_as_child:
        run_child(args)
        return
    record_pid()
    if args.fake_ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.fake_print_env:
        print(f"env {args.fake_print_env}={os.environ.get(args.fake_print_env)}", flush=True)
    print(f"argv {' '.join(sys.argv[1:])}", flush=True)
    if args.fake_log_file:
        sys.stdout.write(Path(args.fake_log_file).read_text())
        sys.stdout.flush()
    if args.fake_mode == "crash_at_start":
        sys.exit(args.fake_exit_code)

    hold_sim_memory(args.fake_sim_gpu_state_dir, args.fake_mem_mb)
    child = start_child(args) if args.fake_child != "none" else None
    ready = threading.Event()
    if args.fake_mode != "no_listen":
        serve(args, ready)
    if args.fake_mode in ("hang", "no_listen"):
        while True:
            time.sleep(1)
    time.sleep(args.fake_ready_after)
    print(
        "[2026-11-29 09:51:00] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=4096, "
        "available_gpu_mem=40.05 GB",
        flush=True,
    )
    print("[2026-11-29 09:51:03] The server is fired up and ready to roll!", flush=True)
    ready.set()
    for _ in range(args.fake_retractions):
        print("[2026-11-29 09:51:04] KV cache pool is full. Retract requests. #retracted_reqs: 1", flush=True)
    if args.fake_mode == "crash_after_ready":
        time.sleep(args.fake_crash_after)
        print(
            "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access was encountered", flush=True
        )
        os._exit(args.fake_exit_code)
    while True:
        time.sleep(1)
        if child is not None:
            child.poll()


if __name__ == "__main__":
    main()
