"""`autospec doctor`: GPUs, processes holding GPU memory, sglang, model path.

Exit code 0 when every check passed, 1 when one found a problem (for example a leftover
server still holding GPU memory); a host without NVML is reported, not a problem.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from autospec.launcher.doctor import GpuHolder, render_text, run_doctor
from autospec.launcher.probes import GpuProbe, NvmlGpuProbe, ProbeUnavailable, SimGpuProbe
from autospec.study.slots import parse_gpus, plan_slots

__all__ = ["register", "run", "hf_cache_dirs"]


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "doctor",
        help="check GPUs, processes holding GPU memory, sglang and the model path",
        description="Report GPUs and free memory (NVML), processes holding GPU memory (PID, command "
        "line), whether sglang imports in the server's Python, and whether --model-path resolves.",
    )
    p.add_argument("--python", default=sys.executable, help="the Python that runs the server (default: this one)")
    p.add_argument("--model-path", help="model folder or Hugging Face id to look up")
    p.add_argument(
        "--gpus",
        help="NVML GPU indices to check, e.g. 0-7 or 0,1 (default: all); with them, the slots "
        "`autospec optimize --gpus` would make",
    )
    p.add_argument(
        "--gpus-per-trial",
        type=int,
        default=1,
        metavar="N",
        help="GPUs per slot for the slot list (default 1; optimize's default is tp x pp x dp)",
    )
    p.add_argument(
        "--sim", action="store_true", help="look at the simulator's recorded GPU memory of --studies-dir instead of NVML"
    )
    p.add_argument("--studies-dir", default="studies", help="with --sim: the studies folder (default studies)")
    p.add_argument(
        "--sim-gpu-state-dir", type=Path, help="read the simulator's recorded GPU memory from this folder instead of NVML"
    )
    p.add_argument("--no-sglang", action="store_true", help="skip the sglang import check")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)
    return p


def hf_cache_dirs(environ: dict[str, str] | None = None) -> list[Path]:
    """Hugging Face hub cache folders, as huggingface_hub looks them up."""
    env = dict(os.environ if environ is None else environ)
    dirs: list[Path] = []
    if env.get("HF_HUB_CACHE"):
        dirs.append(Path(env["HF_HUB_CACHE"]))
    if env.get("HF_HOME"):
        dirs.append(Path(env["HF_HOME"]) / "hub")
    dirs.append(Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface" / "hub")
    return list(dict.fromkeys(dirs))


def _gpu_indices(text: str | None) -> list[int] | None:
    return sorted(set(parse_gpus(text))) if text else None


def _probe(args: argparse.Namespace) -> tuple[GpuProbe | None, str, str | None]:
    if args.sim_gpu_state_dir is not None:
        return SimGpuProbe(args.sim_gpu_state_dir), "simulator", None
    if args.sim:
        from autospec.study.files import sim_gpu_state_dir

        return SimGpuProbe(sim_gpu_state_dir(Path(args.studies_dir))), "simulator", None
    try:
        return NvmlGpuProbe(gpus=_gpu_indices(args.gpus)), "nvml", None
    except ProbeUnavailable as exc:
        return None, "nvml", str(exc)


def _with_owner(holder: GpuHolder) -> GpuHolder:
    """Name the study trial a holder belongs to, and how to stop it safely."""
    from autospec.study.processes.owners import owner_of

    owner = owner_of(holder.pid)
    if owner is None:
        return holder
    fix = "" if owner.tuner_alive else owner.stop_command()
    return dataclasses.replace(holder, owner=owner.describe(), fix=fix)


def run(args: argparse.Namespace) -> int:
    probe, source, error = _probe(args)
    report = run_doctor(
        probe,
        gpu_source=source,
        probe_error=error,
        python=None if args.no_sglang else args.python,
        model_path=args.model_path,
        hf_cache_dirs=hf_cache_dirs(),
    )
    report = dataclasses.replace(report, holders=tuple(_with_owner(h) for h in report.holders))
    plan = plan_slots(parse_gpus(args.gpus), args.gpus_per_trial) if args.gpus else None
    if args.json:
        data = report.as_dict()
        if plan is not None:
            data["slots"] = [{**slot.as_dict(), "ports": [slot.ports.start, slot.ports.stop - 1]} for slot in plan.slots]
        print(json.dumps(data, indent=2))
    else:
        print(render_text(report))
        if plan is not None:
            print(f"slots for autospec optimize --gpus {args.gpus} --gpus-per-trial {args.gpus_per_trial}:")
            for line in plan.describe():
                print(f"  {line}")
    return 0 if report.ok else 1
