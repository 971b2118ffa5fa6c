"""The Optuna samplers a study can use, and the Optuna notes autospec silences."""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from collections.abc import Iterator

import optuna

from autospec.errors import UsageError

__all__ = ["SAMPLERS", "make_sampler", "optuna_notes_silenced"]

SAMPLERS = ("tpe", "gp", "nsga2", "random")  # `--sampler model` is autospec.study.model_sampler


def make_sampler(name: str, seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    """One of Optuna's samplers by name (`SAMPLERS`)."""
    if name == "tpe":
        # constant_liar: trials running on other slots or workers count as bad results, so
        # concurrent proposals do not crowd where the study is measuring already.
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True, group=True,
                                          constant_liar=True)
    if name == "gp":
        if importlib.util.find_spec("torch") is None:  # Optuna 5.0's GPSampler runs on PyTorch
            raise UsageError("--sampler gp needs PyTorch; pip install torch (the CPU build is enough), or use tpe")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=8)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=8)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise UsageError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")


@contextlib.contextmanager
def optuna_notes_silenced() -> Iterator[None]:
    """Optuna 5.0 flags heartbeats, metric names and grouped TPE as experimental, and warns
    that heartbeats are meant for Study.optimize; autospec drives them itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
        yield
