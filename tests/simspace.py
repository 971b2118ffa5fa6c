"""Shared by end-to-end tests against the simulator (tests/conftest.py, tests/study,
tests/report): a small search space (steps 1-4, mem-fraction 0.80-0.88, C=1 and C=4,
24 output tokens, so a launched trial takes about a second) and the scan for simulator
processes a test left behind."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path


def processes_mentioning(marker: str, needle: bytes = b"autospec.sim") -> dict[int, str]:
    """Running processes whose argv has the word `needle` and an argument containing
    `marker` (a test's tmp dir: its simulators keep their GPU state there)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parts = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in parts and any(marker.encode() in p for p in parts):
            found[int(entry.name)] = b" ".join(parts).decode(errors="replace")
    return found


def kill_all(pids: Iterable[int], kill: Callable[[int, int], None] = os.kill) -> None:
    """SIGKILL each of `pids` (a process, or with ``kill=os.killpg`` a group); ones already
    gone are fine. For fixtures that then fail the test for having left them."""
    for pid in pids:
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


def sim_space_text(topk: tuple[int, ...] = (1,), baseline: bool = False) -> str:
    """With topk (1,) every candidate launches (12 configurations); adding 2 adds a region
    the simulated SGLang version rejects (tree with paged triton attention)."""
    text = f"""
[server.flags]
model_path = "sim-model"
speculative_algorithm = "NEXTN"
tp_size = 4
attention_backend = "triton"
page_size = 16

[params.speculative_num_steps]
type = "int"
low = 1
high = 4

[params.speculative_eagle_topk]
type = "categorical"
choices = {list(topk)}

[params.speculative_num_draft_tokens]
type = "draft_tokens"

[params.mem_fraction_static]
type = "float"
low = 0.80
high = 0.88
step = 0.04

[workload]
kind = "synthetic"
output_len = 24

[bench]
concurrency = [1, 4]
requests_multiplier = 1
min_requests = 2
warmup_requests = 0

[[objectives]]
metric = "output_tok_s"
concurrency = 1

[[objectives]]
metric = "agg_output_tok_s"
concurrency = 4
"""
    if baseline:
        text += """
[baseline]
speculative_num_steps = 1
speculative_eagle_topk = 1
mem_fraction_static = 0.84
"""
    return text


def scripted_space_text(max_steps: int) -> str:
    """A NEXTN chain space (steps 1..`max_steps`, top-k 1, draft tokens) with C=1 and C=4
    objectives, for study-loop tests whose chain is scripted (no server starts)."""
    return f"""
[server.flags]
model_path = "fake-model"
speculative_algorithm = "NEXTN"

[params.speculative_num_steps]
type = "int"
low = 1
high = {max_steps}

[params.speculative_eagle_topk]
type = "categorical"
choices = [1]

[params.speculative_num_draft_tokens]
type = "draft_tokens"

[bench]
concurrency = [1, 4]

[[objectives]]
metric = "output_tok_s"
concurrency = 1

[[objectives]]
metric = "agg_output_tok_s"
concurrency = 4
"""
