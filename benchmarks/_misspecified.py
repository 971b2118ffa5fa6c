"""Landscapes whose physics the model does not have (`efficiency.py --misspecified`).

The predictive model (`autospec.model`) and the simulator both describe a decode step as
a floor plus per-token, per-request and per-draft-pass work, because that is what a step
does; they were written separately, but a harness on the simulator alone cannot show that
the model's choices do not hinge on that shared structure. This module bends the
simulator, for the processes of one harness run, in ways none of the model's forms can
express, so the part of the model that must absorb the difference is its residual process
and its uncertainty:

- step cost: times ``1 + 0.3 * sqrt(B * D / 128)`` (kernels losing efficiency as the
  verified tokens grow, sublinearly), plus a tile-quantisation staircase of
  ``0.2 * floor_ms`` per started block of 128 verified tokens;
- acceptance: per depth i (0-based) ``base * (0.55 + 0.45 * exp(-0.5 * i))``, a decline
  that flattens out instead of the simulator's ``base * decay^(i^power)`` (its logit is
  not a quadratic in depth, the model's form).

Applied by patching the simulator's module attributes (`apply`), so the noiseless truth of
the harness, the simulated chain and every strategy see the same bent landscape.
"""

from __future__ import annotations

import math
from typing import Any

_APPLIED = False


def apply() -> None:
    """Bend the simulator's step cost and acceptance in this process (idempotent)."""
    global _APPLIED
    if _APPLIED:
        return
    import autospec.sim.acceptance as acceptance
    import autospec.sim.engine as engine
    import autospec.sim.predict as predict
    import autospec.sim.timing as timing

    step, accept = timing.step_seconds, acceptance.acceptance_per_depth

    def step_seconds(profile: Any, cfg: Any, batch_size: int) -> float:
        b = max(int(batch_size), 1)
        tokens = b * (cfg.speculative_num_draft_tokens if cfg.speculative else 1)
        base = step(profile, cfg, batch_size)
        return base * (1.0 + 0.3 * math.sqrt(tokens / 128.0)) + 0.2 * profile.floor_ms / 1000.0 * math.ceil(tokens / 128)

    def acceptance_per_depth(profile: Any, cfg: Any, workload: str, temperature: float) -> list[float]:
        a = accept(profile, cfg, workload, temperature)
        if not a:
            return a
        base = a[0]
        return [min(base * (0.55 + 0.45 * math.exp(-0.5 * i)), 1.0) for i in range(len(a))]

    for module in (timing, engine, predict):
        if hasattr(module, "step_seconds"):
            module.step_seconds = step_seconds  # type: ignore[attr-defined]
    acceptance.acceptance_per_depth = acceptance_per_depth
    _APPLIED = True
