"""Writing trial records into an Optuna study: the only writer of trial attributes.

Feasibility is stored the Optuna 5.0 way (`Trial.set_constraint`: ``feasible`` is 0 or 1,
and one ``<metric>@c<C>`` violation per SLO, <= 0 satisfied) and mirrored into the
list-valued system attribute ``constraints``, the only form optuna-dashboard 0.21.0
reads. Every trial carries the same constraint keys (Optuna 5.0's GPSampler refuses
studies whose trials have different numbers of constraints). Trials that measured
nothing are told worst-case values (0 tok/s for maximised metrics), so every sampler
reads them as COMPLETE and none can put them on a front. A trial that measured but
violated an SLO is told worst-case values too (its measurement stays in the record), so
that fronts computed without constraints (optuna-dashboard 0.21.0's API) leave it out.
A reference point (`Markers.reference`) is a deployable configuration like any other: it
is told its measured values (worst-case ones only where it broke an SLO), so Optuna's
`best_trials` and optuna-dashboard's front show it where nothing dominates it. Trials that
measured nothing (a launch that failed at init) carry ``feasible`` = 1 with worst-case
values: COMPLETE, so they count as launches, are never retried, and teach the samplers
to avoid the configuration (the proposer's scratch study mirrors them), while
`best_trials` (Optuna 5.1 takes only trials with every constraint <= 0) and the
dashboard (the mirrored ``constraints`` list) draw them as infeasible, never as a front
point.

Every storage call goes through a `StorageRetry`, so a storage that is briefly away
(a PostgreSQL restart, a SQLite file locked by the dashboard) delays the run instead of
ending it; writes are safe to repeat.

Optuna 5.0 has no public way to write attributes of a trial other than the one being
asked, nor to read a live trial's storage id; the private ``study._storage`` and
``trial._trial_id`` are used here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import fields
from typing import Any

import optuna

from autospec.metrics.paired import SpreadHistory
from autospec.records.history import other_studies, spread_history
from autospec.records.launches import ObjectiveRef
from autospec.records.retry import StorageRetry
from autospec.records.schema import Markers, TrialRecord
from autospec.records.stored import FIXED_PARAMS_KEY, SERVER_KEY, WORKER_KEY, StoredTrial, read_trial, read_trials

__all__ = ["TrialStore", "FEASIBLE_KEY", "DASHBOARD_CONSTRAINTS_KEY", "worst_values"]

FEASIBLE_KEY = "feasible"
DASHBOARD_CONSTRAINTS_KEY = "constraints"
#: Study attribute: `--sampler model`'s verdict on the configurations never launched
#: (`ModelSampler.unlaunched`, written at the end of each run).
MODEL_SUMMARY_KEY = "model_unlaunched"
# Study attribute: the options and search-space text of the run that created the study,
# from which `autospec worker` on another host runs the same study (autospec.cli.workers).
WORKER_OPTIONS_KEY = "autospec:worker_options"
_State = optuna.trial.TrialState


def worst_values(maximize: Sequence[bool]) -> list[float]:
    """Objective values told for trials that measured nothing."""
    return [0.0 if up else 1e6 for up in maximize]


class TrialStore:
    """Writes records onto the trials of one study.

    `maximize` gives each objective's direction, `constraint_names` the SLO constraints
    of the search space (in order), `retry` the patience with an absent storage."""

    def __init__(
        self, study: optuna.Study, maximize: Sequence[bool], constraint_names: Sequence[str], retry: StorageRetry | None = None
    ) -> None:
        self.study = study
        self.maximize = list(maximize)
        self.constraint_names = list(constraint_names)
        self.retry = retry if retry is not None else StorageRetry()
        #: per objective index, the launch spread the storage's other studies measured on this
        #: run's hardware and target (`autospec.records.history`; read once, `read_history`)
        self.history: dict[int, SpreadHistory] = {}

    @property
    def storage(self) -> optuna.storages.BaseStorage:
        """The study's storage (for Optuna calls that take one, e.g. artifact uploads)."""
        return self.study._storage

    def frozen(self, stored: StoredTrial) -> optuna.trial.FrozenTrial:
        """The Optuna trial behind `stored`, as it is now."""
        return self.storage.get_trial(stored.trial_id)

    # ------------------------------------------------------------------ the running trial
    def constraints_of(self, record: TrialRecord) -> dict[str, float]:
        """The constraint values stored for `record`; an SLO never measured is neutral."""
        slo = {name: record.constraints.get(name, 0.0) for name in self.constraint_names}
        return {FEASIBLE_KEY: 0.0 if record.feasible else 1.0, **slo}

    def ask(self) -> optuna.Trial:
        """A new trial from the sampler (or the queue)."""
        return self.retry("ask for the next trial", self.study.ask)

    def read_history(self, on: Collection[tuple[str, str]], refs: Sequence[ObjectiveRef]) -> None:
        """Set `history` from the storage's other studies on the (hardware, model) pairs `on`."""
        others = self.retry("read the storage's other studies", lambda: other_studies(self.study))
        self.history = spread_history(others, on, refs)

    def read(self, states: Sequence[_State] | None = None) -> list[StoredTrial]:
        """Every trial of the study (or those in `states`), typed."""
        return self.retry("read the study's trials", lambda: read_trials(self.study, states))

    def tell(self, trial: optuna.Trial | int, record: TrialRecord) -> StoredTrial:
        """Store `record` on the running `trial` (a Trial, or a trial number) and finish it
        COMPLETE. Returns the trial as stored: another process may have ended it first
        (recovery judged its tuner gone), and then it holds that process's record."""
        constraints = self.constraints_of(record)
        values = list(record.values) if record.may_be_on_a_front and record.values else worst_values(self.maximize)
        return self._finish(trial, record, constraints, values, _State.COMPLETE)

    def tell_failed(self, trial: optuna.Trial | int, record: TrialRecord) -> StoredTrial:
        """Store `record` on the running `trial` and finish it FAIL (samplers ignore it);
        returns the trial as stored, like `tell`."""
        return self._finish(trial, record, None, None, _State.FAIL)

    def _finish(
        self,
        trial: optuna.Trial | int,
        record: TrialRecord,
        constraints: Mapping[str, float] | None,
        values: list[float] | None,
        state: _State,
    ) -> StoredTrial:
        """Attributes, constraints, then the tell; a trial already finished (a repeat after a
        tell that landed, or ended by another process meanwhile) is left as it is."""

        def write() -> int:
            live = self._live(trial)
            stored = self.storage.get_trial(live._trial_id)
            if stored.state.is_finished():
                return live._trial_id
            try:
                for key, value in record.to_attrs().items():
                    live.set_user_attr(key, value)
                if constraints is not None:
                    for key, value in constraints.items():
                        live.set_constraint(key, value)
                    self.storage.set_trial_system_attr(live._trial_id, DASHBOARD_CONSTRAINTS_KEY, list(constraints.values()))
                self.study.tell(live, values=values, state=state)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass  # another process ended it between our look and our writes
            return live._trial_id

        trial_id = self.retry("record the trial", write)
        return self.retry("read the trial", lambda: read_trial(self.storage.get_trial(trial_id)))

    def _live(self, trial: optuna.Trial | int) -> optuna.Trial:
        if isinstance(trial, optuna.Trial):
            return trial
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(self.study._study_id, trial)
        return optuna.Trial(self.study, trial_id)

    def was_queued(self, trial: optuna.Trial) -> bool:
        """`trial` was taken from the queue (enqueued parameters), not sampled by the study's
        own sampler (Optuna 5.0-5.1 keeps enqueued parameters in the system attribute
        ``fixed_params``, an empty dict where a space has no free parameter left)."""
        return self.retry("read the trial", lambda: FIXED_PARAMS_KEY in self.storage.get_trial(trial._trial_id).system_attrs)

    def worker_of(self, trial: optuna.Trial) -> dict[str, Any] | None:
        """The worker record on `trial` as stored now (`record_worker`), or None."""
        attrs = self.retry("read the trial", lambda: self.storage.get_trial(trial._trial_id).system_attrs)
        worker = attrs.get(WORKER_KEY)
        return dict(worker) if isinstance(worker, dict) else None

    def record_worker(self, trial: optuna.Trial, worker: Mapping[str, Any]) -> None:
        self.retry(
            "record this tuner on the trial",
            lambda: self.storage.set_trial_system_attr(trial._trial_id, WORKER_KEY, dict(worker)),
        )

    def record_server(self, trial: optuna.Trial, server: Mapping[str, Any], patience_s: float | None = None) -> None:
        self.retry(
            "record the trial's server",
            lambda: self.storage.set_trial_system_attr(trial._trial_id, SERVER_KEY, dict(server)),
            patience_s,
        )

    def is_finished(self, trial: optuna.Trial | int) -> bool:
        return self.retry("read the trial", lambda: self.storage.get_trial(self._live(trial)._trial_id).state.is_finished())

    def heartbeat(self, trial: optuna.Trial) -> None:
        """Record a heartbeat of `trial` (RDB storages only); not retried (the next beat is)."""
        self.storage.record_heartbeat(trial._trial_id)  # type: ignore[attr-defined]

    def set_study_attr(self, key: str, value: Any) -> None:
        self.retry("update the study", lambda: self.study.set_user_attr(key, value))

    def set_study_flag(self, key: str) -> None:
        self.retry("update the study", lambda: self.study.set_user_attr(key, True))

    # ------------------------------------------------------------------ other trials
    def end(self, stored: StoredTrial, record: TrialRecord) -> bool:
        """RUNNING -> FAIL with `record`, for a trial whose tuner is gone. False when
        another process finished it first."""

        def write() -> bool:
            try:
                for key, value in record.to_attrs().items():
                    self.storage.set_trial_user_attr(stored.trial_id, key, value)
                return bool(self.storage.set_trial_state_values(stored.trial_id, state=_State.FAIL))
            except optuna.exceptions.UpdateFinishedTrialError:
                return False

        return self.retry("fail a trial of a stopped tuner", write)

    def enqueue(self, params: Mapping[str, Any], markers: Markers | None = None, first: bool = False) -> None:
        """Queue `params` with `markers` saying why: after the trials already queued, or with
        `first` ahead of them (they move back one place each)."""
        attrs = markers.to_attrs() if markers is not None else None
        self.retry("queue a trial", lambda: self.study.enqueue_trial(dict(params), user_attrs=attrs or None))
        if first:
            self.retry("queue a trial first", self._last_queued_first)

    def _last_queued_first(self) -> None:
        """Rotate the queue's contents so that the last queued trial's comes first.

        Optuna 5.0 asks the WAITING trial with the lowest number first (`Study.ask` ->
        `_pop_waiting_trial_id`) and keeps a queued trial's parameters in its system attribute
        ``fixed_params``: the contents (those and the markers) move, the trials stay. Callers
        hold the study's lock while no other worker is asking (`ControlPolicy`)."""
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        if len(waiting) < 2:
            return
        slots = [f.name for f in fields(Markers)]
        contents = [(t.system_attrs.get(FIXED_PARAMS_KEY, {}), Markers.from_attrs(t.user_attrs)) for t in waiting]
        for trial, (params, markers) in zip(waiting, contents[-1:] + contents[:-1], strict=True):
            self.storage.set_trial_system_attr(trial._trial_id, FIXED_PARAMS_KEY, params)
            attrs = markers.to_attrs()
            for slot in slots:  # a marker the trial had and its new content lacks is cleared
                if slot in attrs or slot in trial.user_attrs:
                    self.storage.set_trial_user_attr(trial._trial_id, slot, attrs.get(slot))

    def imported_keys(self) -> set[str]:
        """The keys of the trials imported into the study so far (`Markers.imported`)."""
        trials = self.retry("read the study's trials", lambda: read_trials(self.study))
        return {str(key) for t in trials if (key := (t.markers.imported or {}).get("key")) is not None}

    def add_measured(
        self, params: Mapping[str, Any], distributions: Mapping[str, Any], record: TrialRecord, markers: Markers
    ) -> int:
        """Add a finished trial measured elsewhere (`autospec import`); its number."""
        constraints = self.constraints_of(record)
        values = list(record.values) if record.may_be_on_a_front and record.values else worst_values(self.maximize)
        trial = optuna.trial.create_trial(
            params=dict(params),
            distributions=dict(distributions),
            values=values,
            user_attrs={**record.to_attrs(), **markers.to_attrs()},
            constraints=constraints,
            system_attrs={DASHBOARD_CONSTRAINTS_KEY: list(constraints.values())},
            state=_State.COMPLETE,
        )
        self.study.add_trial(trial)
        return self.study.get_trials(deepcopy=False)[-1].number
