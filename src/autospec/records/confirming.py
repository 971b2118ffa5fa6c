"""What the picks of a study rest on, and which relaunch would settle them (pure).

A *contest* is one pick objective (the lowest- and the highest-concurrency objective: the
latency and the throughput pick): its leader is the measured configuration with the best
pooled value (relaunches pooled in, `autospec.records.launches.pool_study`), its
*contenders* the other measured configurations it is not separated from: the 95% interval
of the leader's ratio to them holds 1 (`autospec.metrics.paired`: over matched requests or
waves, with the between-launch spread as its floor), or, where a side has no per-position
figures (studies measured before them), their pooled 95% intervals overlap (the difference
is within the two half-widths combined in quadrature). The
*runner-up* is the best of the others, overlapping or not. Configurations whose figures
pool into one (the same server at that concurrency, `autospec.records.front.objective_groups`)
are one member, the lowest trial number standing for them.

A contest is *settled* when no contender is left and the comparisons can be trusted: they
are all paired (their intervals carry the between-launch spread, measured or its prior), or
the leader rests on at least `MIN_LAUNCHES` launches, or the between-launch spread of that
objective is measured. So confirmation launches go only where a paired interval still holds
1; the rest of the budget goes to the search. A contest that is
not settled is *tied* once every configuration in it has `MAX_LAUNCHES` launches, or
once all of them rest on `MIN_LAUNCHES` and differ by at most `TIE_MARGIN` (a difference
too small to matter, and too small to resolve in a few launches): the report names those
ties instead of spending more launches on them.

`next_confirmation` chooses the relaunch that settles the most: the unsettled, untied
contests take turns (the one whose members were relaunched least so far goes first, so
that one pick's many near-ties do not take every confirmation from the other pick), and
within a contest the configuration that may be launched again with the fewest launches (a
leader before its contenders, then the runner-up, whose comparison with the pick is the one
the report states, then the contender closest to the leader in units of their combined
half-width: the likeliest to overturn the pick, then the lower trial number).
`disagreeing_objectives` says where a configuration's launches disagree beyond their own
intervals (the launches differ by more than their within-launch intervals allow: the
between-launch spread shows).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from autospec.metrics.paired import Comparison, SpreadHistory
from autospec.metrics.relaunch import LaunchFigure, Pooled
from autospec.records.launches import ObjectiveRef, PooledStudy, launch_figure, pool_study
from autospec.records.machines import MachineFactor, compare_pooled, study_factors
from autospec.records.servers import launch_groups
from autospec.records.stored import StoredTrial, TrialClass

__all__ = [
    "MIN_LAUNCHES",
    "MAX_LAUNCHES",
    "TIE_MARGIN",
    "Contest",
    "Relaunch",
    "contests",
    "pick_objectives",
    "next_confirmation",
    "launches_needed",
    "overlap",
    "launches_disagree",
    "disagreeing_objectives",
]

MIN_LAUNCHES = 2  # a pick rests on this many launches, unless its interval (spread included) separates it
MAX_LAUNCHES = 3  # no configuration is launched more often than this to settle a pick
TIE_MARGIN = 0.01  # relative: configurations this close, each launched MIN_LAUNCHES times, are tied


@dataclass(frozen=True)
class Contest:
    """One pick objective's standing (see the module docstring). `launches[n]`: measured
    launches of trial n's configuration, for the leader and every contender."""

    objective: int
    leader: int
    contenders: tuple[int, ...]
    runner_up: int | None
    launches: Mapping[int, int]
    spread_known: bool
    close: bool  # every contender is within TIE_MARGIN of the leader
    # per member, its distance to the leader in combined half-widths (0 for the leader)
    distance: Mapping[int, float] = field(default_factory=dict)
    relaunched: int = 0  # confirmation relaunches so far of its members' configurations
    paired: bool = False  # every comparison with the leader is paired over matched requests or waves
    versus: Mapping[int, Comparison] = field(default_factory=dict)  # leader over each other member
    pooled_with: tuple[int, ...] = ()  # the other trials of the leader's pooled figure (the same server here)

    @property
    def members(self) -> tuple[int, ...]:
        return (self.leader, *self.contenders)

    @property
    def settled(self) -> bool:
        """No contender is left, and the comparisons can be trusted: paired ones carry the
        between-launch spread (measured, or its prior) in their intervals, so the leader's
        separation from every other configuration settles the pick on one launch; an unpaired
        one needs MIN_LAUNCHES launches of the leader or the measured spread."""
        if self.contenders:
            return False
        return self.paired or self.launches[self.leader] >= MIN_LAUNCHES or self.spread_known

    @property
    def tied(self) -> bool:
        """Unsettled, and no relaunch is worth making (see the module docstring)."""
        if self.settled:
            return False
        counts = [self.launches[n] for n in self.members]
        return all(c >= MAX_LAUNCHES for c in counts) or (self.close and all(c >= MIN_LAUNCHES for c in counts))

    def wanting(self) -> list[int]:
        """The configurations a relaunch would help, fewest launches first."""
        if self.settled or self.tied:
            return []
        limit = MIN_LAUNCHES if self.close else MAX_LAUNCHES
        members = [n for n in self.members if self.launches[n] < limit]
        return sorted(members, key=self.order)

    def order(self, n: int) -> tuple[int, bool, bool, float, int]:
        """How soon member `n` is relaunched (smaller first): fewest launches, the leader, the
        runner-up (the comparison the pick's sentence reports), the contender closest to the
        leader, the lower trial number."""
        return (self.launches[n], n != self.leader, n != self.runner_up, self.distance.get(n, 0.0), n)


