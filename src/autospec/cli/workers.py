"""Several trials at once: GPU slots on one host (`--gpus`), and what `autospec worker`
needs to join a study from another host.

`autospec optimize --gpus 0-7` with more than one slot runs one worker process per slot
(`run_slot_workers`): the same command with the hidden ``--slot K``, in a session of its
own, its output relayed with a ``[slot K]`` prefix (an error line another worker already
printed word for word is left out). The workers share the study through
its storage (Optuna's distributed mode; `autospec.study.claims` keeps ``--trials``
exact). Slot 0 starts first and the others once the study exists in the storage, so the
study and its storage file are created once, after slot 0's GPU check. A stop signal to this
process is passed on to every worker once per signal (the first stops each worker after
its current server is torn down, a second kills the servers at once).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from autospec.config import SearchSpace
from autospec.errors import AutospecError, UsageError
from autospec.study.processes.identity import invocation_id
from autospec.study.slots import Slot, SlotPlan, gpus_per_trial_of, parse_gpus, plan_slots

__all__ = ["slot_of", "study_options", "run_slot_workers", "HOST_OPTIONS"]

# Options of `autospec optimize` that belong to one host or one invocation, not to the
# study: `autospec worker` takes these from its own command line, the rest from the study.
HOST_OPTIONS = frozenset(
    {
        "space",
        "study",
        "storage",
        "studies_dir",
        "gpus",
        "gpus_per_trial",
        "slot",
        "quiet",
        "timeout",
        "allow_foreign_gpu_memory",
        "storage_patience",
        "server_command",
        "ready_timeout",
        "argv",
    }
)
_FIRST_SLOT_READY_S = 600.0  # slot 0 opens the study within this (its GPU check and preflight included)


def slot_of(args: argparse.Namespace, space: SearchSpace) -> tuple[SlotPlan | None, Slot | None]:
    """The slot plan of ``--gpus`` (None without it) and the slot this process runs: the
    one named by ``--slot``, the only one, or None (several: `run_slot_workers`)."""
    if args.gpus is None:
        if args.gpus_per_trial is not None or args.slot is not None:
            raise UsageError("--gpus-per-trial needs --gpus; e.g. --gpus 0-7 --gpus-per-trial 2")
        return None, None
    per_trial = args.gpus_per_trial if args.gpus_per_trial is not None else gpus_per_trial_of(space.server.flags)
    plan = plan_slots(parse_gpus(args.gpus), per_trial)
    if args.slot is not None:
        if not 0 <= args.slot < len(plan.slots):
            raise UsageError(f"--slot {args.slot} is not one of the {len(plan.slots)} slots of --gpus {args.gpus}")
        return plan, plan.slots[args.slot]
    return plan, plan.slots[0] if len(plan.slots) == 1 else None


def study_options(args: argparse.Namespace, space_file: Path | None) -> dict[str, Any]:
    """What `autospec worker` needs to run this study on another host: the options that
    belong to the study (not `HOST_OPTIONS`) and the search-space file's text."""
    options = {
        k: v
        for k, v in vars(args).items()  # plain values only: no handler, no signal policy
        if k not in HOST_OPTIONS and isinstance(v, (str, int, float, bool, list, type(None)))
    }
    json.dumps(options)
    text = space_file.read_text() if space_file is not None and space_file.is_file() else None
    return {"options": options, "space_toml": text}


class _Relay:
    """The workers' output on `out`, each line with its ``[slot K]`` prefix; an error line
    (``autospec: error: ...``) that another worker already printed word for word is left
    out: when nothing can start, every worker ends with the same one-line cause."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.errors: set[str] = set()
        self.lock = threading.Lock()

    def copy(self, stream: IO[str], prefix: str) -> None:
        for line in stream:
            with self.lock:
                if line.startswith("autospec: error: "):
                    if line in self.errors:
                        continue
                    self.errors.add(line)
                self.out.write(prefix + line)
                self.out.flush()


def _wait_for_study(args: argparse.Namespace, study_name: str, first: subprocess.Popen[str]) -> bool:
    """Wait until slot 0 (`first`) has created the study (a local storage file is not
    opened before it exists: slot 0 creates it after its GPU check). False when slot 0
    ended first without success."""
    from autospec.study.storage import open_storage, storage_locator, study_exists

    studies_dir = Path(args.studies_dir)
    _, local = storage_locator(args.storage, study_name, studies_dir)
    deadline = time.monotonic() + _FIRST_SLOT_READY_S
    while time.monotonic() < deadline:
        if first.poll() is not None:
            return first.returncode == 0
        if local is None or local.exists():
            with contextlib.suppress(AutospecError):  # being created right now: look again
                if study_exists(open_storage(args.storage, study_name, studies_dir), study_name):
                    return True
        time.sleep(0.5)
    return True


def run_slot_workers(args: argparse.Namespace, plan: SlotPlan, study_name: str, out: IO[str] | None = None) -> int:
    """Run one worker process per slot of `plan` (see the module docstring): the command of
    this invocation (``args.argv``) with ``--slot K``; wait for all. The exit code is 0
    when every worker ended with 0, else the highest (at least 1)."""
    out = out or sys.stdout
    words = list(args.argv)
    invocation_id()  # the workers inherit it: a failure that rules out the space stops them all
    for line in plan.describe():
        print(f"autospec: {line}", file=out)
    procs: list[subprocess.Popen[str]] = []
    relays: list[threading.Thread] = []
    relay_to = _Relay(out)
    try:
        for slot in plan.slots:
            proc = subprocess.Popen(
                [sys.executable, "-m", "autospec", *words, "--slot", str(slot.index)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            procs.append(proc)
            assert proc.stdout is not None
            relay = threading.Thread(target=relay_to.copy, args=(proc.stdout, f"[slot {slot.index}] "), daemon=True)
            relay.start()
            relays.append(relay)
            if slot.index == 0 and not _wait_for_study(args, study_name, proc):  # slot 0 creates it; others join
                break
    except KeyboardInterrupt:  # stopped while starting: the started workers stop as after any signal
        _forward(procs)
    _wait_all(procs)
    for relay in relays:
        relay.join(timeout=5)
    codes = [p.returncode for p in procs]
    print(f"autospec: {len(procs)} slot workers of study {study_name} ended with exit codes {codes}", file=out)
    bad = [c for c in codes if c != 0]
    return 0 if not bad else max(max(bad), 1)  # a worker killed by a signal (negative code) is a failure too


def _wait_all(procs: Sequence[subprocess.Popen[str]]) -> None:
    """Wait for every worker; each stop signal this process gets is passed on to them."""
    while any(p.poll() is None for p in procs):
        try:
            time.sleep(0.2)
        except KeyboardInterrupt:
            _forward(procs)


def _forward(procs: Sequence[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
