"""Optuna wiring: storage, sampler, resume, budget and the trial chain.

Public entry point: `optimize(OptimizeRequest, observer) -> OptimizeResult`.
"""

from autospec.study.loop import (
    OptimizeRequest,
    OptimizeResult,
    Observer,
    StudyInterrupted,
    count_launched,
    make_sampler,
    optimize,
)
from autospec.study.records import TrialRecord
from autospec.study.storage import open_storage, open_study

__all__ = [
    "OptimizeRequest",
    "OptimizeResult",
    "Observer",
    "StudyInterrupted",
    "TrialRecord",
    "count_launched",
    "make_sampler",
    "open_storage",
    "open_study",
    "optimize",
]
