"""Where a study's trials ran: per hardware class (GPU type x GPUs per server, shared or
not), the hosts and slots that ran launches there and the front members measured there.
Measurements from different hardware are not comparable one to one, so a study that mixed
them should be read per class (docs/distributed.md)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from autospec.report.data import StudyData

__all__ = ["placement_json", "placement_lines", "machines_json", "machine_lines"]


def placement_json(data: StudyData) -> list[dict[str, Any]]:
    """One entry per hardware class of the launched trials: launches, hosts, slots, front
    trial numbers. Empty when no trial records its worker."""
    classes: dict[str, dict[str, Any]] = defaultdict(lambda: {"launches": 0, "hosts": set(), "slots": set(), "front": []})
    front = {t.number for t in data.front}
    for t in data.trials:
        if not t.launched or not t.worker:
            continue
        entry = classes[str(t.worker.get("hardware") or "unrecorded")]
        entry["launches"] += 1
        entry["hosts"].add(str(t.worker.get("host", "?")))
        slot = t.worker.get("slot")
        if isinstance(slot, dict) and "index" in slot:
            entry["slots"].add(f"{t.worker.get('host', '?')}/{slot['index']}")
        if t.number in front:
            entry["front"].append(t.number)
    return [
        {
            "hardware": name,
            "launches": e["launches"],
            "hosts": sorted(e["hosts"]),
            "slots": sorted(e["slots"]),
            "front": sorted(e["front"]),
        }
        for name, e in sorted(classes.items())
    ]


def placement_lines(data: StudyData) -> list[str]:
    """Text of `placement_json`, only when the study ran on several hosts, slots or
    hardware classes (one worker on one GPU set needs no such section)."""
    rows = placement_json(data)
    hosts = {h for r in rows for h in r["hosts"]}
    slots = {s for r in rows for s in r["slots"]}
    if len(rows) <= 1 and len(hosts) <= 1 and len(slots) <= 1:
        return []
    lines = []
    for r in rows:
        front = ", ".join(str(n) for n in r["front"]) or "none"
        lines.append(
            f"{r['hardware']}: {r['launches']} launches on {', '.join(r['hosts'])}"
            + (f" ({len(r['slots'])} slots)" if r["slots"] else "")
            + f"; front trials: {front}"
        )
    if len(rows) > 1:
        lines.append("measurements from different hardware classes are not comparable one to one: read the front per class")
    return lines


def _latency_objective(data: StudyData) -> int | None:
    """The lowest-concurrency objective (the latency pick's)."""
    levels = [(o.concurrency or 0, i) for i, o in enumerate(data.objectives)]
    return min(levels)[1] if levels else None


def machines_json(data: StudyData) -> list[dict[str, Any]]:
    """Every machine factor a control trial measured (`autospec.records.machines`), per
    objective: the new machine over the old, with its 95% interval."""
    return [{**f.as_dict(), "objective": data.objectives[i].name} for i, found in sorted(data.machines.items()) for f in found]


def machine_lines(data: StudyData) -> list[str]:
    """One line per control trial that measured a machine factor, with every objective's
    factor, the latency objective first: "machine B over machine A, from the control trial N:
    x1.046 (1.031-1.061) at output_tok_s@c1, x1.175 (1.096-1.260) at agg_output_tok_s@c32". A
    factor is per objective: a machine can be as fast at C=1 and faster at C=32."""
    first = _latency_objective(data)
    by_control: dict[tuple[str, str, int], list[str]] = {}
    for i in sorted(data.machines, key=lambda i: (i != first, i)):
        for f in data.machines[i]:
            c = f.comparison
            factor = f"x{c.ratio:.3f} ({c.lo:.3f}-{c.hi:.3f}) at {data.objectives[i].name}"
            by_control.setdefault((f.new, f.old, f.control), []).append(factor)
    return [
        f"machine {new} over machine {old}, from the control trial {control}: {', '.join(factors)}"
        for (new, old, control), factors in by_control.items()
    ]
