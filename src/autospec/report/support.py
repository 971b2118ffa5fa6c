"""What a pick rests on, in one sentence (pure).

For a pick chosen on one objective: how many launches its figure pools (its own, and those
of configurations that ran the same server at that objective's concurrency), its ratio to
the runner-up on that objective (the best other measured configuration) with its 95%
interval, paired over the requests or waves both measured (`autospec.metrics.paired`; the
between-launch spread is its floor), and whether that separates them or they are tied, and
where its own launches disagree beyond their intervals. The runner-up's own figure keeps
its interval over its requests ("over these prompts"). Separation follows
`autospec.records.confirming`, the rule the study's confirmation launches stop on: an
unpaired comparison (a study measured before per-request figures) on one launch counts as
separated only once the study has measured the spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autospec.metrics.paired import MIN_MATCHED, Comparison
from autospec.metrics.relaunch import LaunchFigure, Pooled
from autospec.records.confirming import MIN_LAUNCHES, launches_disagree, overlap
from autospec.report.data import Measure, StudyData, TrialView

__all__ = ["support_note", "runner_up", "rivals", "disagreeing_launches", "Standing", "standing", "versus_text", "versus_json"]


@dataclass(frozen=True)
class Standing:
    """What a pick on objective `index` rests on: its figure, the launches behind it (its
    own and those of `pooled_with`: the same server there), the runner-up, and whether
    its interval separates it from the runner-up (None: nothing to compare with; False
    also while one launch cannot settle it, `settled` telling which)."""

    index: int
    measure: Measure
    launches: int
    own_launches: int
    pooled_with: tuple[int, ...]
    runner_up: TrialView | None
    runner_up_measure: Measure | None
    separated: bool | None
    unsettled_single_launch: bool
    disagree: tuple[str, ...]


def standing(data: StudyData, chosen: TrialView, i: int) -> Standing:
    """`chosen`'s standing on objective `i` (module docstring)."""
    o = data.objectives[i]
    n = chosen.objective_launches[i] if i < len(chosen.objective_launches) else chosen.launches
    others = chosen.pooled_with[i] if i < len(chosen.pooled_with) else ()
    other = runner_up(data, chosen, i)
    a = _measure(chosen, data, i)
    b = None if other is None else _measure(other, data, i)
    separated: bool | None = None
    single = False
    if other is not None and b is not None:
        c = data.compare(chosen, other, i)
        if c is not None and c.paired:  # the paired ratio decides (its interval carries the spread)
            separated = c.separated
        else:
            apart = not overlap(_pooled(a, n), _pooled(b, other.launches))
            single = apart and n < MIN_LAUNCHES and o.name not in data.spread
            separated = apart and not single
    differ = tuple(disagreeing_launches(data, chosen))
    return Standing(i, a, n, chosen.launches, tuple(others), other, b, separated, single, differ)


def _measure(t: TrialView, data: StudyData, i: int) -> Measure:
    m = t.objective_measure(data.objectives[i], i)
    return m if m is not None else Measure(t.value(i))


def _pooled(m: Measure, launches: int) -> Pooled:
    return Pooled(m.value, m.half_width, launches, m.half_width, None)


def rivals(data: StudyData, chosen: TrialView, i: int) -> list[TrialView]:
    """The measured configurations other than `chosen` and those whose figure on objective
    `i` pools with `chosen`'s (the same figure: not a rival)."""
    same = chosen.pooled_with[i] if i < len(chosen.pooled_with) else ()
    return [t for t in data.measured if t.number != chosen.number and t.number not in same]


def runner_up(data: StudyData, chosen: TrialView, i: int) -> TrialView | None:
    """The best of `rivals` on objective `i`."""
    others = rivals(data, chosen, i)
    if not others:
        return None
    sign = 1.0 if data.objectives[i].maximize else -1.0
    # configurations pooled into one figure tie: the one on the front stands for them
    return max(others, key=lambda t: (sign * _measure(t, data, i).value, t.kind == "front", -t.number))


