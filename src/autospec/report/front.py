"""The Pareto front of a study and its trial counts, as plain data.

Only feasible, measured trials (launched by autospec, or imported with `autospec
import`) can be on the front: infeasible trials carry a violated ``feasible``
constraint (Optuna excludes them from ``best_trials``), and duplicates (a repeat of an
already measured server) are left out in favour of the trial that measured it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

__all__ = ["FrontRow", "StudyCounts", "front", "counts", "front_json", "is_infeasible"]


@dataclass(frozen=True)
class FrontRow:
    number: int
    params: dict[str, Any]  # the configuration as server flags (draft tokens mapped)
    values: list[float]
    outcome: str
    user_attrs: dict[str, Any]


@dataclass(frozen=True)
class StudyCounts:
    complete: int  # launched, measured and feasible
    pruned: int  # Optuna PRUNED state (autospec itself records none)
    failed: int  # FAIL state: interrupted or orphaned runs, retried later
    infeasible: int  # rejected, skipped, failed at init, bench failed, SLO violated
    duplicate: int  # reused another trial's measurement
    running: int

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def is_infeasible(t: optuna.trial.FrozenTrial) -> bool:
    return any(v > 0 for v in t.constraints.values())


def front(study: optuna.Study) -> list[FrontRow]:
    rows = []
    for t in study.best_trials:
        measured = t.user_attrs.get("launched") or t.user_attrs.get("imported")
        if is_infeasible(t) or t.user_attrs.get("outcome") == "duplicate" or not measured:
            continue
        params = dict(t.user_attrs.get("candidate") or t.params)
        rows.append(FrontRow(t.number, params, list(t.values), t.user_attrs.get("outcome", "ok"), dict(t.user_attrs)))
    return sorted(rows, key=lambda r: r.values[0], reverse=study.directions[0] == optuna.study.StudyDirection.MAXIMIZE)


def counts(study: optuna.Study) -> StudyCounts:
    S = optuna.trial.TrialState
    c = dict(complete=0, pruned=0, failed=0, infeasible=0, duplicate=0, running=0)
    for t in study.get_trials(deepcopy=False):
        if t.state == S.COMPLETE:
            if is_infeasible(t):
                c["infeasible"] += 1
            elif t.user_attrs.get("outcome") == "duplicate":
                c["duplicate"] += 1
            else:
                c["complete"] += 1
        elif t.state == S.PRUNED:
            c["pruned"] += 1
        elif t.state == S.FAIL:
            c["failed"] += 1
        elif t.state == S.RUNNING:
            c["running"] += 1
    return StudyCounts(**c)


def front_json(study: optuna.Study) -> dict[str, Any]:
    """The machine-readable front: the shape `autospec pareto --json` prints."""
    names = study.metric_names or [f"objective_{i}" for i in range(len(study.directions))]
    return {
        "study": study.study_name,
        "objectives": [
            {"name": n, "direction": d.name.lower()} for n, d in zip(names, study.directions)
        ],
        "front": [{"number": r.number, "params": r.params, "values": r.values} for r in front(study)],
        "counts": counts(study).as_dict(),
    }
