"""Tunable flags -> Optuna suggestions -> a plain candidate (server flags dict).

The candidate holds only flags the trial chose; fixed flags are merged later. Two
functions are inverse to each other: `suggest` (trial -> candidate) and
`to_distribution_params` (candidate -> the Optuna params that reproduce it, used to
enqueue baselines and retries). `grid` enumerates the whole space for exhaustive
references (the simulator's optimum) and for tests.

Draft tokens: with topk == 1 SGLang forces draft = steps + 1 (sglang 0.5.x), so the
parameter is not sampled at all. With topk > 1 the Optuna parameter is
`draft_tokens_fraction` in [0, 1] on a grid, mapped onto the integers SGLang can run,
`sglang_facts.draft_token_range(steps, topk, cap)`: [steps + 1,
min(1 + topk + (steps - 1) * topk**2, cap)]; every sampled value is valid by
construction and samplers see one stable distribution.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import optuna

from autospec.config import CategoricalParam, DraftTokensParam, FloatParam, IntParam, ParamSpec, SearchSpace
from autospec.sglang_facts import DRAFT_TOKENS, MEM_FRACTION, STEPS, TOPK, draft_token_range

__all__ = [
    "suggest",
    "to_distribution_params",
    "grid",
    "param_values",
    "calibration_points",
    "DRAFT_FRACTION",
    "MEM",
]

MEM = MEM_FRACTION

DRAFT_FRACTION = "draft_tokens_fraction"


def _draft_from_fraction(fraction: float, steps: int, topk: int, cap: int | None) -> int:
    low, high = draft_token_range(steps, topk, cap)
    return low + round(fraction * (high - low))


def _fraction_from_draft(draft: int, steps: int, topk: int, cap: int | None, step: float) -> float:
    low, high = draft_token_range(steps, topk, cap)
    if high == low:
        return 0.0
    raw = (min(max(draft, low), high) - low) / (high - low)
    return min(1.0, round(raw / step) * step)


def _steps_and_topk(chosen: Mapping[str, Any], fixed: Mapping[str, Any]) -> tuple[int, int]:
    """The trial's steps and top-k: chosen ones first, then fixed flags, else 1."""
    steps = int(chosen.get(STEPS, fixed.get(STEPS, 1)))
    topk = int(chosen.get(TOPK, fixed.get(TOPK, 1)))
    return steps, topk


def _suggest_one(trial: optuna.trial.BaseTrial, p: IntParam | FloatParam | CategoricalParam) -> Any:
    if isinstance(p, CategoricalParam):
        return trial.suggest_categorical(p.name, list(p.choices))
    if isinstance(p, IntParam):
        return trial.suggest_int(p.name, p.low, p.high, step=p.step or 1, log=p.log)
    value = trial.suggest_float(p.name, float(p.low), float(p.high), step=p.step, log=p.log)
    return round(value, 6)  # 0.9199999999999999 (a step grid's float error) -> 0.92


def _ordered(space: SearchSpace) -> list[ParamSpec]:
    """Draft tokens last: its range depends on steps and topk."""
    return sorted(space.params, key=lambda p: isinstance(p, DraftTokensParam))


def _applicable(space: SearchSpace, chosen: Mapping[str, Any]) -> Iterator[ParamSpec]:
    """The parameters of `space` that apply, in `_ordered` order, given its fixed flags and
    what the caller has `chosen` so far (read as each parameter is reached: the caller fills
    `chosen` in as it goes)."""
    fixed = space.server.flags
    for p in _ordered(space):
        if p.applies({**fixed, **chosen}):
            yield p


def suggest(trial: optuna.trial.BaseTrial, space: SearchSpace) -> dict[str, Any]:
    """Ask the trial for every applicable parameter; return the candidate flags."""
    fixed = dict(space.server.flags)
    chosen: dict[str, Any] = {}
    for p in _applicable(space, chosen):
        if isinstance(p, DraftTokensParam):
            steps, topk = _steps_and_topk(chosen, fixed)
            if topk <= 1:
                chosen[DRAFT_TOKENS] = steps + 1
                continue
            frac = trial.suggest_float(DRAFT_FRACTION, 0.0, 1.0, step=p.step)
            chosen[DRAFT_TOKENS] = _draft_from_fraction(frac, steps, topk, p.high)
            continue
        chosen[p.name] = _suggest_one(trial, p)
    return chosen