def versus_text(data: StudyData, chosen: TrialView, other: TrialView, i: int, launches: int) -> str:
    """'against the runner-up, trial 7 (312.4 +-9.1 over these prompts): x1.052 (95% 1.021-1.084,
    paired over 14 requests, 2 and 1 launches): separated' (or tied, and why)."""
    o = data.objectives[i]
    where = f"C={o.concurrency}" if o.concurrency is not None else o.name
    b = _measure(other, data, i)
    own = f" +-{b.half_width:.1f}" if b.half_width is not None else ""
    head = f"against the runner-up at {where}, trial {other.number} ({b.value:.1f}{own} over these prompts)"
    c = data.compare(chosen, other, i)
    if c is None:
        return head + ": no ratio can be formed"
    how = (
        f"paired over {c.matched} {c.unit}" + (f", {c.dropped} unmatched left out" if c.dropped else "")
        if c.paired
        else (
            f"unpaired: only {c.matched} {c.unit[:-1] if c.matched == 1 else c.unit} matched"
            if c.unit != "figures"
            else "unpaired: no per-request figures"
        )
    )
    on = f" on {c.machines} machines" if c.machines > 1 else ""
    if c.factors:
        on += f", through {c.factors} machine factor{'s' if c.factors > 1 else ''}"
    ratio = f"x{c.ratio:.3f} (95% {c.lo:.3f}-{c.hi:.3f}, {how}, {c.launches[0]} and {c.launches[1]} launches{on})"
    if c.unsettled:
        return f"{head}: {ratio}: tied, a launch's rate never settled"
    if c.unjoined:
        return f"{head}: {ratio}: not decided, measured on two machines no control relaunch joins, so their difference is in it"
    if not c.separated:
        return f"{head}: {ratio}: tied, the interval holds 1{_pairing_hint(c, data, (chosen, other), i)}"
    if not c.paired and launches < MIN_LAUNCHES and o.name not in data.spread:
        return f"{head}: {ratio}: separated, but the between-launch spread is not measured yet, so one launch cannot settle it"
    return f"{head}: {ratio}: separated"


def _short_sides(data: StudyData, trials: Sequence[TrialView], i: int) -> list[tuple[int, int]]:
    """(trial number, positions its launches hold) of each of `trials` whose launches hold
    fewer than MIN_MATCHED positions on objective `i` (steady waves at C>1, the ramp left out)."""
    short = []
    for t in trials:
        side = data.side(t, i)
        held = len(set().union(*(s.keys() for s in side.series))) if side is not None and side.series else 0
        if held < MIN_MATCHED:
            short.append((t.number, held))
    return short


def _pairing_hint(c: Comparison, data: StudyData, trials: Sequence[TrialView], i: int) -> str:
    """How a comparison of `trials` on objective `i` left unpaired by too few matched waves
    would pair (empty where it paired, or has no per-position figures): its short sides
    (`_short_sides`) relaunched with longer levels. Wave 0, the ramp, never pairs
    (`autospec.records.launches.RAMP_WAVE`), so a level needs MIN_MATCHED + 1 waves."""
    if c.paired or c.unit != "waves":
        return ""
    short = _short_sides(data, trials, i)
    need = MIN_MATCHED + 1
    held = " and ".join(f"trial {n}'s {w} wave{'s' if w != 1 else ''}" for n, w in short) or "the waves both hold"
    return (
        f"; a C>1 comparison pairs over {MIN_MATCHED} waves after the first, and {held} after the first are fewer: "
        f"launched again with levels of {need} or more waves ([bench] requests_multiplier = {need}, where the space "
        f"sets fewer), {'they' if len(short) != 1 else 'it'} would pair"
    )


def versus_json(data: StudyData, chosen: TrialView, i: int) -> dict[str, Any] | None:
    """The pick against its runner-up on objective `i`, as `pareto --json` gives it."""
    other = runner_up(data, chosen, i)
    c = None if other is None else data.compare(chosen, other, i)
    if other is None or c is None:
        return None
    return {"objective": data.objectives[i].name, "runner_up": other.number, **c.as_dict()}


def disagreeing_launches(data: StudyData, chosen: TrialView) -> list[str]:
    """Objective names on which `chosen`'s launches differ beyond their own intervals."""
    group = [chosen, *(t for t in data.trials if t.confirm_of == chosen.number and t.kind == "relaunch" and t.measured)]
    if len(group) < 2:
        return []
    found = []
    for o in data.objectives:
        if o.concurrency is None:
            continue
        figures = [m for m in (t.measure(o.metric, o.concurrency) for t in group) if m is not None]
        if launches_disagree([LaunchFigure(m.value, m.half_width) for m in figures]):
            found.append(f"C={o.concurrency}")
    return found


def support_note(data: StudyData, chosen: TrialView, i: int) -> str:
    """' It rests on 2 launches; ...' (see the module docstring); '' without a figure."""
    o = data.objectives[i]
    where = f"C={o.concurrency}" if o.concurrency is not None else o.name
    st = standing(data, chosen, i)
    n = st.launches
    text = f" It rests on {n} launch{'es' if n != 1 else ''}"
    if st.pooled_with:
        text += (
            f" ({st.own_launches} of its own, {n - st.own_launches} of trial(s) {', '.join(map(str, st.pooled_with))}: "
            f"the same server at {where}, where only the KV pool's size differs)"
        )
    other, b = st.runner_up, st.runner_up_measure
    if other is None or b is None:
        text += "; nothing else was measured to compare it with"
    else:
        text += "; " + versus_text(data, chosen, other, i, n)
    if st.disagree:
        text += f"; its launches disagree beyond their own intervals at {', '.join(st.disagree)} (launch-to-launch spread)"
    return text + "."
