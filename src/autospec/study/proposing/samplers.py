"""`--sampler model`: the next launch is the one the fitted model values most.

An Optuna sampler, so Optuna stays the storage and ask/tell layer. Before each trial of the
proposer's scratch study (`autospec.study.proposing.proposer`) it

1. reads every trial of that study: launches become `autospec.model.Observation`s (start-up
   facts, per-level summaries, accept length, or the init failure), and every configuration
   already launched, answered (rejected, predicted to fail, a duplicate) or in flight is
   left out of the choice, and so is another `mem_fraction_static` of a measured server whose
   KV pool bound nothing at any level, which could measure nothing better (`repeats_server`);
2. fits `autospec.model.SpecModel` on the launches and predicts every other configuration
   of the space that passes SGLang's argument checks (at most `MAX_CANDIDATES`, drawn at
   random when the grid is larger);
3. picks the one with the highest p_start x expected hypervolume improvement over the
   measured front (`autospec.model.rank`); when the model sees nothing worth a launch, the
   best-scored candidate anyway (the user asked for the launches).

The chosen configuration's Optuna parameters are then returned parameter by parameter
from `sample_independent`; anything it does not fix (no candidate left) comes from a
seeded random sampler, and the proposer's gate answers it as usual.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import random
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution

from autospec.config import SearchSpace
from autospec.errors import UsageError
from autospec.model import Choice, SpecModel, Target, explain, observation_from, rank
from autospec.model.performance import SUPPORTED_METRICS
from autospec.records import OK, StoredTrial, TrialClass, read_trials
from autospec.records.servers import holds_level
from autospec.sglang_facts import MEM_FRACTION
from autospec.space import grid, to_distribution_params

MAX_RUNNING = "max_running_requests"  # the ServerArgs field (sglang 0.5.x)

__all__ = [
    "ModelSampler",
    "unsupported_reason",
    "MAX_CANDIDATES",
    "NEGLIGIBLE",
    "SAMPLERS",
    "make_sampler",
    "optuna_notes_silenced",
]

log = logging.getLogger(__name__)

#: Configurations predicted per choice; a larger grid is subsampled at random.
MAX_CANDIDATES = 3000
#: Expected hypervolume gain (share of the objective box) below which a configuration
#: counts as predicted dominated.
NEGLIGIBLE = 1e-4


def unsupported_reason(space: SearchSpace) -> str | None:
    """Why the model cannot drive a study of `space` (None: it can)."""
    if not 1 <= len(space.objectives) <= 2:
        return f"the model chooses for one or two objectives, not {len(space.objectives)}"
    for o in space.objectives:
        if o.metric not in SUPPORTED_METRICS:
            return f"the model does not predict {o.metric!r} (it predicts {', '.join(SUPPORTED_METRICS)})"
    return None


def _expectation(model: SpecModel, choice: Choice, j: int) -> dict[str, Any]:
    """What the model expects of candidate `j`: per objective the mean and the 10-90%
    range of its draws, the probability that it starts, why it was chosen."""
    low, high = choice.prediction.interval(0.1, 0.9)
    return {
        "values": [round(float(v), 4) for v in choice.prediction.mean[j]],
        "low": [round(float(v), 4) for v in low[j]],
        "high": [round(float(v), 4) for v in high[j]],
        "p_start": round(float(choice.p_start[j]), 3),
        "launches": len(model.observations),
        "why": choice.reason if choice.index == j else f"best-scored ({choice.reason})",
    }


def _describe(candidate: Mapping[str, Any]) -> str:
    return " ".join(f"{k.removeprefix('speculative_')}={v}" for k, v in candidate.items())


def _settled(trial: StoredTrial, last_launch: int) -> bool:
    """Whether `trial`'s configuration is off the table: launched, measured elsewhere
    (imported), in flight, a duplicate of a launched server; or predicted to fail since the
    last launch (trial `last_launch`: a later launch may change what the gate's learned
    rules predict, so such answers expire)."""
    if (
        trial.state != optuna.trial.TrialState.COMPLETE
        or trial.launched
        or trial.has_measurement
        or trial.trial_class == TrialClass.DUPLICATE
    ):
        return True
    return trial.number > last_launch


def _key(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, round(v, 6) if isinstance(v, float) else v) for k, v in params.items()))


def repeats_server(
    trials: Sequence[StoredTrial], concurrencies: Sequence[int], base_flags: Mapping[str, Any] | None = None
) -> Callable[[Mapping[str, Any]], bool]:
    """A test of a configuration's Optuna parameters: True where a measured launch of `trials`
    has the same parameters but another `mem_fraction_static`, and its KV pool bound nothing
    at any level of `concurrencies` (`pool_binds_nothing`). A larger pool then runs the same
    batches and a smaller one the same or fewer at once, so a launch could measure nothing
    better (and a larger one risks its start). `base_flags`: the space's fixed flags."""
    held = {
        _key({k: v for k, v in t.params.items() if k != MEM_FRACTION})
        for t in trials
        if MEM_FRACTION in t.params
        and t.has_measurement
        and concurrencies
        and all(pool_binds_nothing(t, c, base_flags) for c in concurrencies)
    }

    def repeats(params: Mapping[str, Any]) -> bool:
        return MEM_FRACTION in params and _key({k: v for k, v in params.items() if k != MEM_FRACTION}) in held

    return repeats