@dataclass(frozen=True)
class Relaunch:
    """The configuration to launch again (`trial`, the first trial of it) and why."""

    trial: int
    launches: int
    reason: str


def pick_objectives(refs: Sequence[ObjectiveRef]) -> list[int]:
    """The objectives the picks decide on: the lowest-concurrency one (latency pick) and
    the highest-concurrency one (throughput pick), as the report's picks choose them."""
    if not refs:
        return []
    low = min(refs, key=lambda r: (r.concurrency or 0, r.index)).index
    high = max(refs, key=lambda r: (r.concurrency or 0, r.index)).index
    return [low] if low == high else [low, high]


def _score(p: Pooled, maximize: bool) -> float:
    return p.value if maximize else -p.value


def overlap(a: Pooled, b: Pooled) -> bool:
    """The two pooled figures cannot be told apart: their difference is within the
    combined 95% half-widths (a figure without an interval counts as exact)."""
    return abs(a.value - b.value) <= math.hypot(a.half or 0.0, b.half or 0.0)


def _contest(
    pooled: PooledStudy, index: int, maximize: bool, factors: Mapping[int, Sequence[MachineFactor]] | None = None
) -> Contest | None:
    figures: dict[int, Pooled] = {}
    for n, per in pooled.configurations.items():
        p = per[index]
        if p is not None and math.isfinite(p.value):
            figures[n] = p
    if not figures:
        return None
    ranked: list[int] = []
    for n in sorted(figures, key=lambda n: (-_score(figures[n], maximize), n)):
        # configurations pooled into one figure (the same server at this concurrency) are one
        # member, the first of them standing for all: a relaunch of it measures them all
        if not any(n in pooled.sharing(m, index) for m in ranked):
            ranked.append(n)
    leader, others = ranked[0], ranked[1:]
    best = figures[leader]
    versus = {n: compare_pooled(pooled, leader, n, index, factors or {}) for n in others}
    paired = bool(others) and all(c is not None and c.paired for c in versus.values())
    contenders = tuple(n for n in others if _not_separated(versus[n], best, figures[n]))
    close = all(abs(best.value - figures[n].value) <= TIE_MARGIN * abs(best.value) for n in contenders)
    distance = {n: _distance(best, figures[n], versus[n]) for n in contenders}
    return Contest(
        objective=index,
        leader=leader,
        contenders=contenders,
        runner_up=others[0] if others else None,
        launches={n: figures[n].launches for n in (leader, *contenders)},
        spread_known=index in pooled.spread,
        close=close,
        distance=distance,
        paired=paired,
        versus={n: c for n, c in versus.items() if c is not None},
        pooled_with=pooled.sharing(leader, index),
    )


def _not_separated(c: Comparison | None, a: Pooled, b: Pooled) -> bool:
    """The leader and `b` cannot be told apart: the ratio's interval holds 1 (paired over
    matched requests or waves, or measured on two machines: through their factor, and never
    separated where no control joins them), else, unpaired, their pooled intervals overlap."""
    if c is None or not (c.paired or c.factors or c.unjoined):
        return overlap(a, b)
    return not c.separated


