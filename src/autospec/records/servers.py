"""The same server: which launches of a study measured one server (pure).

This is the one place that decides it; the front (`autospec.records.front`), the pooled
figures (`autospec.records.launches`), the confirmation contests, the race, the report
and `pareto --json` all read their configurations from here.

- **A configuration** (`launch_groups`) is every measured launch of one server: launches
  with the same resolved flags (`server_key`: SGLang's flags after its rewrites, where it
  listens and logs left out), a confirmation relaunch (`Markers.confirm_of`) with the
  trial it relaunches. Reference points (`Markers.reference`: no speculation, SGLang's
  defaults, adaptive) are configurations like any other: a search trial that resolved to
  the same server as a reference joins the reference's configuration, which is then
  named by the reference (a deployable server whose flags SGLang chooses), else by its
  first launch. A reference that broke an SLO is no configuration (it cannot be served).
  Launches pool only within one machine (`StoredTrial.machine`), and a server has one
  configuration: a control relaunch on another machine (`Markers.control == "machine"`)
  and any later launch of a server measured first on another machine (a `--remeasure`
  relaunch, a retry or a confirmation after the study moved) are in no group; the control,
  with the confirmations of its configuration there, measures the machine factor
  (`autospec.records.machines`). A confirmation relaunch on its configuration's machine
  pools with the trial it relaunches.
- **The same server at one concurrency** (`objective_groups`): configurations that differ
  only in flags that size the KV pool (`POOL_SIZING_FLAGS`, such as
  `mem_fraction_static`) ran the same batches at C when each of their launches held all C
  requests at once with room for their tokens (`holds_level`), so their figures at C are
  launches of one server and pooled as such; at a concurrency where the pool queued or
  could have queued requests they stay apart.
"""

from __future__ import annotations

from collections.abc import Sequence

from autospec.records.stored import StoredTrial, TrialClass
from autospec.sglang_facts import POOL_SIZING_FLAGS, dedup_key

__all__ = ["server_key", "is_configuration", "launch_groups", "launches_elsewhere", "objective_groups", "holds_level"]


def server_key(t: StoredTrial, ignore: frozenset[str] = frozenset()) -> str | None:
    """The trial's resolved flags as one text (None without resolved flags): equal keys
    mean the same server (`ignore`: flags left out as well, e.g. `POOL_SIZING_FLAGS`).
    Where the server logged what it runs (`startup["logged_flags"]`: the speculative
    shape and memory fraction after SGLang's own resolution), that wins over the flags
    resolved before the launch, so a reference point that left them to SGLang matches the
    search trial that set them to the same values; flags it logged as None are unset."""
    if t.record is None or not t.record.resolved:
        return None
    logged = (t.record.startup or {}).get("logged_flags")
    flags = {**t.record.resolved, **(logged if isinstance(logged, dict) else {})}
    return dedup_key({k: v for k, v in flags.items() if v is not None}, ignore)


def is_configuration(t: StoredTrial) -> bool:
    """A launch that measures a servable configuration: measured (launched or imported), a
    relaunch, or a reference point within every SLO."""
    if t.trial_class in (TrialClass.MEASURED, TrialClass.RELAUNCH):
        return True
    return t.trial_class == TrialClass.REFERENCE and not any(v > 0 for v in t.constraints.values())


def launch_groups(trials: Sequence[StoredTrial]) -> dict[int, list[StoredTrial]]:
    """Configuration -> its measured launches, in number order (module docstring). The key
    is the configuration's name: its first reference, else its first launch. Relaunches
    always come after the trial they relaunch."""
    groups: dict[int, list[StoredTrial]] = {}
    root_of: dict[int, int] = {}  # trial number -> the first launch of its configuration
    first_of: dict[str, int] = {}
    machine_of: dict[str, str] = {}  # server -> the machine its configuration was measured on
    for t in sorted(trials, key=lambda t: t.number):
        if not is_configuration(t) or (t.values is None and not t.has_measurement):
            continue
        if t.markers.control == "machine":  # another machine: compared through it (records.machines), not pooled
            continue
        confirm_of = t.markers.confirm_of
        server = server_key(t)
        if confirm_of is None and server is not None and machine_of.setdefault(server, t.machine or "") != (t.machine or ""):
            continue  # the server is a configuration on another machine already: one front entry per server
        key = None if server is None else f"{server}@{t.machine or ''}"  # `_machine_key`, from the key read above
        if confirm_of is not None:
            root = root_of.get(confirm_of)
            if root is not None and _moved(groups[root][0], t):
                continue  # a confirmation after the study moved: compared through the machine factor, not pooled
        else:
            root = first_of.get(key) if key is not None else None
        if root is None or not t.has_measurement:
            if t.trial_class == TrialClass.RELAUNCH or confirm_of is not None:
                continue  # a relaunch of nothing measured
            groups[t.number] = [t]
            root_of[t.number] = t.number
            if key is not None:
                first_of.setdefault(key, t.number)
            continue
        groups[root].append(t)
        root_of[t.number] = root
    return {_name(group): group for group in groups.values()}


