"""``python -m autospec.sim``: a stand-in SGLang server (see ``autospec.sim.server``).

Order of events, as ``python -m sglang.launch_server`` does them:

1. argparse (unknown flag -> ``usage: ...`` + ``launch_server.py: error: ...``, exit 2);
2. SGLang's argument rewrites/rejections (``resolve_args``; a rejection prints the
   traceback of the profile's SGLang release, ending in ``ValueError: <SGLang's message>``
   (or the ``AssertionError``/``TypeError`` SGLang raises), and exits 1 at once);
3. ``server_args=ServerArgs(...)``, a ``sglang::scheduler`` child, then the server: the port
   is bound at once (readiness endpoints answer 503), load/KV/CUDA-graph lines follow at the
   profile's pace (scaled by ``--sim-time-scale``), an init failure prints SGLang's failure
   chain and the process dies; otherwise warmup (``--sim-warmup-seconds``), then ``The
   server is fired up and ready to roll!`` (``autospec.sim.startup`` has the sequence).

Simulator-only problems (unreadable profile, malformed ``--sim-fault``) print one line
``autospec.sim: error: ...`` and exit 2.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import random
import sys
from collections.abc import Sequence

from autospec.sim import logs
from autospec.sim.args import parse_command_line
from autospec.sim.arguments import resolve_args
from autospec.sim.config import ArgumentRejected
from autospec.sim.faults import FaultSpecError, parse_faults, spawn_scheduler_child
from autospec.sim.memory import init_outcome
from autospec.sim.profile import ProfileError, load_profile
from autospec.sim.server import ServerSetup, SimServer
from autospec.sim.server_args import build_server_args


def _fail_usage(message: str) -> int:
    sys.stderr.write(f"autospec.sim: error: {message}\n")
    sys.stderr.flush()
    return 2


def launch_seed(profile_seed: int) -> int:
    """The noise seed of a launch without --sim-seed: the profile's, mixed with a draw of
    its own, so that launches of the same flags differ as a real server's do (the per-launch
    speed factor, `[noise] run_sigma`; on SGLang 0.5.16 / H200 relaunches of one NGRAM
    configuration moved the C=32 aggregate by 3.5-7.7%). --sim-seed N repeats a launch."""
    return profile_seed ^ random.SystemRandom().getrandbits(31)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = parse_command_line(argv)  # argparse exits 2 on bad flags, as SGLang's does
    log = logs.SglangLog(sys.stderr)
    try:
        profile = load_profile(command.sim.profile_path)
        faults = parse_faults(command.sim.faults)
    except (ProfileError, FaultSpecError) as exc:
        return _fail_usage(str(exc))
    flags = command.flags
    try:
        cfg = resolve_args(profile, flags)
    except ArgumentRejected as exc:
        if flags.get("speculative_algorithm") and flags.get("max_running_requests") is None:
            log.info(logs.MAX_RUNNING_RESET)  # SGLang warns before it rejects
        if logs.uses_resolve_once(profile.sglang_version):
            log.info(logs.kill_process_tree(os.getpid(), include_parent=False))
        algorithm = str(flags.get("speculative_algorithm") or "").upper() or None
        log.raw(logs.argument_error_traceback(exc.traceback_line, profile.sglang_version, algorithm=algorithm))
        return 1
    for note in cfg.notes:  # SGLang's warnings for the rewrites it applied, worded by release
        log.info(note)
    outcome = init_outcome(profile, cfg)
    seed = command.sim.seed if command.sim.seed is not None else launch_seed(profile.seed)
    server_args = build_server_args(profile, cfg, command, seed)
    log.info(logs.format_server_args(server_args))

    sim = command.sim
    setup = ServerSetup(
        profile=profile,
        cfg=cfg,
        outcome=outcome,
        server_args=server_args,
        host=command.host,
        port=command.port,
        served_model_name=str(server_args["served_model_name"]),
        model_path=cfg.model_path,
        time_scale=sim.time_scale,
        noise=sim.noise,
        seed=seed,
        load_seconds=sim.load_seconds if sim.load_seconds is not None else profile.load_seconds,
        warmup_seconds=sim.warmup_seconds if sim.warmup_seconds is not None else profile.warmup_seconds,
        faults=faults,
        state_dir=sim.gpu_state_dir,
        cmdline=" ".join([sys.executable, "-m", "autospec.sim", *argv]),
        disable_cuda_graph=bool(flags.get("disable_cuda_graph")),
        machine=sim.machine,
        scheduler_child=spawn_scheduler_child(),
    )
    server = SimServer(setup)
    atexit.register(server.cleanup)
    try:
        return asyncio.run(server.serve())
    except OSError as exc:  # port taken: uvicorn's wording (errno 98)
        log.info(f"ERROR:    [Errno {exc.errno}] {exc.strerror or exc}")
        return 1
    finally:
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
