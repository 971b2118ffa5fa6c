"""A stand-in SGLang server and its calibrated performance and memory model.

The server process (`python -m autospec.sim`) behaves like an SGLang server from the
outside; this package's pure part, re-exported here, is what it and autospec's tests
use to know what the server *should* do:

    profile = load_profile()                        # the default profile, calibrated to the hand-tuning sweep
    cfg = resolve_args(profile, {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3})
    init_outcome(profile, cfg)                       # KV pool, max_running_requests, or a failure
    predict(profile, flags, concurrency=32)          # noiseless benchmark figures

The model is one module per concept: `arguments` (SGLang's argument rules, read from
`autospec.sglang_rules`), `memory`, `acceptance`, `timing` and `prompts`; docs/simulator.md
documents it. This package imports nothing from the rest of autospec but SGLang's rules
and facts (`autospec.sglang_rules`, `autospec.sglang_facts`).
"""

from __future__ import annotations

from autospec.sim.acceptance import accept_length, accept_length_distribution, request_accept_length
from autospec.sim.arguments import resolve_args
from autospec.sim.config import ArgumentRejected, ServerConfig
from autospec.sim.memory import InitOutcome, init_outcome
from autospec.sim.predict import Prediction, exhaustive_optimum, noiseless_emit, predict
from autospec.sim.profile import (
    Profile,
    ProfileError,
    default_profile_path,
    list_profiles,
    load_profile,
)
from autospec.sim.prompts import classify_prompt
from autospec.sim.timing import prefill_seconds, step_seconds
from autospec.sim.variation import machine_factor

__all__ = [
    "ArgumentRejected",
    "InitOutcome",
    "Prediction",
    "Profile",
    "ProfileError",
    "ServerConfig",
    "accept_length",
    "accept_length_distribution",
    "classify_prompt",
    "default_profile_path",
    "exhaustive_optimum",
    "init_outcome",
    "list_profiles",
    "load_profile",
    "machine_factor",
    "noiseless_emit",
    "predict",
    "prefill_seconds",
    "request_accept_length",
    "resolve_args",
    "step_seconds",
]
