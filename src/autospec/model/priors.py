"""The performance fit's parameters by name, and their priors (pure numpy).

`LAYOUT` is the one place that knows where each parameter sits in the optimiser's flat
vector: acceptance (`acceptance.ACCEPTANCE`), step cost, prefill and wave share
(`physics`). `STEP_PRIORS` is the physics' prior table; its centres scale with t1, the
single-request step time (ms) of the study's own launches, so one table serves a 1 ms tiny
model and a 60 ms 122B one. docs/model.md, "Priors", lists every prior with its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autospec.model.acceptance import ACCEPTANCE, AcceptancePrior
from autospec.model.parameters import Layout, Prior
from autospec.model.physics import PREFILL, STEP_COST, WAVE

__all__ = ["LAYOUT", "STEP_PRIORS", "TREE_STEP_PARAMS", "ScaledPrior", "prior_vectors"]

#: The performance fit's flat parameter vector.
LAYOUT = Layout([ACCEPTANCE, STEP_COST, PREFILL, WAVE])
#: The step-cost parameters only trees inform.
TREE_STEP_PARAMS = ("tree_per_token", "tree_floor")


@dataclass(frozen=True)
class ScaledPrior:
    """A physics prior before the study's step time is known: its centre `typical` on the
    natural scale, as a share of t1 (`per_step`) or absolute; `sd` on the fit's scale."""

    name: str
    typical: float
    sd: float
    meaning: str
    per_step: bool = True

    def prior(self, t1: float) -> Prior:
        value = self.typical * t1 if self.per_step else self.typical
        scale = next(g.scale for g in LAYOUT.groups if self.name in g.names)
        mean = np.log(value) if scale == "log" else np.log(value / (1.0 - value))
        return Prior(self.name, float(mean), self.sd, self.meaning)


#: The physics' priors (physics module docstring): wide (a log sd of 1 is a factor of 2.7
#: either way), centred where a dense model's step sits: mostly the floor.
STEP_PRIORS = (
    ScaledPrior("floor", 0.8, 1.0, "c0, the verify pass's memory-bound floor: 0.8 t1"),
    ScaledPrior("per_verified_token", 0.005, 2.0, "c1, compute and attention per verified token: 0.005 t1"),
    ScaledPrior("per_request", 0.005, 2.0, "c2, per-request work (sampling, KV reads, scheduling): 0.005 t1"),
    ScaledPrior("per_draft_pass", 0.03, 1.5, "c3, a draft pass's floor: 0.03 t1"),
    ScaledPrior("per_draft_token", 0.002, 2.0, "c4, a draft pass's work per request and topk: 0.002 t1"),
    ScaledPrior("tree_per_token", 0.002, 2.0, "c5, building and masking the verify tree, per verified token: 0.002 t1"),
    ScaledPrior("tree_floor", 0.02, 2.0, "c6, the verify tree's fixed cost: 0.02 t1"),
    ScaledPrior("expert_traffic", 0.05, 2.0, "c7, MoE weight traffic when every expert is read: 0.05 t1"),
    ScaledPrior("half_experts_tokens", 16.0, 1.5, "h, tokens per pass that touch half of the experts: 16", per_step=False),
    ScaledPrior("prefill_floor", 1.0, 2.0, "o0, a batch's prefill floor: 1 t1"),
    ScaledPrior("prefill_per_request", 0.05, 2.5, "o1, prefill per request of the batch: 0.05 t1"),
    ScaledPrior("wave_share", 0.5, 1.5, "phi, the wave form's share of the benchmark (the rest fluid): 0.5", per_step=False),
)


def prior_vectors(t1: float, accept_prior: AcceptancePrior, *, ngram: bool) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sd) of every parameter of `LAYOUT` on the fit's scale, for a study whose
    single-request step takes `t1` ms; `ngram`: NGRAM's acceptance form."""
    priors = accept_prior.priors(ngram=ngram) + tuple(p.prior(t1) for p in STEP_PRIORS)
    return LAYOUT.vector({p.name: p.mean for p in priors}), LAYOUT.vector({p.name: p.sd for p in priors})