def _distance(a: Pooled, b: Pooled, c: Comparison | None = None) -> float:
    """How far `b` is from the leader in units of their uncertainty: |log ratio| over the
    log half-width of the paired comparison's interval where there is one, else |a - b| over the
    combined 95% half-widths (0 when both are exact and equal)."""
    if c is not None and c.paired and c.hi > c.lo:
        return abs(math.log(c.ratio)) / (math.log(c.hi / c.lo) / 2)
    scale = math.hypot(a.half or 0.0, b.half or 0.0)
    gap = abs(a.value - b.value)
    return gap / scale if scale > 0 else (0.0 if gap == 0 else math.inf)


def contests(
    trials: Sequence[StoredTrial],
    refs: Sequence[ObjectiveRef],
    maximize: Sequence[bool],
    history: Mapping[int, SpreadHistory] | None = None,
) -> list[Contest]:
    """The contest of each pick objective (`pick_objectives`) over the study's `trials`
    (`history`: the launch spread other studies measured, `pool_study`)."""
    pooled = pool_study(trials, refs, history)
    factors = study_factors(trials, refs, pooled)
    found = [_contest(pooled, i, maximize[i], factors) for i in pick_objectives(refs)]
    relaunches = [t.markers.confirm_of for t in trials if t.trial_class == TrialClass.RELAUNCH]
    return [
        replace(c, relaunched=sum(1 for n in relaunches if n in c.members or _pooled_into(pooled, c, n)))
        for c in found
        if c is not None
    ]


def _pooled_into(pooled: PooledStudy, contest: Contest, number: int | None) -> bool:
    """Trial `number`'s configuration is in a member's figure of the contest's objective."""
    return any(number in pooled.sharing(m, contest.objective) for m in contest.members)


def next_confirmation(
    standing: Sequence[Contest], where: Mapping[int, str] | None = None, exclude: Collection[int] = ()
) -> Relaunch | None:
    """The relaunch that settles the most (module docstring); None when every contest is
    settled or tied. `where` names objectives in the reason (index -> "C=32"); trials in
    `exclude` are not chosen (a relaunch of them was answered without a launch)."""
    names = where or {}
    best: tuple[tuple[int, tuple[int, bool, bool, float, int]], Contest, int] | None = None
    for contest in standing:
        for n in contest.wanting():
            if n in exclude:
                continue
            key = (contest.relaunched, contest.order(n))
            if best is None or key < best[0]:
                best = (key, contest, n)
    if best is None:
        return None
    _, contest, n = best
    at = names.get(contest.objective, f"objective {contest.objective}")
    if not contest.contenders:
        reason = f"trial {n} leads at {at} on {contest.launches[n]} launch(es), before the between-launch spread is measured"
    else:
        rivals = ", ".join(str(m) for m in contest.members if m != n)
        role = "leads" if n == contest.leader else "is within the intervals of the leader"
        reason = f"trial {n} {role} at {at}, not separated from trial(s) {rivals}"
    return Relaunch(n, contest.launches[n], reason)


def launches_needed(standing: Sequence[Contest]) -> int:
    """How many relaunches would at least be needed to settle every contest: each
    configuration wanting one up to `MIN_LAUNCHES`, one more for those already there."""
    wanting = {n: c.launches[n] for c in standing for n in c.wanting()}
    return sum(max(MIN_LAUNCHES - k, 1) for k in wanting.values())


def launches_disagree(figures: Sequence[LaunchFigure]) -> bool:
    """Two launches of one configuration differ by more than their own 95% intervals
    allow (both intervals known); False with fewer than two such launches."""
    known = [f for f in figures if f.half is not None and math.isfinite(f.value)]
    return any(
        abs(a.value - b.value) > math.hypot(a.half or 0.0, b.half or 0.0) for i, a in enumerate(known) for b in known[i + 1 :]
    )


def disagreeing_objectives(trials: Sequence[StoredTrial], refs: Sequence[ObjectiveRef]) -> dict[int, list[int]]:
    """Trial number -> the objectives (indices) on which that configuration's launches
    disagree beyond their own intervals; configurations launched once are left out."""
    out: dict[int, list[int]] = {}
    for number, group in launch_groups(trials).items():
        if len(group) < 2:
            continue
        found = [
            ref.index for ref in refs if launches_disagree([f for f in (launch_figure(t, ref) for t in group) if f is not None])
        ]
        if found:
            out[number] = found
    return out
