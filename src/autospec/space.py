"""Tunable flags -> Optuna suggestions -> a plain candidate (server flags dict).

The candidate holds only flags the trial chose; fixed flags are merged later. Two
functions are inverse to each other: `suggest` (trial -> candidate) and
`to_distribution_params` (candidate -> the Optuna params that reproduce it, used to
enqueue baselines and retries). `grid` enumerates the whole space for exhaustive
references (the simulator's optimum) and for tests.

Draft tokens: with topk == 1 SGLang forces draft = steps + 1 (sglang 0.5.x), so the
parameter is not sampled at all. With topk > 1 the Optuna parameter is
`draft_tokens_fraction` in [0, 1] on a grid, mapped onto the integers SGLang can run,
[steps + 1, min(steps * topk + 1, cap)]; every sampled value is valid by
construction and samplers see one stable distribution.
"""

from __future__ import annotations

import math
from typing import Any, Iterator, Mapping

import optuna

from autospec.config import DRAFT_TOKENS, STEPS, TOPK, ParamSpec, SearchSpace

__all__ = ["suggest", "to_distribution_params", "grid", "draft_range", "calibration_points", "DRAFT_FRACTION"]

MEM = "mem_fraction_static"

DRAFT_FRACTION = "draft_tokens_fraction"


def draft_range(steps: int, topk: int, cap: int | None) -> tuple[int, int]:
    """Inclusive [low, high] of draft tokens SGLang can run for steps and topk."""
    low = steps + 1
    high = steps * topk + 1
    if cap is not None:
        high = min(high, max(cap, low))
    return low, max(low, high)


def _draft_from_fraction(fraction: float, steps: int, topk: int, cap: int | None) -> int:
    low, high = draft_range(steps, topk, cap)
    return low + int(round(fraction * (high - low)))


def _fraction_from_draft(draft: int, steps: int, topk: int, cap: int | None, step: float) -> float:
    low, high = draft_range(steps, topk, cap)
    if high == low:
        return 0.0
    raw = (min(max(draft, low), high) - low) / (high - low)
    return min(1.0, round(raw / step) * step)


