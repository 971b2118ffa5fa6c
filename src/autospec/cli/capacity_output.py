"""What `autospec capacity` prints and saves while it runs, and how it stops on a signal.

- `measure_one`: one configuration's search, a header row and one row per level, the
  curve's JSON and CSV rewritten after every level (the plot and the page at the end).
- `stop_on_signals`: Ctrl-C, SIGTERM and SIGHUP end the search with the finished levels
  kept (`CapacityStop.request` cancels the level in flight); while a server starts, or at
  a second signal, they interrupt at once (KeyboardInterrupt: the launcher stops the server).
- `compare`: the configurations of ``--compare`` side by side, printed and saved.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from autospec.bench import Workload
    from autospec.launcher import LaunchRequest
    from autospec.report import TrialView
    from autospec.study.capacity import CapacityCurve, CapacityPlan, CapacityPoint, CapacityStop
    from autospec.study.files import StudyLayout

__all__ = ["measure_one", "stop_on_signals", "compare", "stopped_line", "LEVEL_HEADER", "level_row"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

LEVEL_HEADER = f"{'C':>6}  {'ok':>5}  {'TTFT p99 ms':>11}  {'TPOT p99 ms':>11}  {'agg tok/s':>9}  verdict"


def level_row(point: CapacityPoint) -> str:
    """One level under `LEVEL_HEADER`."""
    s = point.summary

    def number(key: str, digits: int) -> str:
        value = s.get(key)
        return "-" if value is None else f"{value:.{digits}f}"

    verdict = "holds" if point.holds else "breaks: " + "; ".join(point.broken)
    return (
        f"{point.concurrency:>6}  {s.get('n_ok', 0):>5}  {number('ttft_ms_p99', 1):>11}  "
        f"{number('tpot_ms_p99', 2):>11}  {number('agg_output_tok_s', 0):>9}  {verdict}"
    )


class Phase:
    """Whether a server is starting (a signal then interrupts at once)."""

    starting = False


@contextlib.contextmanager
def stop_on_signals(stop: CapacityStop) -> Iterator[Phase]:
    """Within the block, the first Ctrl-C / SIGTERM / SIGHUP asks `stop` to end the run
    (the level in flight is cancelled; a teardown or a file being written finishes); one
    while a server starts, or a second one, raises KeyboardInterrupt. The handlers before
    are restored after."""
    phase = Phase()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if phase.starting or stop.reason is not None:
            raise KeyboardInterrupt
        stop.request(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in _SIGNALS}
    try:
        yield phase
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def measure_one(
    study: str,
    trial: int,
    label: str,
    request: LaunchRequest,
    workload: Workload,
    plan: CapacityPlan,
    stop: CapacityStop,
    phase: Phase,
    out: TextIO,
) -> dict[str, Any]:
    """Search trial `trial`'s capacity (its server's log beside the curve's files) and
    save it; the saved curve (JSON-ready)."""
    from autospec.cli.wiring import default_probe
    from autospec.launcher import Launcher, NullGpuProbe
    from autospec.report.capacity import summary_line
    from autospec.study.capacity import measure_capacity

    folder = request.log_path.parent
    head = {"study": study, "trial": trial, "pick": label.removesuffix(" pick") if label.endswith(" pick") else None}
    head["label"] = label
    simulated = any("autospec.sim" in w for w in request.command)
    print(f"capacity of trial {trial} ({label}): starting its server (log: {request.log_path})", file=out, flush=True)
    started = time.monotonic()

    def ready(argv: Sequence[str]) -> None:
        phase.starting = False
        print(f"server ready in {time.monotonic() - started:.1f} s", file=out)
        print(LEVEL_HEADER, file=out, flush=True)

    def level_done(point: CapacityPoint, curve: CapacityCurve) -> None:
        print(level_row(point), file=out, flush=True)
        _save_data({**head, **curve.as_dict(), "workload": workload.as_dict()}, folder)

    phase.starting = True
    try:
        launcher = Launcher(probe=NullGpuProbe() if simulated else default_probe())
        curve = measure_capacity(launcher, request, workload, plan, on_level=level_done, on_ready=ready, stop=stop)
    finally:
        phase.starting = False
    payload = {**head, **curve.as_dict(), "workload": workload.as_dict()}
    paths = _save(payload, folder)
    print(summary_line(payload), file=out)
    print("saved " + ", ".join(str(p) for p in paths), file=out)
    return payload


def _save_data(curve: Mapping[str, Any], folder: Path) -> list[Path]:
    """capacity.json and capacity.csv, each written whole and then moved into place."""
    from autospec.report.capacity import write_csv

    folder.mkdir(parents=True, exist_ok=True)
    json_tmp, csv_tmp = folder / ".capacity.json.tmp", folder / ".capacity.csv.tmp"
    json_tmp.write_text(json.dumps(curve, indent=1, default=str) + "\n")
    write_csv(curve, csv_tmp)
    json_tmp.replace(folder / "capacity.json")
    csv_tmp.replace(folder / "capacity.csv")
    return [folder / "capacity.json", folder / "capacity.csv"]


def _save(curve: Mapping[str, Any], folder: Path) -> list[Path]:
    from autospec.report.capacity import capacity_figure, write_html
    from autospec.report.plots import render

    paths = _save_data(curve, folder)
    svg = render(capacity_figure(curve), folder / "capacity")
    write_html(curve, svg, folder / "capacity.html")
    return [*paths, folder / "capacity.png", folder / "capacity.html"]


def _at_capacity(curve: Mapping[str, Any], metric: str) -> Any:
    points = {p["concurrency"]: p for p in curve.get("points", [])}
    point = points.get(curve.get("capacity"))
    return None if point is None else (point.get("summary") or {}).get(metric)


def compare_rows(curves: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows) of the side-by-side table: one row per configuration."""
    bounded = [b["metric"] for b in curves[0].get("bounds", [])] if curves else []
    headers = ["configuration", "trial", "capacity C", "first C that broke", "agg tok/s at capacity"]
    headers += [f"{m} at capacity" for m in bounded] + ["finished"]
    rows = []
    for c in curves:
        agg = _at_capacity(c, "agg_output_tok_s")
        row: list[Any] = [c.get("label"), c.get("trial"), _or_dash(c.get("capacity")), _or_dash(c.get("first_broken"))]
        row.append("-" if agg is None else f"{agg:,.0f}")
        for m in bounded:
            value = _at_capacity(c, m)
            row.append("-" if value is None else f"{value:.2f}")
        row.append("yes" if c.get("stopped") is None else f"no ({c['stopped']})")
        rows.append(row)
    return headers, rows


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def compare(
    curves: Sequence[Mapping[str, Any]],
    targets: Sequence[tuple[TrialView, str]],
    folder: Path,
    out: TextIO,
    stopped: str | None = None,
) -> None:
    """Print the configurations side by side (those not measured, when the run stopped,
    named below) and save the table as compare.json and compare.csv in `folder`."""
    import csv

    from autospec.cli.render import table

    if not curves:
        return
    headers, rows = compare_rows(curves)
    bounds = " and ".join(f"{b['metric']} <= {b['max']:g}" for b in curves[0].get("bounds", []))
    print(f"\nside by side, under {bounds} (the same levels, waves and workload):", file=out)
    print(table(headers, rows, align_right=[False] + [True] * (len(headers) - 2) + [False]), file=out)
    missing = [label for trial, label in targets[len(curves) :]]
    if missing:
        why = "--timeout ended the run" if stopped == "timeout" else f"{stopped} stopped the run"
        print(f"not measured ({why} first): {', '.join(missing)}", file=out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare.json").write_text(json.dumps({"headers": headers, "rows": rows, "curves": list(curves)}, default=str))
    with open(folder / "compare.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(headers)
        writer.writerows(rows)


def stopped_line(reason: str, curves: Sequence[Mapping[str, Any]], targets: Sequence[Any], layout: StudyLayout) -> str:
    """The one line a signal ends the run with: where it stopped and where the files are."""
    if not curves:
        return f"autospec: {reason}: stopped before any level finished; nothing saved"
    last = curves[-1]
    levels = len(last.get("points", []))
    folder = layout.capacity_dir(int(last["trial"]))
    rest = len(targets) - len(curves)
    others = f"; {rest} configuration(s) of --compare not measured" if rest else ""
    return (
        f"autospec: {reason}: stopped; {folder}/capacity.json and capacity.csv keep the {levels} finished level(s) "
        f"of trial {last['trial']}{others}"
    )
