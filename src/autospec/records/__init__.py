"""The trial record: what a trial produced, how it is stored on an Optuna trial, and how
stored trials are read back and classified. The only code that knows attribute keys.

    schema   TrialRecord (typed, versioned, round-tripping to user attributes), Markers,
             outcome names
    stored   StoredTrial, TrialClass, classify, read_trials (the one reader)
    servers  the same server: launch_groups (a configuration's launches, references included),
             objective_groups (the same server at one concurrency), holds_level
    front    pareto_front (the one Pareto front), pooled_values
    confirming  what the picks rest on (contests) and which relaunch settles them
    stream   how far the study's launches measured each level's request stream (stream_lengths)
    store    TrialStore (the one writer: records, constraints, the dashboard's mirror,
             worker/server identities, queued trials)
    retry    StorageRetry (riding out a storage that is briefly away)
"""

from autospec.records import schema
from autospec.records.front import dominates, launch_groups, objective_groups, pareto_front, pooled_values
from autospec.records.retry import STORAGE_AWAY_ERRORS, StorageRetry, StorageUnavailable
from autospec.records.schema import *  # noqa: F403  (the names of schema.__all__, re-exported below)
from autospec.records.store import (
    DASHBOARD_CONSTRAINTS_KEY,
    FEASIBLE_KEY,
    MODEL_SUMMARY_KEY,
    WORKER_OPTIONS_KEY,
    TrialStore,
    worst_values,
)
from autospec.records.stored import SERVER_KEY, WORKER_KEY, StoredTrial, TrialClass, classify, read_trial, read_trials

__all__ = [
    "StoredTrial",
    "TrialClass",
    "classify",
    "read_trial",
    "read_trials",
    "WORKER_KEY",
    "SERVER_KEY",
    "dominates",
    "pareto_front",
    "launch_groups",
    "objective_groups",
    "pooled_values",
    "TrialStore",
    "FEASIBLE_KEY",
    "DASHBOARD_CONSTRAINTS_KEY",
    "MODEL_SUMMARY_KEY",
    "WORKER_OPTIONS_KEY",
    "worst_values",
    "StorageRetry",
    "StorageUnavailable",
    "STORAGE_AWAY_ERRORS",
]
__all__ += schema.__all__
