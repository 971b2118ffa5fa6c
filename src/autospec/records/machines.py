"""Which machine a launch ran on, and how two machines compare through a control.

A *machine key* names where a trial's server ran: the host and the GPUs it used,
``"host/GPU-uuid,GPU-uuid"`` (NVML's UUIDs), or ``"host/sim:NAME"`` for a simulated machine
(``AUTOSPEC_SIM_MACHINE``); just ``"host"`` where neither is known. It is stored in the
worker record of every launched trial (``worker["machine"]``).

A *control* is a relaunch of a configuration already measured (the latency pick, or a
reference point) made first when a study continues on another machine or after a long
pause (`autospec.study.proposing.control`). The *machine factor* is the paired ratio
(`autospec.metrics.paired`) of the control's launches on the new machine over that
configuration's launches on the old one, at the first objective; figures measured only on
the new machine are compared with figures from the old one through it (`through_factor`),
and machines no control joined directly through a chain of such factors (`between_machines`:
a study that moved over four machines in four sessions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autospec.metrics.paired import Comparison, LogSpread, Side, across_machines, compare, paired_ratio, unpaired_ratio
from autospec.records.launches import ObjectiveRef, PooledStudy, launch_figure, level_series
from autospec.records.stored import StoredTrial

__all__ = [
    "MachineFactor",
    "between_machines",
    "compare_on_machines",
    "compare_pooled",
    "machine_key",
    "machine_of",
    "machine_factors",
    "study_factors",
    "through_factor",
]


def machine_key(host: str, gpus: Sequence[str] = ()) -> str:
    """The key of `host` with the GPUs `gpus` (UUIDs or ``sim:NAME``), in the order given."""
    return f"{host}/{','.join(gpus)}" if gpus else host


def machine_of(trial: StoredTrial) -> str | None:
    """The machine key a trial's server ran on; None for trials recorded before keys were."""
    return trial.machine


@dataclass(frozen=True)
class MachineFactor:
    """Machine `new` over machine `old`: `comparison` (ratio and 95% interval) from control
    trial `control`, on objective `objective`."""

    new: str
    old: str
    control: int
    objective: int
    comparison: Comparison

    def as_dict(self) -> dict[str, Any]:
        where = {"new": self.new, "old": self.old, "control": self.control, "objective": self.objective}
        return {**where, **self.comparison.as_dict()}


def _same_configuration(trials: Sequence[StoredTrial], control: StoredTrial) -> list[StoredTrial]:
    """The measured launches of the control's configuration other than the control itself."""
    m = control.markers
    out = []
    for t in trials:
        if t.number == control.number or not t.has_measurement:
            continue
        same_pick = m.confirm_of is not None and m.confirm_of in (t.number, t.markers.confirm_of)
        if same_pick or (m.reference is not None and t.markers.reference == m.reference):
            out.append(t)
    return out


def _factor(
    trials: Sequence[StoredTrial], control: StoredTrial, ref: ObjectiveRef, spread: LogSpread | None
) -> MachineFactor | None:
    new = machine_of(control)
    peers = _same_configuration(trials, control)
    # the machine it continues from: the last one its configuration ran on before it (a later
    # control, on a machine the study moved to afterwards, is that machine's own comparison)
    before = sorted((t for t in peers if t.number < control.number), key=lambda t: t.number)
    old_keys = [k for k in (machine_of(t) for t in before) if k is not None and k != new]
    if new is None or not old_keys:
        return None
    old = old_keys[-1]
    sides = ([control] + [t for t in peers if machine_of(t) == new], [t for t in peers if machine_of(t) == old])

    def level(t: StoredTrial) -> Any:
        return t.record.bench.get(ref.concurrency) if t.record is not None and ref.concurrency is not None else None

    series = [[s[0] for s in (level_series(level(t), ref.metric) for t in side) if s is not None] for side in sides]
    comparison = paired_ratio(series[0], series[1], spread) if all(series) else None
    if comparison is None:
        figures = [[f for f in (launch_figure(t, ref) for t in side) if f is not None] for side in sides]
        if not all(figures):
            return None
        a, b = figures[0][0], figures[1][0]
        comparison = unpaired_ratio(a.value, a.half, b.value, b.half, (len(figures[0]), len(figures[1])))
    if comparison is None:
        return None
    return MachineFactor(new, old, control.number, ref.index, comparison)


def machine_factors(trials: Sequence[StoredTrial], ref: ObjectiveRef, spread: LogSpread | None) -> list[MachineFactor]:
    """One factor per measured control trial that ran on another machine than earlier
    launches of its configuration, in trial order (`ref`: the objective it is read on)."""
    controls = [t for t in trials if t.markers.control is not None and t.has_measurement]
    found = (_factor(trials, t, ref, spread) for t in sorted(controls, key=lambda t: t.number))
    return [f for f in found if f is not None]


