"""Optuna wiring: storage, sampler, resume, budget and the trial chain.

Public entry point: `optimize(OptimizeRequest, observer) -> OptimizeResult`
(`building.build_run(...).run()`).

Modules by idea:

- the run: ``request`` (what a run is asked, answers and reports), ``building`` (every
  collaborator of a run from its request), ``run`` (StudyRun: the ask -> chain -> tell
  loop), ``chain`` (one trial), ``finishing`` (how every trial's record is stored),
  ``racing`` (stop measuring what cannot reach the front);
- the study's data: ``storage`` (storage URLs, study creation and clash checks),
  ``claims`` (launch claims under a study-wide lock), ``files`` (layout, events log,
  artifacts, results pending a storage);
- ``proposing``: what is launched next (``queue``: the queue policy; ``proposer``,
  ``samplers``, ``compiled``: feasible-only proposals; ``mem_push``);
- ``processes``: whose processes these are and cleaning up after them (``identity``,
  ``owners``, ``stopping``: leftovers and the stop policy, ``recovery``: dead tuners and
  heartbeats, ``gpu_guard``);
- ``slots``: GPU slots of one host.
"""

from autospec.records import TrialRecord
from autospec.study.building import build_run, optimize
from autospec.study.processes.stopping import StopSignals
from autospec.study.proposing.samplers import SAMPLERS, make_sampler
from autospec.study.request import Observer, OptimizeRequest, OptimizeResult, StopReason, StudyInterrupted
from autospec.study.run import StudyRun
from autospec.study.storage import open_storage, open_study
from autospec.study.weights_fit import ModelSize

__all__ = [
    "SAMPLERS",
    "Observer",
    "ModelSize",
    "OptimizeRequest",
    "OptimizeResult",
    "StopReason",
    "StopSignals",
    "StudyInterrupted",
    "StudyRun",
    "TrialRecord",
    "build_run",
    "make_sampler",
    "open_storage",
    "open_study",
    "optimize",
]
