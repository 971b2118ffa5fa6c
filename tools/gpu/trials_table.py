"""Every trial of a study as a Markdown table: what the runs in docs/validation/ record.

    python tools/gpu/trials_table.py --storage sqlite:///S.db --study NAME [--nvml nvml.csv ...]

One row per trial: number, state and outcome, configuration (steps/topk/draft/mem),
startup facts (max_total_num_tokens, max_running_requests, seconds to ready, CUDA-graph
seconds), C=1 and C=32 figures, seconds of preflight/launch/bench/teardown, and what
teardown reported (signal, GPU memory released, port released, processes stopped).
With ``--nvml`` (the CSV files ``nvml_watch.py`` wrote during the run) a second table
gives, for each launched trial, NVML's last sample before the spawn (MiB used and PIDs
holding memory) and the peak while it ran.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def config_text(candidate: dict) -> str:
    return "{}/{}/{} @ {}".format(
        candidate.get("speculative_num_steps", "-"),
        candidate.get("speculative_eagle_topk", "-"),
        candidate.get("speculative_num_draft_tokens", "-"),
        candidate.get("mem_fraction_static", "-"),
    )


def trial_rows(study) -> list[list[str]]:
    rows = []
    for t in study.trials:
        ua = t.user_attrs
        startup = ua.get("startup") or {}
        bench = ua.get("bench") or {}
        c1, c32 = bench.get("1") or {}, bench.get("32") or {}
        sec = ua.get("seconds") or {}
        td = ua.get("teardown") or {}
        outcome = ua.get("outcome", "-")
        if ua.get("duplicate_of") is not None:
            outcome += f" of #{ua['duplicate_of']}"
        if ua.get("retry_of") is not None:
            outcome += f" (retry of #{ua['retry_of']})"
        teardown = "-"
        if td:
            teardown = "{} {:.2f}s gpu={} port={} pids={}".format(
                td.get("signal_sent"),
                td.get("seconds", 0.0),
                td.get("gpu_memory_released"),
                td.get("port_released"),
                len(td.get("stopped_pids") or ()),
            )
        events = (startup.get("runtime_events") or {}).get("retractions")
        rows.append(
            [
                str(t.number),
                t.state.name,
                outcome,
                "yes" if ua.get("launched") else "no",
                config_text(ua.get("candidate") or t.params),
                _fmt(startup.get("max_total_num_tokens")),
                _fmt(startup.get("max_running_requests")),
                _fmt(startup.get("ready_seconds")),
                _fmt(startup.get("cuda_graph_seconds")),
                _fmt(c1.get("output_tok_s")),
                _fmt(c32.get("agg_output_tok_s")),
                _fmt(c1.get("accept_length"), 2),
                _fmt(c32.get("ttft_ms_p99"), 0),
                _fmt(events),
                " / ".join(_fmt(sec.get(k)) for k in ("preflight", "launch", "bench", "teardown")),
                teardown,
            ]
        )
    return rows


HEADER = [
    "#",
    "state",
    "outcome",
    "launched",
    "steps/topk/draft @ mem",
    "max_total_num_tokens",
    "max_running_requests",
    "ready s",
    "graphs s",
    "tok/s C=1",
    "agg tok/s C=32",
    "accept C=1",
    "TTFT p99 ms C=32",
    "retractions",
    "s preflight / launch / bench / teardown",
    "teardown",
]


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def nvml_rows(study, paths: list[Path]) -> list[list[str]]:
    samples = []
    for path in paths:
        with path.open() as fh:
            for r in csv.DictReader(fh):
                try:
                    samples.append((float(r["unix_time"]), int(r["used_mib"]), r["pids"] or ""))
                except (KeyError, TypeError, ValueError):
                    continue
    samples.sort()
    rows = []
    for t in study.trials:
        server = t.system_attrs.get("autospec:server")
        if not server or not samples:
            continue
        spawn = float(server["recorded_at"])
        before = [s for s in samples if s[0] < spawn]
        end = t.datetime_complete.timestamp() if t.datetime_complete else spawn + 600
        during = [s for s in samples if spawn <= s[0] <= end]
        after = [s for s in samples if s[0] > end][:1]
        b = before[-1] if before else None
        peak = max(during, key=lambda s: s[1]) if during else None
        rows.append(
            [
                str(t.number),
                f"{b[1]} MiB, pids [{b[2]}] ({spawn - b[0]:.2f} s before)" if b else "-",
                f"{peak[1]} MiB, pids [{peak[2]}]" if peak else "-",
                f"{after[0][1]} MiB, pids [{after[0][2]}]" if after else "-",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True)
    parser.add_argument("--study", required=True)
    parser.add_argument("--nvml", type=Path, nargs="*", default=[], help="CSV files written by nvml_watch.py")
    args = parser.parse_args(argv)

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=args.study, storage=args.storage)
    print(markdown(HEADER, trial_rows(study)))
    if args.nvml:
        print()
        print(
            markdown(
                ["#", "NVML before spawn", "NVML peak while running", "NVML after the trial was told"],
                nvml_rows(study, args.nvml),
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