def _suggest_one(trial: optuna.trial.BaseTrial, p: ParamSpec) -> Any:
    if p.type == "categorical":
        return trial.suggest_categorical(p.name, list(p.choices))
    if p.type == "int":
        return trial.suggest_int(p.name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    value = trial.suggest_float(p.name, float(p.low), float(p.high), step=p.step, log=p.log)
    return round(value, 6)  # 0.9199999999999999 (a step grid's float error) -> 0.92


def _ordered(space: SearchSpace) -> list[ParamSpec]:
    """Draft tokens last: its range depends on steps and topk."""
    return sorted(space.params, key=lambda p: p.type == "draft_tokens")


def suggest(trial: optuna.trial.BaseTrial, space: SearchSpace) -> dict[str, Any]:
    """Ask the trial for every applicable parameter; return the candidate flags."""
    fixed = dict(space.server.flags)
    chosen: dict[str, Any] = {}
    for p in _ordered(space):
        if not p.applies({**fixed, **chosen}):
            continue
        if p.type == "draft_tokens":
            steps = int(chosen.get(STEPS, fixed.get(STEPS, 1)))
            topk = int(chosen.get(TOPK, fixed.get(TOPK, 1)))
            if topk <= 1:
                chosen[DRAFT_TOKENS] = steps + 1
                continue
            frac = trial.suggest_float(DRAFT_FRACTION, 0.0, 1.0, step=p.step or 0.25)
            chosen[DRAFT_TOKENS] = _draft_from_fraction(frac, steps, topk, _cap(p))
            continue
        chosen[p.name] = _suggest_one(trial, p)
    return chosen


def _cap(p: ParamSpec) -> int | None:
    return int(p.high) if p.high is not None else None


def to_distribution_params(candidate: Mapping[str, Any], space: SearchSpace) -> dict[str, Any]:
    """Optuna params that make `suggest` return `candidate` (for enqueue_trial).

    Values outside a parameter's range are clipped to it; unknown flags are ignored.
    """
    fixed = dict(space.server.flags)
    params: dict[str, Any] = {}
    chosen: dict[str, Any] = {}
    for p in _ordered(space):
        if not p.applies({**fixed, **chosen}):
            continue
        if p.type == "draft_tokens":
            steps = int(chosen.get(STEPS, fixed.get(STEPS, 1)))
            topk = int(chosen.get(TOPK, fixed.get(TOPK, 1)))
            if topk > 1 and DRAFT_TOKENS in candidate:
                params[DRAFT_FRACTION] = _fraction_from_draft(int(candidate[DRAFT_TOKENS]), steps, topk, _cap(p), p.step or 0.25)
            continue
        if p.name not in candidate:
            continue
        value = candidate[p.name]
        if p.type == "categorical":
            if value not in p.choices:
                continue
        elif p.type == "int":
            value = int(min(max(int(value), p.low), p.high))
        else:
            value = float(min(max(float(value), p.low), p.high))
            if p.step:
                value = p.low + round((value - p.low) / p.step) * p.step
                value = round(min(value, p.high), 10)
        params[p.name] = value
        chosen[p.name] = value
    return params


def param_values(p: ParamSpec) -> list[Any]:
    """Every value of a parameter: its choices, or its int/float grid."""
    if p.type == "categorical":
        return list(p.choices)
    if p.type == "int":
        return list(range(int(p.low), int(p.high) + 1, int(p.step or 1)))
    step = p.step or (p.high - p.low) / 10 or 1.0
    n = int(math.floor((p.high - p.low) / step + 1e-9))
    return [round(p.low + i * step, 10) for i in range(n + 1)]


def grid(space: SearchSpace) -> Iterator[dict[str, Any]]:
    """Every distinct candidate of the space (floats on their step grid)."""
    fixed = dict(space.server.flags)
    ordered = _ordered(space)
    seen: set[tuple] = set()

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
        if p.type == "draft_tokens":
            steps = int(chosen.get(STEPS, fixed.get(STEPS, 1)))
            topk = int(chosen.get(TOPK, fixed.get(TOPK, 1)))
            low, high = draft_range(steps, topk, _cap(p))
            options = [steps + 1] if topk <= 1 else sorted({
                _draft_from_fraction(f, steps, topk, _cap(p)) for f in param_values(ParamSpec("f", "float", 0.0, 1.0, p.step or 0.25))
            })
            for d in options:
                yield from rec(i + 1, {**chosen, DRAFT_TOKENS: d})
            return
        for v in param_values(p):
            yield from rec(i + 1, {**chosen, p.name: v})

    yield from rec(0, {})


def grid_size(space: SearchSpace) -> int:
    return sum(1 for _ in grid(space))




def calibration_points(space: SearchSpace) -> list[dict[str, Any]]:
    """Two conservative configurations that calibrate the memory model before the sampler
    explores: a chain (top-k 1 where allowed) at the middle mem-fraction, with a short and
    the shortest speculation depth. Their startup facts give the KV pool's growth per unit
    of mem-fraction and its cost per draft token (`feasibility.learned`), so that candidates
    that cannot fit are skipped instead of launched. Parameters not named here are sampled."""
    base: dict[str, Any] = {}
    topk = space.param(TOPK)
    if topk is not None and topk.type == "categorical":
        base[TOPK] = 1 if 1 in topk.choices else min(topk.choices)
    mem = space.param(MEM)
    if mem is not None and mem.type == "float":
        values = param_values(mem)
        base[MEM] = values[len(values) // 2]
    steps = space.param(STEPS)
    if steps is None or steps.type != "int":
        return [base] if base else []
    low, high = int(steps.low), int(steps.high)
    points = [{**base, STEPS: min(low + 2, high)}, {**base, STEPS: low}]
    return [p for i, p in enumerate(points) if p not in points[:i]]
