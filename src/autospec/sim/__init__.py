"""A stand-in SGLang server and its calibrated performance and memory model.

The server process (`python -m autospec.sim`) behaves like an SGLang server from the
outside; this package's pure part, re-exported here, is what it and autospec's tests
use to know what the server *should* do:

    profile = load_profile()                        # the default profile, calibrated to the hand-tuning sweep
    cfg = resolve_args(profile, {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3})
    init_outcome(profile, cfg)                       # KV pool, max_running_requests, or a failure
    predict(profile, flags, concurrency=32)          # noiseless benchmark figures

The model is documented in `autospec.sim.model` and docs/simulator.md. This package
imports nothing from the rest of autospec.
"""

from __future__ import annotations

from autospec.sim.model import (
    ArgumentRejected,
    InitOutcome,
    ServerConfig,
    accept_length,
    accept_length_distribution,
    classify_prompt,
    init_outcome,
    prefill_seconds,
    resolve_args,
    step_seconds,
)
from autospec.sim.predict import Prediction, exhaustive_optimum, noiseless_emit, predict
from autospec.sim.profile import (
    Profile,
    ProfileError,
    default_profile_path,
    list_profiles,
    load_profile,
)

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
    "noiseless_emit",
    "predict",
    "prefill_seconds",
    "resolve_args",
    "step_seconds",
]
