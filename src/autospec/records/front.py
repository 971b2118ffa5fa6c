"""The Pareto front of a study: computed here and nowhere else.

Only `TrialClass.MEASURED` trials can be on the front. A configuration launched again to
confirm it (`TrialClass.RELAUNCH` trials, `Markers.confirm_of`) stays one point: its
first trial, with the mean of every measured launch (`launch_groups`, `pooled_values`); so
does one measured again as a trial of its own (`autospec optimize --remeasure`: the same
parameters and resolved flags as an earlier measured trial), and a reference point that
ran the same server (the same resolved flags) counts as one more launch of it.

An objective measured at concurrency C pools further (`objective_groups`): configurations
that differ only in flags that size the KV pool (`POOL_SIZING_FLAGS`, such as
`mem_fraction_static`) ran the same server at C when each of their launches held all C
requests at once with room for their tokens (`holds_level`), so their figures at C are
launches of one server and pooled as such; their figures at a concurrency where the pool
queued or could have queued requests stay apart.
A trial is on the front when no other measured trial is at least as good on every
objective and better on one; ties (equal values) stay on it together.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence

from autospec.records.stored import StoredTrial, TrialClass
from autospec.sglang_facts import POOL_SIZING_FLAGS, dedup_key

__all__ = ["dominates", "pareto_front", "launch_groups", "objective_groups", "holds_level", "pooled_values"]


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """`a` is at least as good as `b` on every objective and better on at least one."""
    no_worse = all((x >= y) if up else (x <= y) for x, y, up in zip(a, b, maximize))
    better = any((x > y) if up else (x < y) for x, y, up in zip(a, b, maximize))
    return no_worse and better


def launch_groups(trials: Sequence[StoredTrial]) -> dict[int, list[StoredTrial]]:
    """Measured trial number -> that trial and its measured relaunches, in number order: the
    trials that confirm it, and later measured trials of the same parameters and resolved
    flags on the same machine (`--remeasure`). A relaunch always comes after the trial it relaunches; a control
    relaunch on another machine is not in its group (it measures the machine). Measured
    reference points that ran the same server (`_add_references`) come last."""
    groups: dict[int, list[StoredTrial]] = {}
    first_of: dict[str, int] = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.trial_class == TrialClass.RELAUNCH:
            if t.markers.control == "machine":  # another machine: compared through it (records.machines), not pooled
                continue
            root = t.markers.confirm_of
        elif t.trial_class == TrialClass.MEASURED and t.values is not None:
            key = _server_key(t)
            key = None if key is None else f"{key}@{t.machine or ''}"  # launches of one machine pool
            root = first_of.get(key) if key is not None else None
            if root is None or not t.has_measurement:
                groups[t.number] = [t]
                if key is not None:
                    first_of.setdefault(key, t.number)
                continue
        else:
            continue
        if root in groups and t.has_measurement:
            groups[root].append(t)
    _add_references(trials, groups)
    return groups


def _add_references(trials: Sequence[StoredTrial], groups: dict[int, list[StoredTrial]]) -> None:
    """A measured reference point that ran the same server as a measured configuration (the
    same resolved flags: SGLang's defaults are usually a point of the space) is one more
    launch of that configuration: its figures pool in, after the configuration's own."""
    by_server: dict[str, int] = {}
    for number, group in groups.items():
        record = group[0].record
        if record is not None and record.resolved:
            by_server.setdefault(dedup_key(record.resolved), number)
    for t in sorted(trials, key=lambda t: t.number):
        if t.trial_class != TrialClass.REFERENCE or not t.has_measurement or t.record is None or not t.record.resolved:
            continue
        root = by_server.get(dedup_key(t.record.resolved))
        if root is not None:
            groups[root].append(t)


def _server_key(t: StoredTrial, ignore: frozenset[str] = frozenset()) -> str | None:
    """The trial's parameters and resolved flags as one text (None without resolved flags):
    equal keys mean the same configuration launched again (`ignore`: fields left out)."""
    if t.record is None or not t.record.resolved:
        return None
    params = sorted((k, v) for k, v in t.params.items() if k not in ignore)
    return json.dumps([params, dedup_key(t.record.resolved, ignore)], default=str)


def holds_level(t: StoredTrial, concurrency: int) -> bool:
    """The launch ran every request of its level at `concurrency` at once, with room in the
    KV pool for all their tokens (startup facts against the level's request sizes), so the
    pool's size could not change what it measured there. False where a fact is missing."""
    record = t.record
    level = record.bench.get(concurrency) if record is not None else None
    facts = record.startup if record is not None else None
    if not level or not facts:
        return False
    running, pool = _number(facts.get("max_running_requests")), _number(facts.get("max_total_num_tokens"))
    n_ok, prompt, completion = (_number(level.get(k)) for k in ("n_ok", "prompt_tokens_mean", "completion_tokens"))
    if running is None or pool is None or not n_ok or prompt is None or completion is None:
        return False
    return running >= concurrency and pool >= concurrency * (prompt + completion / n_ok)


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None


def objective_groups(
    trials: Sequence[StoredTrial], concurrency: int | None, groups: dict[int, list[StoredTrial]] | None = None
) -> dict[int, list[StoredTrial]]:
    """Measured trial number -> every launch that measured the same server at
    `concurrency`: its launch group, joined with those of configurations that differ from
    it only in `POOL_SIZING_FLAGS` where every launch of them `holds_level` (module
    docstring). Members of one class share one list, in number order. Without a
    concurrency (an imported figure), the launch groups. `groups`: `launch_groups(trials)`,
    when the caller has it."""
    groups = launch_groups(trials) if groups is None else groups
    if concurrency is None:
        return dict(groups)
    classes: dict[str, list[StoredTrial]] = {}
    out: dict[int, list[StoredTrial]] = {}
    for number, group in groups.items():
        key = _server_key(group[0], POOL_SIZING_FLAGS)
        key = None if key is None else f"{key}@{group[0].machine or ''}"  # one machine's launches pool
        if key is None or not all(holds_level(t, concurrency) for t in group):
            out[number] = list(group)
            continue
        members = classes.setdefault(key, [])
        members.extend(group)
        members.sort(key=lambda t: t.number)
        out[number] = members
    return out


def _measured(t: StoredTrial) -> Sequence[float] | None:
    if t.has_measurement and t.record is not None and t.record.values is not None:
        return t.record.values
    return t.values


def pooled_values(group: Sequence[StoredTrial]) -> tuple[float, ...]:
    """Per objective, the mean of the group's measured values (one launch: its values)."""
    rows = [v for v in map(_measured, group) if v is not None]
    return tuple(statistics.fmean(column) for column in zip(*rows))


def pareto_front(
    trials: Sequence[StoredTrial], maximize: Sequence[bool], concurrencies: Sequence[int | None] | None = None
) -> list[StoredTrial]:
    """The measured trials (relaunches pooled in) that no other one dominates, in number
    order. With the objectives' `concurrencies`, each objective pools as `objective_groups`
    says; without, over each configuration's own launches."""
    groups = launch_groups(trials)
    levels = list(concurrencies) if concurrencies is not None else [None] * len(maximize)
    per_objective = [objective_groups(trials, c, groups) for c in levels]
    points = [(group[0], tuple(pooled_values(by[n])[i] for i, by in enumerate(per_objective))) for n, group in groups.items()]
    return [t for t, v in points if not any(o is not t and dominates(ov, v, maximize) for o, ov in points)]