def study_factors(
    trials: Sequence[StoredTrial], refs: Sequence[ObjectiveRef], pooled: PooledStudy
) -> dict[int, list[MachineFactor]]:
    """Per objective index, the factors its controls measured (`machine_factors`); only
    objectives with one."""
    found = {r.index: machine_factors(trials, r, pooled.log_spread.get(r.index)) for r in refs}
    return {i: f for i, f in found.items() if f}


def compare_on_machines(
    a: Side,
    b: Side,
    spread: LogSpread | None,
    homes: tuple[frozenset[str], frozenset[str]],
    away: tuple[Mapping[str, Side], Mapping[str, Side]],
    factors: Sequence[MachineFactor],
) -> Comparison | None:
    """A over B wherever they ran (`homes`: the machines each side's launches ran on; `away`:
    each one's sides on the other machines). On one machine: with their pairs on the others
    both ran on (`across_machines`). On two: through the controls' factors between them,
    directly or in a chain, else flagged `unjoined` (it then decides nothing). Where a side's
    machine is not known (records from before machine keys) or spans several: as measured."""
    found = compare(a, b, spread)
    if len(homes[0]) == 1 and homes[0] == homes[1]:
        return across_machines(found, away[0], away[1], spread)
    if found is None or any(len(h) != 1 for h in homes):
        return found
    factor = between_machines(factors, next(iter(homes[0])), next(iter(homes[1])))
    return replace(found, unjoined=True) if factor is None else through_factor(found, factor)


def compare_pooled(
    pooled: PooledStudy,
    a: int,
    b: int,
    index: int,
    factors: Mapping[int, Sequence[MachineFactor]],
    sides: tuple[Side | None, Side | None] | None = None,
) -> Comparison | None:
    """Measured configuration `a` over `b` on objective `index` (`compare_on_machines`), from
    their pooled launches (`factors`: `study_factors`; `sides`: the two sides where the caller
    has its own, e.g. a reference's single launch, else `PooledStudy.side`)."""
    sa, sb = sides if sides is not None else (pooled.side(a, index), pooled.side(b, index))
    if sa is None or sb is None:
        return None
    homes = (pooled.ran_on(a, index), pooled.ran_on(b, index))
    away = (pooled.away_from_home(a, index), pooled.away_from_home(b, index))
    return compare_on_machines(sa, sb, pooled.log_spread.get(index), homes, away, factors.get(index, ()))


def through_factor(comparison: Comparison, factor: Comparison) -> Comparison:
    """A over B where A was measured only on the factor's new machine and B only on its old
    one: the ratio divided by the factor, the log half-widths added in quadrature, and the
    factors it went through counted (`Comparison.factors`: a measured factor is one, a chain
    from `between_machines` its steps)."""
    log_r = math.log(comparison.ratio) - math.log(factor.ratio)
    halves = [(math.log(c.hi) - math.log(c.lo)) / 2 for c in (comparison, factor)]
    half = math.hypot(*halves)
    return Comparison(
        ratio=math.exp(log_r),
        lo=math.exp(log_r - half),
        hi=math.exp(log_r + half),
        matched=comparison.matched,
        dropped=comparison.dropped,
        launches=comparison.launches,
        paired=comparison.paired,
        unit=comparison.unit,
        unsettled=comparison.unsettled + factor.unsettled,
        factors=comparison.factors + max(factor.factors, 1),
    )


def between_machines(factors: Sequence[MachineFactor], new: str, old: str) -> Comparison | None:
    """Machine `new` over machine `old` through the controls' `factors` (one objective's, in
    trial order): the latest factor between the two, else a chain through other machines
    (the fewest steps, each the latest factor of its pair, inverted where it was measured the
    other way; the ratios multiply and the log half-widths add in quadrature); None where no
    chain joins them or `new` is `old`. Its `factors` counts the steps."""
    steps: dict[str, dict[str, Comparison]] = {}  # x -> y -> y over x
    for f in factors:  # later controls of a pair replace earlier ones; each is one step
        step = replace(f.comparison, factors=1)
        steps.setdefault(f.old, {})[f.new] = step
        steps.setdefault(f.new, {})[f.old] = step.inverse()
    reached: dict[str, Comparison | None] = {old: None}  # machine -> it over `old`
    frontier = [old]
    while frontier and new not in reached:
        following = []
        for x in frontier:
            for y, step in steps.get(x, {}).items():
                if y not in reached:
                    over_x = reached[x]  # through_factor counts over_x's steps onto this one
                    reached[y] = step if over_x is None else through_factor(step, over_x.inverse())
                    following.append(y)
        frontier = following
    return reached.get(new)
