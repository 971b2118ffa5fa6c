"""A predictive model of a speculative-decoding study, fitted from its launches, and the
choice of the next configuration it informs. Pure: numpy and scipy only; it
imports nothing of the simulator (its forms come from how SGLang works, not from
`autospec.sim`).

    shape        the draft shape and memory knobs a configuration's flags describe
    observation  one launched trial as data (`observation_from(stored_trial)`)
    memory       KV pool, running-request cap, headroom after init, p_start
    acceptance   accept length per draft position, chains, trees, NGRAM
    physics      the decode step and the benchmark replayed from it: the forms, written once
    parameters   named parameters (`Layout`: names <-> the optimiser's flat vector) and priors
    priors       the performance fit's parameters and their prior table
    laplace      MAP under Gaussian priors with the Laplace approximation
    performance  acceptance, step cost and prefill fitted to the launches; their predictions
    spec         `SpecModel`: all of it fitted together, predictions with uncertainty
    choose       `rank`: expected hypervolume improvement x p_start; `explain`
    hypervolume  the one hypervolume (and improvement, and ratio) of the project

docs/model.md has the forms, why they hold, and the validation against the hand-tuning sweep's
measurements.
"""

from autospec.model import observation
from autospec.model.choose import Choice, explain, hypervolume_improvement, rank, reference_point
from autospec.model.hypervolume import hypervolume, hypervolume_ratio
from autospec.model.observation import *  # noqa: F403  (the names of observation.__all__, re-exported below)
from autospec.model.performance import SUPPORTED_METRICS, Target
from autospec.model.shape import Shape, shape_of
from autospec.model.spec import Prediction, SpecModel

__all__ = [
    "hypervolume",
    "hypervolume_ratio",
    "Shape",
    "shape_of",
    "Target",
    "SUPPORTED_METRICS",
    "SpecModel",
    "Prediction",
    "rank",
    "explain",
    "Choice",
    "hypervolume_improvement",
    "reference_point",
]
__all__ += observation.__all__