def to_distribution_params(candidate: Mapping[str, Any], space: SearchSpace) -> dict[str, Any]:
    """Optuna params that make `suggest` return `candidate` (for enqueue_trial).

    Values outside a parameter's range are clipped to it; unknown flags are ignored.
    """
    fixed = dict(space.server.flags)
    params: dict[str, Any] = {}
    chosen: dict[str, Any] = {}
    for p in _applicable(space, chosen):
        if isinstance(p, DraftTokensParam):
            steps, topk = _steps_and_topk(chosen, fixed)
            if topk > 1 and DRAFT_TOKENS in candidate:
                params[DRAFT_FRACTION] = _fraction_from_draft(int(candidate[DRAFT_TOKENS]), steps, topk, p.high, p.step)
            continue
        if p.name not in candidate:
            continue
        value = _distribution_value(p, candidate[p.name])
        if value is None:
            continue
        params[p.name] = value
        chosen[p.name] = value
    return params


def _distribution_value(p: IntParam | FloatParam | CategoricalParam, value: Any) -> Any:
    """`value` as the parameter's distribution holds it (clipped, on its grid), or None
    when it is not one of a categorical's choices."""
    if isinstance(p, CategoricalParam):
        return value if value in p.choices else None
    if isinstance(p, IntParam):
        return int(min(max(int(value), p.low), p.high))
    clipped = float(min(max(float(value), p.low), p.high))
    if p.step:
        clipped = p.low + round((clipped - p.low) / p.step) * p.step
        clipped = round(min(clipped, p.high), 10)
    return clipped


def _float_grid(low: float, high: float, step: float) -> list[float]:
    n = math.floor((high - low) / step + 1e-9)
    return [round(low + i * step, 10) for i in range(n + 1)]


def param_values(p: ParamSpec) -> list[Any]:
    """Every value of a parameter: its choices, or its int/float grid (a float without
    a step: 11 points). Draft tokens have no fixed values (ValueError)."""
    if isinstance(p, CategoricalParam):
        return list(p.choices)
    if isinstance(p, IntParam):
        return list(range(p.low, p.high + 1, p.step or 1))
    if isinstance(p, DraftTokensParam):
        raise ValueError(f"{p.name} has no fixed values: its range depends on steps and top-k")
    return _float_grid(p.low, p.high, p.step or (p.high - p.low) / 10 or 1.0)


def _draft_options(p: DraftTokensParam, steps: int, topk: int) -> list[int]:
    """The distinct draft-token counts `suggest` can produce for steps and topk."""
    if topk <= 1:
        return [steps + 1]
    return sorted({_draft_from_fraction(f, steps, topk, p.high) for f in _float_grid(0.0, 1.0, p.step)})


def grid(space: SearchSpace) -> Iterator[dict[str, Any]]:
    """Every distinct candidate of the space (floats on their step grid)."""
    fixed = dict(space.server.flags)
    ordered = _ordered(space)
    seen: set[tuple[tuple[str, Any], ...]] = set()

    def rec(i: int, chosen: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if i == len(ordered):
            key = tuple(sorted(chosen.items()))
            if key not in seen:
                seen.add(key)
                yield dict(chosen)
            return
        p = ordered[i]
        if not p.applies({**fixed, **chosen}):
            yield from rec(i + 1, chosen)
            return
        if isinstance(p, DraftTokensParam):
            for d in _draft_options(p, *_steps_and_topk(chosen, fixed)):
                yield from rec(i + 1, {**chosen, DRAFT_TOKENS: d})
            return
        for v in param_values(p):
            yield from rec(i + 1, {**chosen, p.name: v})

    yield from rec(0, {})


def calibration_points(space: SearchSpace) -> list[dict[str, Any]]:
    """Two conservative configurations that calibrate the memory model before the sampler
    explores: a chain (top-k 1 where allowed) at the middle mem-fraction, with a short and
    the shortest speculation depth. Their startup facts give the KV pool's growth per unit
    of mem-fraction and its cost per draft token (`feasibility.learned`), so that candidates
    that cannot fit are skipped instead of launched. Parameters not named here are sampled."""
    base: dict[str, Any] = {}
    topk = space.param(TOPK)
    if isinstance(topk, CategoricalParam):
        base[TOPK] = 1 if 1 in topk.choices else min(topk.choices)
    mem = space.param(MEM)
    if isinstance(mem, FloatParam):
        values = param_values(mem)
        base[MEM] = values[len(values) // 2]
    steps = space.param(STEPS)
    if not isinstance(steps, IntParam):
        return [base] if base else []
    low, high = steps.low, steps.high
    points = [{**base, STEPS: min(low + 2, high)}, {**base, STEPS: low}]
    return [p for i, p in enumerate(points) if p not in points[:i]]
