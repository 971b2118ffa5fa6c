"""The last trials of a budget: refine the best configurations locally.

Memory-bound objectives are steppy (one more running request fits at one mem-fraction
grid step and not at the next), and the best configuration often sits right beside a
failure, where a sampler that has learned "failures are near here" hesitates to go.
So the last `polish_trials(n)` launches try the untried grid neighbours of each
objective's best configuration in turn (one parameter moved by one grid step), when the
feasibility gate expects them to run.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import optuna

from autospec.config import DRAFT_TOKENS, STEPS, TOPK, ParamSpec, SearchSpace
from autospec.space import draft_range, param_values

__all__ = ["polish_trials", "neighbours", "next_polish_candidate"]


def polish_trials(target: int) -> int:
    """How many of `target` launches go to local refinement (0 for small budgets)."""
    return 0 if target < 10 else max(3, target // 4)


def _adjacent(p: ParamSpec, value: Any) -> list[Any]:
    values = list(p.choices) if p.type == "categorical" else param_values(p)
    if value not in values:
        return []
    i = values.index(value)
    return [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]


def neighbours(candidate: Mapping[str, Any], space: SearchSpace) -> list[dict[str, Any]]:
    """Candidates one grid step away in one parameter; draft tokens follow SGLang's rule
    for top-k 1 and are clipped into the range steps and top-k allow otherwise."""
    fixed = space.server.flags
    out = []
    for p in space.params:
        if p.type == "draft_tokens" or p.name not in candidate:
            continue
        for value in _adjacent(p, candidate[p.name]):
            moved = {**candidate, p.name: value}
            steps = int(moved.get(STEPS, fixed.get(STEPS, 1)))
            topk = int(moved.get(TOPK, fixed.get(TOPK, 1)))
            if DRAFT_TOKENS in moved:
                low, high = draft_range(steps, topk, None)
                moved[DRAFT_TOKENS] = low if topk <= 1 else min(max(int(moved[DRAFT_TOKENS]), low), high)
            out.append(moved)
    return out


def _position(c: Mapping[str, Any], space: SearchSpace) -> list[float]:
    """A candidate as grid indices scaled to [0, 1] per parameter (for distances)."""
    out = []
    for p in space.params:
        if p.type == "draft_tokens":
            continue
        values = list(p.choices) if p.type == "categorical" else param_values(p)
        v = c.get(p.name)
        out.append(values.index(v) / max(len(values) - 1, 1) if v in values else 0.5)
    return out


def _estimate(c: Mapping[str, Any], space: SearchSpace, known: Sequence[tuple[list[float], float]]) -> float:
    """Inverse-distance-weighted value of the launched trials around `c` (failures count
    as their worst value), to try the most promising neighbour first."""
    x = _position(c, space)
    num = den = 0.0
    for pos, value in known:
        d2 = sum((a - b) ** 2 for a, b in zip(x, pos))
        w = 1.0 / (d2 + 1e-6) ** 2
        num, den = num + w * value, den + w
    return num / den if den else 0.0


def next_polish_candidate(
    study: optuna.Study, space: SearchSpace, runs: Callable[[Mapping[str, Any]], bool], turn: int,
) -> dict[str, Any] | None:
    """The most promising untried neighbour (by an inverse-distance estimate from the
    launched trials) of the best measured configuration of objective number
    `turn % n_objectives` (falling back to the other objectives), for which `runs(flags)`
    (the feasibility gate) says yes; None when there is none."""
    launched = [
        t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if t.user_attrs.get("launched") and t.user_attrs.get("candidate")
    ]
    measured = [t for t in launched if t.user_attrs.get("outcome") == "ok"]
    directions = [o.direction for o in space.objectives]
    for k in range(len(directions)):
        i = (turn + k) % len(directions)
        sign = 1.0 if directions[i] == "maximize" else -1.0
        known = [(_position(t.user_attrs["candidate"], space), sign * t.values[i]) for t in launched]
        for best in sorted(measured, key=lambda t: -sign * t.values[i])[:3]:
            options = [c for c in neighbours(best.user_attrs["candidate"], space) if runs({**space.server.flags, **c})]
            if options:
                return max(options, key=lambda c: _estimate(c, space, known))
    return None