def pool_binds_nothing(t: StoredTrial, concurrency: int, base_flags: Mapping[str, Any] | None = None) -> bool:
    """At `concurrency` the launch's KV pool set neither how many requests ran at once nor
    left them short of room: it held the level (`holds_level`), or as many requests as the
    `max_running_requests` it was given (its candidate's, else `base_flags`'), below the level,
    ran at once with room for their tokens (SGLang caps the running requests at the smaller
    of that flag and what the pool holds)."""
    if holds_level(t, concurrency):
        return True
    given = (t.record.candidate if t.record is not None else {}).get(MAX_RUNNING, (base_flags or {}).get(MAX_RUNNING))
    return isinstance(given, int) and given < concurrency and holds_level(t, concurrency, at_once=given)


class ModelSampler(optuna.samplers.BaseSampler):
    """See the module docstring. `space`: the (compiled) search space the study suggests
    from; `candidate_of`: Optuna-chosen values -> the trial's candidate flags (the compiled
    space's fixed tunables added); `accepts`: full server flags -> the flags SGLang resolves
    them to, or None when its argument checks reject them."""

    def __init__(
        self,
        space: SearchSpace,
        candidate_of: Callable[[Mapping[str, Any]], dict[str, Any]],
        accepts: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
        seed: int | None = None,
    ) -> None:
        self.space = space
        self.candidate_of = candidate_of
        self.accepts = accepts
        self.targets = [Target(o.metric, o.concurrency) for o in space.objectives]
        self.maximize = [o.direction == "maximize" for o in space.objectives]
        self.base_flags = dict(space.server.flags)
        self._rng = random.Random(seed)
        self._fallback = optuna.samplers.RandomSampler(seed=seed)
        self._grid: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] | None = None
        self._chosen: dict[int, dict[str, Any]] = {}
        self._predicted: dict[int, dict[str, Any]] = {}
        self.failures = 0  # choices the model could not make (numerical failures): random instead

    # ------------------------------------------------------------------ Optuna's interface
    def infer_relative_search_space(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: optuna.trial.FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.system_attrs.get("fixed_params"):  # enqueued (Optuna 5.0 keeps its parameters there)
            return
        try:
            chosen = self._choose(study, exclude_number=trial.number)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as e:  # a numerical failure must not end the study
            log.warning("the model could not choose (%s: %s); this proposal is random", type(e).__name__, e)
            self.failures += 1
            return
        if chosen is not None:
            self._chosen[trial.number] = chosen

    def sample_independent(
        self, study: optuna.Study, trial: optuna.trial.FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        chosen = self._chosen.get(trial.number, {})
        if param_name in chosen:
            value = chosen[param_name]
            if param_distribution._contains(param_distribution.to_internal_repr(value)):
                return value
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: optuna.trial.TrialState, values: Sequence[float] | None
    ) -> None:
        self._chosen.pop(trial.number, None)

    # ------------------------------------------------------------------ the choice
    def _candidates(self) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
        """(Optuna params, candidate, resolved full flags) of every configuration SGLang's
        argument checks accept, computed once."""
        if self._grid is None:
            out = []
            for chosen in grid(self.space):
                candidate = self.candidate_of(chosen)
                flags = {**self.base_flags, **candidate}
                resolved = self.accepts(flags)
                if resolved is None:
                    continue
                out.append(
                    (
                        to_distribution_params(chosen, self.space),
                        candidate,
                        {**flags, **{k: v for k, v in resolved.items() if v is not None}},
                    )
                )
            self._grid = out
        return self._grid

    def _open(
        self, trials: Sequence[StoredTrial], taken: set[tuple[tuple[str, Any], ...]]
    ) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
        """The candidates not `taken`, less those `repeats_server` finds in `trials`."""
        repeats = repeats_server(trials, self.space.bench.concurrency, self.base_flags)
        return [c for c in self._candidates() if _key(c[0]) not in taken and not repeats(c[0])]

    def _choose(self, study: optuna.Study, exclude_number: int) -> dict[str, Any] | None:
        """Optuna parameters of the configuration to launch next, or None when none is left;
        what the model expects of it is kept for `prediction_for`."""
        trials = [t for t in read_trials(study) if t.number != exclude_number]
        last_launch = max((t.number for t in trials if t.launched), default=-1)
        taken = {_key(t.params) for t in trials if _settled(t, last_launch)}
        taken |= {_key(p) for p in self._chosen.values()}
        open_ = self._open(trials, taken)
        if not open_:
            return None
        if len(open_) > MAX_CANDIDATES:
            open_ = self._rng.sample(open_, MAX_CANDIDATES)
        by_key = {_key(c[0]): c[2] for c in self._candidates()}
        in_flight = [by_key[k] for t in trials if t.state == optuna.trial.TrialState.RUNNING and (k := _key(t.params)) in by_key]
        model, choice = self._rank(trials, [c[2] for c in open_], in_flight)
        index = choice.index
        if index is None:  # nothing the model values: still launch the best-scored one
            index = max(range(len(open_)), key=lambda j: (float(choice.score[j]), float(choice.p_start[j])))
            log.info("model: %s; launching the best-scored candidate anyway", choice.reason)
        self._predicted[exclude_number] = _expectation(model, choice, index)
        return dict(open_[index][0])

    def _rank(
        self, trials: Sequence[StoredTrial], flags: Sequence[Mapping[str, Any]], in_flight: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[SpecModel, Choice]:
        """Fit on `trials`, rank `flags`. Configurations `in_flight` (launched by another
        slot or worker, not yet measured) join the front at the model's mean for them (a
        "Kriging believer"), so concurrent proposals spread instead of crowding one region."""
        observed = {t.number: observation_from(t, base_flags=self.base_flags) for t in trials}
        observations = [o for o in observed.values() if o is not None]
        model = SpecModel.fit(observations, self.targets, base_flags=self.base_flags, candidates=flags)
        # The front to improve on: measured (launched or imported) within every SLO, each at
        # what the model believes of it; a noisy measurement is taken at its smoothed value
        # (equal to the measurement where it is precise), so one lucky level does not make
        # the rest look dominated, nor one unlucky level hide a region.
        front = [
            (t.number, o)
            for t in trials
            if (o := observed[t.number]) is not None
            and t.has_measurement
            and t.record is not None
            and t.record.outcome == OK
            and t.record.values
        ]
        labels = [f"trial {n}" for n, _ in front] + [f"in flight {i + 1}" for i in range(len(in_flight))]
        believed = [o.flags for _, o in front] + list(in_flight)
        points = model.predict(believed).point.tolist() if believed else []
        return model, rank(model, flags, points, None, self.maximize, front_labels=labels)

    def prediction_for(self, number: int) -> dict[str, Any] | None:
        """What the model expected of the configuration it chose for trial `number`."""
        return self._predicted.get(number)

    def unlaunched(self, trials: Sequence[StoredTrial], examples: int = 5) -> dict[str, Any] | None:
        """Why the configurations never launched (nor imported) were not worth a launch, from the model
        fitted on every launch of `trials` (a study's): how many are predicted to fail at
        init, predicted dominated (expected to add less than `NEGLIGIBLE` of the objective
        box), or could still improve the front, and how many are another memory fraction of a
        measured server that could measure nothing better (`repeats_server`); a few of each
        with the reason. None when the space holds nothing else."""
        known = {_key(t.params) for t in trials if t.launched or t.has_measurement}
        unknown = [c for c in self._candidates() if _key(c[0]) not in known]
        if not unknown:
            return None
        open_ = self._open(trials, known)
        ranked = {_key(c[0]) for c in open_}
        why_repeat = "another memory fraction of a measured server whose KV pool bound nothing: nothing better to measure"
        groups: dict[str, list[tuple[float, str]]] = {
            "fail": [],
            "dominated": [],
            "open": [],
            "repeats": [(0.0, f"{_describe(c[1])}: {why_repeat}") for c in unknown if _key(c[0]) not in ranked],
        }
        if open_:
            _, choice = self._rank(trials, [c[2] for c in open_])
            for j, (_, candidate, _) in enumerate(open_):
                mean = ", ".join(f"{v:,.4g}" for v in choice.prediction.mean[j])
                if choice.p_start[j] < 0.5:
                    group, why = "fail", explain(choice, j)
                elif choice.ehvi[j] < NEGLIGIBLE:
                    group, why = "dominated", explain(choice, j)
                    if not why.startswith("predicted dominated"):
                        why = f"predicted {mean}: would add {choice.ehvi[j]:.1e} of the objective box at best"
                else:
                    group = "open"
                    why = (
                        f"predicted {mean}: could still add {choice.ehvi[j]:.1%} of the objective box "
                        f"(p_start {choice.p_start[j]:.2f})"
                    )
                groups[group].append((float(choice.score[j]), f"{_describe(candidate)}: {why}"))
        out: dict[str, Any] = {"launches": sum(1 for t in trials if t.launched), "candidates": len(unknown)}
        for group, rows in groups.items():
            rows.sort(key=lambda r: -r[0])
            out[group] = {"count": len(rows), "examples": [text for _, text in rows[:examples]]}
        return out


SAMPLERS = ("tpe", "gp", "nsga2", "random")  # `--sampler model` is autospec.study.proposing.samplers


def make_sampler(name: str, seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    """One of Optuna's samplers by name (`SAMPLERS`)."""
    if name == "tpe":
        # constant_liar: trials running on other slots or workers count as bad results, so
        # concurrent proposals do not crowd where the study is measuring already.
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=8, multivariate=True, group=True, constant_liar=True)
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
