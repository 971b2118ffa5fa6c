"""Every string the launcher parses appears in the simulator's output as SGLang prints it.

The launcher's tables are iterated, not copied: ``FAILURE_PATTERNS`` and
``RUNTIME_EVENT_PATTERNS`` (autospec.launcher.classify) and the startup-fact regexes of
autospec.launcher.startup. Each entry is either produced by a scenario below (the sim is
run into that state and the needle must occur in its output, and the classifier must
name the same kind) or listed in NOT_PRODUCED with the reason the sim deliberately
cannot produce it. A new launcher pattern fails ``test_every_pattern_is_produced_or_excused``
until it is placed in one of the two.

Profiles pick the wording: the default profile is sglang 0.5.10 (``Not enough memory``,
``Capture cuda graph end. Time elapsed``), llama31 0.5.16 (``Loaded weights leave no GPU
memory``, phase-wise graph lines, ``prepare_server_args`` tracebacks), deepseek 0.5.23
(``resolve_once`` tracebacks).
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from autospec.launcher import FAILURE_PATTERNS, RUNTIME_EVENT_PATTERNS, classify_failure, parse_startup
from autospec.launcher import startup as startup_module
from autospec.launcher.classify import find_cause
from autospec.sim import init_outcome, load_profile, resolve_args

from .conftest import SPEC, Sim, flags_for_status, to_argv

V0510, V0516, V0523 = "seed-qwen35-122b-4x-rtxpro6000", "llama31-8b-eagle3-1x-h100", "deepseek-v3-mtp-8x-h200"
FAST = ("--sim-noise", "off", "--sim-load-seconds", "0.1", "--sim-warmup-seconds", "0", "--sim-time-scale", "0.2")
NGRAM_TRITON_PAGED = {"model_path": "sim", "speculative_algorithm": "NGRAM", "attention_backend": "triton", "page_size": 16}


@dataclass(frozen=True)
class Outcome:
    log: str
    returncode: int | None


# ------------------------------------------------------------------ scenarios


def _exited(sim: Sim) -> Outcome:
    returncode = sim.wait_exit()
    return Outcome(sim.log(), returncode)


def _ready_then_stopped(sim: Sim) -> Outcome:
    sim.wait_ready()
    sim.kill()
    return Outcome(sim.log(), None)


def _with_profile(name: str, flags: dict, *extra: str) -> tuple[str, ...]:
    return ("--sim-profile", name, *to_argv(flags), *FAST, *extra)


def _ready(name: str) -> Callable:
    return lambda start: _ready_then_stopped(start(*_with_profile(name, SPEC)))


def _init_failure(name: str, status: str, wording: str = "") -> Callable:
    def run(start):
        flags = flags_for_status(load_profile(name), status, wording)
        return _exited(start(*_with_profile(name, flags)))

    return run


def _port_in_use(start) -> Outcome:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        return _exited(start(*_with_profile(V0510, SPEC), "--port", str(taken.getsockname()[1])))


def _crashed(start) -> Outcome:
    sim = start(*_with_profile(V0510, SPEC), "--sim-fault", "crash_after_requests=1")
    sim.wait_ready()
    httpx.post(
        sim.url + "/generate", timeout=30, json={"text": "w1 w2 w3", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
    )
    return _exited(sim)


def _retraction(start) -> Outcome:
    """A pool of ~3000 tokens (llama31 has no running-request cap) and 8 requests of 632."""
    profile = load_profile(V0516)
    low, high = 0.1, 0.5  # bisect mem_fraction_static for the smallest pool of at least 3000 tokens
    for _ in range(30):
        middle = (low + high) / 2
        outcome = init_outcome(profile, resolve_args(profile, {**SPEC, "mem_fraction_static": middle}))
        low, high = (middle, high) if not outcome.ok or outcome.max_total_num_tokens < 3000 else (low, middle)
    sim = start(*_with_profile(V0516, {**SPEC, "mem_fraction_static": round(high, 4)}))
    sim.wait_ready()
    body = {"text": " ".join(f"w{i}" for i in range(32)), "sampling_params": {"max_new_tokens": 600, "ignore_eos": True}}

    async def burst() -> list[int]:
        async with httpx.AsyncClient(timeout=60) as client:
            replies = await asyncio.gather(*(client.post(sim.url + "/generate", json=body) for _ in range(8)))
        return [r.json()["meta_info"]["completion_tokens"] for r in replies]

    assert asyncio.run(burst()) == [600] * 8
    sim.kill()
    return Outcome(sim.log(), None)


SCENARIOS: dict[str, Callable] = {
    "ready_0.5.10": _ready(V0510),
    "ready_0.5.16": _ready(V0516),
    "kv_not_enough_memory_0.5.10": _init_failure(V0510, "kv_pool_too_small", "Not enough memory"),
    "kv_no_memory_left_0.5.16": _init_failure(V0516, "kv_pool_too_small", "Loaded weights leave no GPU memory"),
    "cuda_graph_oom": _init_failure(V0510, "cuda_graph_oom"),
    "weights_oom": _init_failure(V0510, "weights_oom"),
    "too_few_gpus": lambda start: _exited(start(*_with_profile(V0516, {**SPEC, "tp_size": 2}))),  # a 1-GPU profile
    "unknown_flag": lambda start: _exited(start(*_with_profile(V0510, SPEC), "--no-such-flag", "1")),
    "invalid_choice": lambda start: _exited(start(*_with_profile(V0510, SPEC), "--attention-backend", "nope")),
    "rejected_0.5.16": lambda start: _exited(start(*_with_profile(V0516, NGRAM_TRITON_PAGED))),
    "rejected_0.5.23": lambda start: _exited(start(*_with_profile(V0523, NGRAM_TRITON_PAGED))),
    "port_in_use": _port_in_use,
    "crashed": _crashed,
    "retraction": _retraction,
}

#: (kind, needle) of the launcher's patterns -> the scenario that must print it
PRODUCED: dict[tuple[str, str], str] = {
    ("port_in_use", "address already in use"): "port_in_use",
    ("rejected_args", ": error: unrecognized arguments"): "unknown_flag",
    ("rejected_args", ": error: argument "): "invalid_choice",
    ("rejected_args", "prepare_server_args"): "rejected_0.5.16",
    ("rejected_args", "resolve_once"): "rejected_0.5.23",
    ("rejected_args", "Load weight begin"): "ready_0.5.10",
    ("kv_pool_too_small", "Loaded weights leave no GPU memory for the KV cache"): "kv_no_memory_left_0.5.16",
    ("kv_pool_too_small", "Not enough memory. Please try to increase --mem-fraction-static."): "kv_not_enough_memory_0.5.10",
    ("cuda_graph_oom", "Capture cuda graph failed"): "cuda_graph_oom",
    ("weights_oom", "torch.OutOfMemoryError"): "weights_oom",
    ("rejected_args", "CUDA error: invalid device ordinal"): "too_few_gpus",
    ("weights_oom", "CUDA out of memory"): "weights_oom",
    ("retractions", "KV cache pool is full. Retract requests."): "retraction",
}

#: (kind, needle) -> why the simulator never prints it
NOT_PRODUCED: dict[tuple[str, str], str] = {
    (
        "port_in_use",
        "Port is already in use.",
    ): "SGLang's PortArgs (ZMQ/NCCL ports derived from --port under DP attention); the sim opens "
    "only its HTTP port, whose conflict it reports in uvicorn's wording",
    (
        "foreign_gpu_memory",
        "The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
    ): "the sim's memory model gives every rank the same free memory and does not read other "
    "processes' GPU-state files, so its ranks are never unbalanced",
    (
        "weights_oom",
        "CUDA error: out of memory",
    ): "a raw cudaMalloc failure outside PyTorch's caching allocator (NCCL, custom kernels); the sim's "
    "weight-loading OOM is the allocator's torch.OutOfMemoryError",
}


@pytest.fixture(scope="module")
def outcomes(module_sim_factory) -> Iterator[Callable[[str], Outcome]]:
    """``outcomes(name)`` runs scenario `name` once per module and returns its log."""
    cache: dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        if name not in cache:
            cache[name] = SCENARIOS[name](module_sim_factory)
        return cache[name]

    yield get


# ------------------------------------------------------------------ failure and event patterns


def _patterns():
    return [*FAILURE_PATTERNS, *RUNTIME_EVENT_PATTERNS]


def test_every_pattern_is_produced_or_excused():
    keys = [(p.kind, p.needle) for p in _patterns()]
    assert len(keys) == len(set(keys))
    assert set(PRODUCED).isdisjoint(NOT_PRODUCED)
    assert set(keys) == set(PRODUCED) | set(NOT_PRODUCED), set(keys) ^ (set(PRODUCED) | set(NOT_PRODUCED))
    assert set(PRODUCED.values()) <= set(SCENARIOS)


@pytest.mark.parametrize(
    "pattern", [p for p in _patterns() if (p.kind, p.needle) in PRODUCED], ids=lambda p: f"{p.kind}:{p.needle[:40]}"
)
def test_pattern_appears_in_the_simulators_output(pattern, outcomes):
    outcome = outcomes(PRODUCED[(pattern.kind, pattern.needle)])
    lines = outcome.log.splitlines()
    assert any(pattern.matches(line) for line in lines), outcome.log[-3000:]
    if pattern.role in ("cause", "frame"):
        cause = find_cause(outcome.log)
        assert cause is not None and cause.kind == pattern.kind, (cause, outcome.log[-3000:])
        assert classify_failure(outcome.log, outcome.returncode).kind == pattern.kind
        assert outcome.returncode not in (None, 0)
    if pattern.role == "frame":  # rejected before any weight was loaded (the guard never printed)
        guards = [p for p in FAILURE_PATTERNS if p.kind == pattern.kind and p.role == "guard"]
        assert guards and not any(g.matches(line) for g in guards for line in lines)


def test_a_retraction_line_per_event_with_sglangs_fields(outcomes):
    needle = next(p.needle for p in RUNTIME_EVENT_PATTERNS if p.kind == "retractions")
    lines = [line for line in outcomes("retraction").log.splitlines() if needle in line]
    # sglang 0.5.16 scheduler.py; llama31 is not a hybrid model, so no #mamba_num_gained.
    shape = re.compile(
        r"^\[[\d\- :]+\] KV cache pool is full\. Retract requests\. #retracted_reqs: [1-9]\d*, "
        r"#new_tokens_gained: \d+, #new_token_ratio: [01]\.\d{4} -> [01]\.\d{4}$"
    )
    assert lines and all(shape.match(line) for line in lines), lines


def test_a_server_that_dies_while_serving_is_classified_as_crashed(outcomes):
    outcome = outcomes("crashed")
    error = classify_failure(outcome.log, outcome.returncode, after_ready=True)
    assert error.kind == "crashed"
    assert error.detail == "RuntimeError: CUDA error: an illegal memory access was encountered"


# ------------------------------------------------------------------ startup facts

# Which sim logs each startup regex must match: the old one-line graph end only below 0.5.16.
BOTH = {"ready_0.5.10", "ready_0.5.16"}
REGEX_SCENARIOS = {
    "_PREFIX": BOTH,
    "_SUMMARY_INT": BOTH,
    "_AVAILABLE_MEM": BOTH,
    "_KV_ALLOCATED": BOTH,
    "_KV_SIZES": BOTH,
    "_KV_DTYPE": BOTH,
    "_PRE_LOAD_MEM": BOTH,
    "_GRAPH_END_PHASED": {"ready_0.5.16"},
    "_GRAPH_END_OLD": {"ready_0.5.10"},
    "_GRAPH_MEM": BOTH,
    "_GRAPH_BEGIN_FREE": BOTH,
    "_WEIGHTS_END": BOTH,
    "_READY": BOTH,
    "_LOGGED_FLAG": BOTH,  # fields of the server_args=ServerArgs(...) line
}
REGEX_NOT_PRODUCED = {
    "_NONZERO_RANK": "lines of ranks other than 0 (TP1, DP2, ...); the sim prints rank 0's lines only",
    "_KV_SIZE": "an MLA pool's single 'KV size: X GB' (sglang 0.5.23 memory_pool.py); the sim prints K and V sizes",
}


def _startup_regexes() -> dict[str, list[re.Pattern]]:
    """Module-level regexes (and dicts of them) of autospec.launcher.startup, plus the ready line."""
    found: dict[str, list[re.Pattern]] = {}
    for name, value in vars(startup_module).items():
        if isinstance(value, re.Pattern):
            found[name] = [value]
        elif isinstance(value, dict) and value and all(isinstance(v, re.Pattern) for v in value.values()):
            found[name] = list(value.values())
        elif name == "_READY" and isinstance(value, str):
            found[name] = [re.compile(re.escape(value))]
    return found


def test_every_startup_regex_is_produced_or_excused():
    assert set(_startup_regexes()) == set(REGEX_SCENARIOS) | set(REGEX_NOT_PRODUCED)


@pytest.mark.parametrize("name", sorted(REGEX_SCENARIOS))
def test_startup_regex_matches_exactly_the_expected_logs(name, outcomes):
    regexes = _startup_regexes()[name]
    for scenario in sorted(BOTH):
        lines = outcomes(scenario).log.splitlines()
        matched = all(any(regex.search(line) for line in lines) for regex in regexes)
        assert matched == (scenario in REGEX_SCENARIOS[name]), (name, scenario)


@pytest.mark.parametrize(("scenario", "profile_name"), [("ready_0.5.10", V0510), ("ready_0.5.16", V0516)])
def test_startup_facts_parse_to_the_models_numbers(outcomes, scenario, profile_name):
    profile = load_profile(profile_name)
    outcome = init_outcome(profile, resolve_args(profile, SPEC))
    facts = parse_startup(outcomes(scenario).log)
    assert all(value is not None for value in facts.as_dict().values()), facts
    assert facts.max_total_num_tokens == facts.kv_cache_tokens == outcome.max_total_num_tokens
    assert facts.max_running_requests == outcome.max_running_requests
    assert facts.context_len == outcome.context_len
    assert facts.available_gpu_mem_gb == pytest.approx(outcome.available_gpu_mem_gb, abs=0.01)
    assert facts.chunked_prefill_size == profile.chunked_prefill_size
    assert facts.gpu_mem_before_load_gb == pytest.approx(profile.gpu_mem_gb - profile.runtime_overhead_gb, abs=0.01)
    assert facts.cuda_graph_seconds > 0 and facts.weight_load_seconds > 0
    # what the server logged it runs (SGLang rewrites NEXTN to EAGLE): the flags "the same server" compares
    shape = {k: SPEC[k] for k in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")}
    assert facts.logged_flags is not None and {k: facts.logged_flags[k] for k in shape} == shape
    assert facts.logged_flags["speculative_algorithm"] == "EAGLE"