def _moved(first: StoredTrial, later: StoredTrial) -> bool:
    """`later` ran on another machine than `first`, both machines known (a study recorded
    before machine keys pools as one)."""
    return bool(first.machine and later.machine and first.machine != later.machine)


def launches_elsewhere(trials: Sequence[StoredTrial], groups: dict[int, list[StoredTrial]]) -> dict[int, int]:
    """Measured launches in no group of `launch_groups` whose server is a configuration
    measured on another machine (controls included) -> that configuration's name."""
    named = {key: group for group in groups.values() if (key := server_key(group[0])) is not None}
    members = {t.number for group in groups.values() for t in group}
    out = {}
    for t in trials:
        if not t.launched or not t.has_measurement or t.number in members:
            continue
        group = named.get(server_key(t) or "")
        if group is not None and (t.machine or "") != (group[0].machine or ""):
            out[t.number] = _name(group)
    return out


def _machine_key(t: StoredTrial, ignore: frozenset[str] = frozenset()) -> str | None:
    """`server_key` on the machine the launch ran on: launches of one server pool only
    within one machine (`StoredTrial.machine`; studies before machine keys pool as one)."""
    key = server_key(t, ignore)
    return None if key is None else f"{key}@{t.machine or ''}"


def _name(group: Sequence[StoredTrial]) -> int:
    """The number a configuration goes by: its first reference point, else its first launch."""
    return next((t.number for t in group if t.markers.reference is not None), group[0].number)


def holds_level(t: StoredTrial, concurrency: int, at_once: int | None = None) -> bool:
    """The launch ran every request of its level at `concurrency` at once, with room in the
    KV pool for all their tokens (startup facts against the level's request sizes), so the
    pool's size could not change what it measured there (`at_once`: that many of them, not
    all). False where a fact is missing."""
    record = t.record
    level = record.bench.get(concurrency) if record is not None else None
    facts = record.startup if record is not None else None
    if not level or not facts:
        return False
    running, pool = _number(facts.get("max_running_requests")), _number(facts.get("max_total_num_tokens"))
    n_ok, prompt, completion = (_number(level.get(k)) for k in ("n_ok", "prompt_tokens_mean", "completion_tokens"))
    if running is None or pool is None or not n_ok or prompt is None or completion is None:
        return False
    count = concurrency if at_once is None else at_once
    return running >= count and pool >= count * (prompt + completion / n_ok)


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None


def objective_groups(
    trials: Sequence[StoredTrial], concurrency: int | None, groups: dict[int, list[StoredTrial]] | None = None
) -> dict[int, list[StoredTrial]]:
    """Configuration -> every launch that measured the same server at `concurrency`: its
    launch group, joined with those of configurations that differ from it only in
    `POOL_SIZING_FLAGS` where every launch of them `holds_level` (module docstring).
    Members of one class share one list, in number order. Without a concurrency (an
    imported figure), the launch groups. `groups`: `launch_groups(trials)`, when the
    caller has it."""
    groups = launch_groups(trials) if groups is None else groups
    if concurrency is None:
        return dict(groups)
    classes: dict[str, list[StoredTrial]] = {}
    out: dict[int, list[StoredTrial]] = {}
    for number, group in groups.items():
        key = _machine_key(group[0], POOL_SIZING_FLAGS)
        if key is None or not all(holds_level(t, concurrency) for t in group):
            out[number] = list(group)
            continue
        members = classes.setdefault(key, [])
        members.extend(group)
        members.sort(key=lambda t: t.number)
        out[number] = members
    return out
