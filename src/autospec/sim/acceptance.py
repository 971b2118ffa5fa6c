"""The simulator's acceptance model: how many tokens a verify step emits. Pure functions
of a `Profile`, a `ServerConfig`, the workload kind and the temperature.

Acceptance (`accept_length`). Per-position top-1 acceptance at depth i:
       a_i = base[workload] * decay^((i-1)^decay_power) * exp(-temperature_penalty * T)   (x ngram_factor for NGRAM)
   A chain (topk == 1, depth = steps) emits E = 1 + sum_{i=1..steps} prod_{j<=i} a_j
   tokens per verify step. A tree (topk > 1) has a budget of draft-1 nodes, at most topk
   candidates per depth and at most `steps` depths (the accepted path's candidates: at
   each depth only the topk children of the accepted parent can match, so the nodes SGLang
   allows beyond steps*topk + 1, up to `max_draft_tokens`, hang under other parents and add
   verify cost but no acceptance); m candidates at depth i accept with
       p_i(m) = a_i + (1 - a_i) * (1 - (1 - tree_gain)^(m-1))
   (each extra candidate catches a share `tree_gain` of the remaining misses), and the
   budget is allocated greedily, one node at a time, to whichever of "one more depth" or
   "one more candidate at depth i" raises E most. E = 1 + sum_i prod_{j<=i} p_j. With
   topk == 1 this is the chain formula; more budget never lowers E.
"""

from __future__ import annotations

import math

from autospec.sim.config import ServerConfig
from autospec.sim.profile import WORKLOADS, Profile
from autospec.sim.variation import RequestVariation

__all__ = ["accept_length", "accept_length_distribution", "acceptance_per_depth", "request_accept_length", "tree_shape"]


def acceptance_per_depth(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    """Top-1 acceptance a_i for depths 1..steps (empty without speculation)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; use one of {', '.join(WORKLOADS)}")
    if not cfg.speculative:
        return []
    base = profile.accept_base_for(workload) * math.exp(-profile.temperature_penalty * max(temperature, 0.0))
    if cfg.speculative_algorithm == "NGRAM":
        base *= profile.ngram_factor
    # NGRAM drafts from a suffix trie, whose depth is bounded by the draft tokens, not by steps
    depth = cfg.speculative_num_draft_tokens - 1 if cfg.speculative_algorithm == "NGRAM" else cfg.speculative_num_steps
    return [min(base * profile.accept_decay ** (i**profile.decay_power), 1.0) for i in range(depth)]


def _tree_accept(a: float, m: int, gain: float) -> float:
    return a + (1.0 - a) * (1.0 - (1.0 - gain) ** (m - 1))


def _expected(ps: list[float]) -> float:
    e, prod = 1.0, 1.0
    for p in ps:
        prod *= p
        e += prod
    return e


def tree_shape(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[int]:
    """Candidates per depth of the draft tree (greedy allocation of draft-1 nodes)."""
    a = acceptance_per_depth(profile, cfg, workload, temperature)
    if not a:
        return []
    topk = cfg.speculative_eagle_topk
    budget = cfg.speculative_num_draft_tokens - 1
    if topk <= 1:
        return [1] * min(len(a), max(budget, 0))
    shape: list[int] = []
    gain = profile.tree_gain
    for _ in range(max(budget, 0)):
        current = _expected([_tree_accept(a[i], m, gain) for i, m in enumerate(shape)])
        best: int | None = None  # the depth that grows; len(shape) = one level deeper
        best_gain = -1.0
        if len(shape) < len(a):
            trial = shape + [1]
            best = len(shape)
            best_gain = _expected([_tree_accept(a[i], m, gain) for i, m in enumerate(trial)]) - current
        for i, m in enumerate(shape):
            if m < topk:
                trial = shape.copy()
                trial[i] += 1
                g = _expected([_tree_accept(a[j], n, gain) for j, n in enumerate(trial)]) - current
                if g > best_gain + 1e-15:
                    best, best_gain = i, g
        if best is None:
            break
        if best == len(shape):
            shape.append(1)
        else:
            shape[best] += 1
    return shape


def _path_acceptance(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    a = acceptance_per_depth(profile, cfg, workload, temperature)
    shape = tree_shape(profile, cfg, workload, temperature)
    return [_tree_accept(a[i], m, profile.tree_gain) for i, m in enumerate(shape)]


def accept_length(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> float:
    """E[tokens emitted per verify step] (>= 1; exactly 1 without speculation)."""
    return _expected(_path_acceptance(profile, cfg, workload, temperature))


def accept_length_distribution(profile: Profile, cfg: ServerConfig, workload: str, temperature: float) -> list[float]:
    """P(a verify step emits k tokens) for k = 1..max(draft, 1); its mean is accept_length."""
    ps = _path_acceptance(profile, cfg, workload, temperature)
    size = max(cfg.speculative_num_draft_tokens, len(ps) + 1, 1)
    probs = [0.0] * size
    reach = 1.0
    for k, p in enumerate(ps):
        probs[k] = reach * (1.0 - p)
        reach *= p
    probs[len(ps)] += reach
    return probs


def request_accept_length(
    profile: Profile, cfg: ServerConfig, workload: str, temperature: float, *, prompt: str, position: int
) -> float:
    """The mean accept length of one request as the server serves it with noise on: the
    model's `accept_length` moved by the request's effect, a fixed function of its prompt
    text and its `position` in the launch (1 = the launch's first request; NGRAM climbs
    over the first ones): `variation.RequestVariation.shift`. Its mean over prompts and
    over positions 1 .. the profile's ``climb_window`` is `accept_length`."""
    mean = accept_length(profile, cfg, workload, temperature)
    if not cfg.speculative:
        return mean
    variation: RequestVariation = profile.variation
    draft = len(accept_length_distribution(profile, cfg, workload, temperature))
    ngram = cfg.speculative_algorithm == "NGRAM"
    return mean + variation.shift(mean=mean, draft_tokens=draft, ngram=ngram, prompt=prompt, position=position)
