"""Propose a higher mem_fraction_static for queue-bound configurations on the front.

SGLang sizes the KV pool from ``mem_fraction_static`` and derives
``max_running_requests`` from the pool (sglang 0.5.x, model_runner and scheduler; the
value is in the startup log). A server whose ``max_running_requests`` is below a
concurrency the study measures queues requests there; the same configuration with a
higher mem fraction runs more of them at once, while its speed at C=1 does not change.
Throughput under load therefore rises with mem fraction until the server no longer
starts (CUDA graphs and activations live in what is left), which makes the best value a
ridge along the feasibility boundary that a sampler with a 20-trial budget rarely lands
on by chance.

So after each launch the study looks at the Pareto front of what it measured and, for
the best queue-bound configuration there (best on the objective measured at the highest
concurrency), proposes the highest mem fraction of the space above its own that the
caller's `answer` launches (`pushes.MemPushPolicy`: the feasibility gate and the memory
model's `sure_to_start`); "no" steps one value down. The study stops pushing after
`MAX_FAILURES` failed pushes (`may_push`). Pure logic: the caller supplies the front
(`autospec.records.pareto_front`) and the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from autospec.config import SearchSpace
from autospec.sglang_facts import MEM_FRACTION as MEM
from autospec.space import param_values

__all__ = ["Measured", "Push", "PushAnswer", "MEM", "MAX_FAILURES", "may_push", "push_candidate"]

#: Pushes that failed at init after which a study pushes no more: a safety net, since a
#: push goes only where the memory model is sure the server starts (two failures say
#: its forms do not fit this server).
MAX_FAILURES = 2

# What the feasibility gate says of a proposal: launch it; it is already measured (so no
# higher value is worth trying for this configuration); or it would not run.
PushAnswer = Literal["launch", "measured", "no"]


@dataclass(frozen=True)
class Measured:
    """One launched trial on the Pareto front."""

    number: int
    candidate: Mapping[str, Any]
    values: Sequence[float]
    max_running_requests: int | None


@dataclass(frozen=True)
class Push:
    """A proposal: `base`'s configuration again, at a higher mem fraction."""

    candidate: dict[str, Any]
    base: Measured
    concurrency: int  # the level at which `base` queued requests

    def describe(self) -> str:
        return (
            f"trial {self.base.number} ran at most {self.base.max_running_requests} requests at once, "
            f"fewer than C={self.concurrency}: queued again at {MEM}={self.candidate[MEM]:g}"
        )


def may_push(made: int, failed: int, budget: int) -> bool:
    """Whether the study may queue another push: fewer than `budget` were made and fewer
    than `MAX_FAILURES` of them failed at init."""
    return made < budget and failed < MAX_FAILURES


def push_candidate(
    space: SearchSpace,
    front: Sequence[Measured],
    answer: Callable[[dict[str, Any]], PushAnswer],
) -> Push | None:
    """The next proposal for a configuration of the Pareto `front` (in trial order), or None.

    None when the space does not tune ``mem_fraction_static``, when no front
    configuration is queue-bound (``max_running_requests`` below the highest concurrency
    of an objective or constraint), or when every higher mem fraction of each of them is
    already measured or would not run."""
    mem = space.param(MEM)
    if mem is None or not space.objectives:
        return None
    levels = [o.concurrency for o in space.objectives] + [c.concurrency for c in space.constraints]
    peak = max(levels)
    signs = [1 if o.direction == "maximize" else -1 for o in space.objectives]
    # Rank by the objective measured at the highest concurrency: the one queueing hurts.
    key = max(range(len(space.objectives)), key=lambda i: space.objectives[i].concurrency)
    values = sorted(v for v in param_values(mem) if isinstance(v, (int, float)))
    for base in sorted(front, key=lambda m: -signs[key] * m.values[key]):
        current = base.candidate.get(MEM)
        mrr = base.max_running_requests
        if current is None or mrr is None or mrr >= peak:
            continue
        for value in reversed([v for v in values if v > current + 1e-9]):
            proposal = {**base.candidate, MEM: value}
            said = answer(proposal)
            if said == "launch":
                return Push(proposal, base, peak)
            if said == "measured":
                break
    return None
