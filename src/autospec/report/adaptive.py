"""An SGLang ``--speculative-adaptive-config`` ladder from per-concurrency measurements (pure).

Format (checked against sglang 0.5.23, ``srt/speculative/adaptive_spec_params.py`` and
``srt/arg_groups/speculative_hook.py``): a JSON object whose integer-string keys are
batch sizes, each ``{"candidate_steps": [non-negative ints], ...}``; other top-level keys
are ignored as slots (they are merged into every slot's knobs, of which SGLang reads only
``ema_alpha``, ``update_interval``, ``warmup_batches``, ``up_hysteresis``,
``down_hysteresis``, ``ceiling_coeff``). A running batch is padded to a CUDA-graph batch
size and served by the slot with the largest key not above it, which picks among its
``candidate_steps`` from the accept length it observes. It is enabled with
``--speculative-adaptive --speculative-adaptive-config FILE``, only for EAGLE/EAGLE3
(NEXTN is EAGLE) with ``speculative_eagle_topk`` 1 and without attention DP, otherwise
SGLang disables it with a warning; ``--speculative-num-steps`` must be one of the
candidates, and draft tokens become steps + 1.

What autospec writes: one slot per measured concurrency C (the slot covers batch sizes
from C up to the next measured level). Its candidates are the step counts whose best
measured ``agg_output_tok_s`` at C is within noise of the best step count at C (value
plus the combined 95% half-widths reaches the best), so SGLang's runtime choice by
accept length stays among depths the benchmark found competitive at that load.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from autospec.errors import UsageError
from autospec.report.data import Measure, StudyData, TrialView
from autospec.report.deploy import split_argv
from autospec.sglang_facts import ADAPTIVE_ALGORITHMS, DRAFT_TOKENS, STEPS, TOPK

__all__ = ["LadderSlot", "Ladder", "build_ladder", "ladder_json", "dumps", "adaptive_flags", "ADAPTIVE_ALGORITHMS"]


@dataclass(frozen=True)
class LadderSlot:
    batch_size: int  # lower edge of the batch-size range: the measured concurrency
    candidate_steps: list[int]
    best_steps: int
    best_trial: int
    best: Measure
    trials: dict[int, int]  # steps -> trial number whose measurement was used


@dataclass(frozen=True)
class Ladder:
    metric: str
    slots: list[LadderSlot]

    @property
    def initial_steps(self) -> int:
        """The steps to start with (``--speculative-num-steps``): the best at the lowest load."""
        return self.slots[0].best_steps

    @property
    def all_steps(self) -> list[int]:
        return sorted({s for slot in self.slots for s in slot.candidate_steps})

    def steps_for(self, batch_size: int) -> list[int]:
        """Candidates SGLang would consider for `batch_size` (ignoring CUDA-graph padding)."""
        chosen = self.slots[0]
        for slot in self.slots:
            if slot.batch_size <= batch_size:
                chosen = slot
        return chosen.candidate_steps


def _server_flags(t: TrialView) -> dict[str, Any]:
    flags = dict(split_argv(t.server_args)[1]) if t.server_args else {}
    return {**flags, **t.resolved, **t.flags}


def _eligible(t: TrialView) -> int | None:
    """The trial's step count when it can serve under an adaptive ladder, else None."""
    flags = _server_flags(t)
    algo = str(flags.get("speculative_algorithm", "")).upper()
    steps, topk = flags.get(STEPS), flags.get(TOPK, 1)
    if algo not in ADAPTIVE_ALGORITHMS or steps is None:
        return None
    try:
        if int(topk) != 1 or int(steps) < 1:
            return None
        return int(steps)
    except (TypeError, ValueError):
        return None


def build_ladder(data: StudyData, metric: str = "agg_output_tok_s") -> Ladder:
    """The ladder from every feasible measured topk=1 EAGLE/EAGLE3/MTP trial of `data`."""
    by_steps: dict[int, list[TrialView]] = {}
    for t in data.measured:
        steps = _eligible(t)
        if steps is not None:
            by_steps.setdefault(steps, []).append(t)
    if not by_steps:
        raise UsageError(
            f"study {data.name!r} has no measured EAGLE/EAGLE3/MTP configuration with speculative_eagle_topk=1; "
            "SGLang's adaptive ladder supports only those (use --format cmd, yaml or systemd)"
        )
    levels = sorted({c for ts in by_steps.values() for t in ts for c, lvl in t.bench.items() if not lvl.get("failed_reason")})
    slots = []
    for c in levels:
        best_of: dict[int, tuple[Measure, int]] = {}
        for steps, trials in by_steps.items():
            for t in trials:
                m = t.level_figure(data.objectives, metric, c)  # the table's figure where it is an objective
                if m is None or (t.bench.get(c) or {}).get("failed_reason"):
                    continue
                current = best_of.get(steps)
                # one pooled figure is shared by the same server's configurations: the front's names it
                if current is None or m.value > current[0].value or (m.value == current[0].value and t.kind == "front"):
                    best_of[steps] = (m, t.number)
        if not best_of:
            continue
        best_steps = max(best_of, key=lambda s: (best_of[s][0].value, -s))
        best = best_of[best_steps][0]
        tied = sorted(
            s for s, (m, _) in best_of.items() if m.value + math.hypot(m.half_width or 0.0, best.half_width or 0.0) >= best.value
        )
        slots.append(
            LadderSlot(c, tied, best_steps, best_of[best_steps][1], best, {s: n for s, (_, n) in sorted(best_of.items())})
        )
    if not slots:
        raise UsageError(
            f"study {data.name!r} has no successful {metric} measurement to build a ladder from; run autospec optimize first"
        )
    return Ladder(metric, slots)


def ladder_json(ladder: Ladder, study: str) -> dict[str, Any]:
    """The file SGLang reads; ``_autospec`` (ignored by SGLang) says where it came from."""
    out: dict[str, Any] = {
        "_autospec": {
            "study": study,
            "metric": ladder.metric,
            "rule": "per batch-size slot: step counts whose measured throughput is within the 95% noise of the best",
            "measured": {
                str(s.batch_size): {"best_steps": s.best_steps, "best_trial": s.best_trial, "value": round(s.best.value, 1)}
                for s in ladder.slots
            },
        }
    }
    for slot in ladder.slots:
        out[str(slot.batch_size)] = {"candidate_steps": list(slot.candidate_steps)}
    return out


def dumps(ladder: Ladder, study: str) -> str:
    """`ladder_json` as indented JSON text with each list on one line."""
    text = json.dumps(ladder_json(ladder, study), indent=2)
    return (
        re.sub(r"\[([-0-9,\s]*)\]", lambda m: "[" + ", ".join(x.strip() for x in m[1].split(",") if x.strip()) + "]", text) + "\n"
    )


def adaptive_flags(ladder: Ladder, config_path: str) -> dict[str, Any]:
    """Server flags that run the ladder: adaptive on, start at the best low-load depth."""
    steps = ladder.initial_steps
    return {
        TOPK: 1,
        STEPS: steps,
        DRAFT_TOKENS: steps + 1,
        "speculative_adaptive": True,
        "speculative_adaptive_config": config_path,
    }
