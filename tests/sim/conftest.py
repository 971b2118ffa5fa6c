"""Fixtures that run ``python -m autospec.sim`` as a real subprocess (see processes.py:
own session, free loopback port, output in a file, the whole group killed in teardown),
and flag sets shared by the simulator's tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from autospec.sim import ArgumentRejected, init_outcome, resolve_args

from .processes import Sim, SimPool, free_port, pid_alive

__all__ = ["SPEC", "SPEC_FLAGS", "Sim", "SimPool", "flags_for_status", "free_port", "pid_alive", "to_argv"]

#: A fast, noiseless MTP configuration of the default profile.
SPEC_FLAGS = (
    "--model-path",
    "sim",
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
)
#: The same configuration as ServerArgs fields.
SPEC = {
    "model_path": "sim",
    "speculative_algorithm": "NEXTN",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


def to_argv(flags: dict) -> list[str]:
    """ServerArgs fields -> SGLang's command-line flags."""
    argv = []
    for name, value in flags.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def flags_for_status(profile, status: str, message_contains: str = "") -> dict:
    """A flag set of `profile` whose init ends in `status` (and whose message contains
    `message_contains`), searched on a grid rather than hard-coded."""
    grid = itertools.product(
        [1, 2, 3, 10], [1, 2], [None, 4, 6, 8], [0.1, 0.3, 0.85, 0.97], [None, 4], [None, 1], ["flashinfer", "triton"]
    )
    for steps, topk, draft, fraction, mrr, tp, backend in grid:
        flags = {
            **SPEC,
            "speculative_num_steps": steps,
            "speculative_eagle_topk": topk,
            "mem_fraction_static": fraction,
            "attention_backend": backend,
        }
        flags.pop("speculative_num_draft_tokens")
        if draft is not None:
            flags["speculative_num_draft_tokens"] = draft
        if mrr is not None:
            flags["max_running_requests"] = mrr
        if tp is not None:
            flags["tp_size"] = tp
        try:
            outcome = init_outcome(profile, resolve_args(profile, flags))
        except ArgumentRejected:
            continue
        if outcome.status == status and message_contains in outcome.message:
            return flags
    raise AssertionError(f"no flags in the grid give {status} {message_contains!r}")


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator:
    """``sim_factory(*args, env_extra=None)`` starts a simulator; all are killed in teardown."""
    pool = SimPool(tmp_path)
    try:
        yield pool.start
    finally:
        pool.close()


@pytest.fixture(scope="module")
def module_sim_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """``sim_factory`` shared by a module's tests (killed when the module is done)."""
    pool = SimPool(tmp_path_factory.mktemp("sims"))
    try:
        yield pool.start
    finally:
        pool.close()
