"""`autospec recover`: make a study whole after its tuner died, without running trials.

Stops what the study's dead tuners left running (verified by recorded identity and launch
ID; TERM, KILL after a timeout, then wait until the GPU memory is free), fails their
trials and queues their parameters again. A study whose tuner still runs is left alone.
This is the command `autospec doctor` and `autospec optimize` print for a GPU held by a
study's leftover server.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from autospec.cli.common import add_study_command
from autospec.cli.pareto import open_existing_handle


def register(sub: argparse._SubParsersAction) -> None:
    p = add_study_command(
        sub,
        "recover",
        help="stop a study's leftover servers and queue its interrupted trials again",
        description="Stop the servers a study's dead tuners left running (verified by their recorded identity), "
        "fail their trials and queue their parameters again, without starting any trial. "
        "Running `autospec optimize` again does the same before it continues.",
    )
    p.add_argument(
        "--sim",
        action="store_true",
        help="the study ran against the simulator: wait for its recorded GPU memory (in --studies-dir)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from autospec.cli.wiring import default_probe
    from autospec.launcher import Launcher
    from autospec.launcher.probes import SimGpuProbe
    from autospec.records import TrialStore
    from autospec.study.files import Artifacts, EventLog, StudyLayout
    from autospec.study.processes import recovery
    from autospec.study.processes.gpu_guard import GpuGuard
    from autospec.study.proposing.samplers import optuna_notes_silenced

    with optuna_notes_silenced():
        handle, study = open_existing_handle(args)
    layout = StudyLayout.beside(handle.local_path, Path(args.studies_dir), study.study_name)
    probe = SimGpuProbe(layout.sim_gpu_state_dir) if args.sim else default_probe()
    launcher = Launcher(probe=probe)
    store = TrialStore(study, [d.name == "MAXIMIZE" for d in study.directions], [])
    events = EventLog(layout.events_log)
    lines = recovery.recover(store, launcher, Artifacts(layout.artifacts_dir))
    GpuGuard(launcher, study.study_name, handle.locator, allow_foreign=True).clear(lines.append)
    for line in lines:
        print(line)
        events.write(line)
    if not lines:
        print(f"study {study.study_name}: nothing to recover (no leftover server, no trial of a dead tuner)")
    return 0
