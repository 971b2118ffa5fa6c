"""The benchmark client: workloads, streaming requests, closed-loop levels, records.

    prompts(Workload(kind, ...), n)        seeded prompt sources (synthetic, random,
                                           JSONL/ShareGPT files, built-in sets)
    run_level(url, workload, LevelPlan)    one closed-loop level -> LevelResult
    run_levels(url, workload, plans)       several levels, synchronously
    run_level_precise(url, workload, plan, PrecisionGoal(...))
                                           one open-ended level, measured until its
                                           figures are precise enough or a cap stops it
                                           (`stop_rule` decides; a study's precision loop)
    run_level_adaptive(...)                repeat a level until its 95% CI is narrow
    AcceptTracker(client, log_path)        accept length per level from /server_info or
                                           the server's log, for APIs without it

Per-request failures are records with an `error_kind`, never exceptions; statistics
live in `autospec.metrics`.
"""

from __future__ import annotations

from autospec.bench.accept import AcceptTracker
from autospec.bench.adaptive import (
    STOP_REASONS,
    AdaptiveResult,
    AdaptiveSettings,
    Figure,
    PreciseResult,
    PrecisionGoal,
    Stop,
    StopHook,
    figure_state,
    precision_verdict,
    run_level_adaptive,
    run_level_adaptive_with,
    run_level_precise,
    run_level_precise_with,
    stop_rule,
)
from autospec.bench.client import BenchClient
from autospec.bench.runner import (
    LevelPlan,
    Progress,
    default_num_requests,
    run_level,
    run_level_with,
    run_levels,
    run_levels_async,
)
from autospec.bench.workloads import (
    APIS,
    BUILTIN_SETS,
    KINDS,
    Prompt,
    Workload,
    export_jsonl,
    export_sharegpt,
    load_builtin,
    load_prompt_file,
    prompts,
    synthetic_prompt,
)
from autospec.request_records import ERROR_KINDS, LevelResult, RequestRecord

__all__ = [
    "APIS",
    "AcceptTracker",
    "AdaptiveResult",
    "AdaptiveSettings",
    "BUILTIN_SETS",
    "BenchClient",
    "ERROR_KINDS",
    "Figure",
    "KINDS",
    "LevelPlan",
    "LevelResult",
    "PreciseResult",
    "PrecisionGoal",
    "Progress",
    "Prompt",
    "RequestRecord",
    "STOP_REASONS",
    "Stop",
    "StopHook",
    "Workload",
    "default_num_requests",
    "export_jsonl",
    "export_sharegpt",
    "figure_state",
    "load_builtin",
    "load_prompt_file",
    "precision_verdict",
    "prompts",
    "run_level",
    "run_level_adaptive",
    "run_level_adaptive_with",
    "run_level_precise",
    "run_level_precise_with",
    "run_level_with",
    "run_levels",
    "run_levels_async",
    "stop_rule",
    "synthetic_prompt",
]
