"""Optuna wiring: storage, sampler, resume, budget and the trial chain.

Public entry point: `optimize(OptimizeRequest, observer) -> OptimizeResult`, a thin
wrapper over `StudyRun`.

Modules: ``run`` (StudyRun: the ask -> chain -> tell loop), ``request`` (what a run is
asked and answers), ``observer`` (progress reports), ``samplers``, ``heartbeat``,
``compiled`` and ``proposer`` (feasible-only proposals), ``chain`` (one trial),
``storage`` (storage URLs, study creation and clash checks), ``layout`` (the study's
files), ``identity`` (tuner and server identities), ``leftovers`` (stopping servers that
outlived their trial), ``recovery`` (failing and retrying trials of a dead tuner),
``teach`` (what earlier launches taught the feasibility gate), ``mem_push``
(mem-fraction pushes), ``signals`` (the stop policy), ``sidefiles`` (event log, artifacts),
``pending`` (results waiting for a storage), ``gpu_guard`` and ``owners`` (whose GPU memory).
"""

from autospec.records import TrialRecord
from autospec.study.observer import Observer
from autospec.study.request import OptimizeRequest, OptimizeResult, StudyInterrupted
from autospec.study.run import StudyRun, count_launched, optimize
from autospec.study.samplers import SAMPLERS, make_sampler
from autospec.study.signals import StopSignals
from autospec.study.storage import open_storage, open_study

__all__ = [
    "SAMPLERS",
    "Observer",
    "OptimizeRequest",
    "OptimizeResult",
    "StopSignals",
    "StudyInterrupted",
    "StudyRun",
    "TrialRecord",
    "count_launched",
    "make_sampler",
    "open_storage",
    "open_study",
    "optimize",
]
