"""Earlier measurements as completed trials of a study, so the sampler starts from what
the user already knows (`autospec import`).

Two sources:

- SGLang's ``scripts/playground/bench_speculative.py`` JSONL output. Format (read from
  sgl-project/sglang, commits 01d2a3d and 96fd6bf of that script): one JSON object per
  line and per (batch size, configuration) run, ``{"batch_size", "steps", "topk",
  "num_draft_tokens", "acc_length", "step_time", "speed", "completion_tokens"}``, where
  ``speed = acc_length / step_time`` is tokens/s of one sequence while decoding at that
  batch size (``step_time`` is the 20th percentile of the server's decode step time, s),
  each batch size ran with ``--max-running-requests`` and ``--cuda-graph-max-bs`` set to
  it, and steps = topk = draft = 0 means no speculation.
  Mapping onto autospec's metrics at C = batch_size: ``output_tok_s`` and
  ``decode_tok_s`` = speed (optimistic: it leaves out queueing and prefill),
  ``agg_output_tok_s`` = speed x C, ``accept_length`` = acc_length, ``tpot_ms_*`` =
  1000 x step_time / acc_length. A configuration whose objectives need another metric,
  or a concurrency the file lacks, is skipped with the reason.
- Another autospec study: its COMPLETE trials (feasible or not) with their values,
  constraints and attributes; the objectives must be the same.

Imported trials are COMPLETE, carry the ``imported`` marker (source, key) and
``launched: false`` (they do not count towards ``--trials`` and are measured again if the
sampler asks for them), the outcome from the source, and the feasibility constraints
(`autospec.records.TrialStore.add_measured`). Importing the same source twice adds
nothing the second time (keys are compared).

This module only builds the trials (`plan_from_*`, then `trials_to_add`); writing them
is `TrialStore.add_measured`'s job (`autospec import` calls it).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autospec.config import SearchSpace
from autospec.errors import UsageError
from autospec.records import CONSTRAINT_VIOLATED, DUPLICATE, OK, Markers, TrialRecord, read_trials
from autospec.report.table import compact
from autospec.sglang_facts import DRAFT_TOKENS, STEPS, TOPK
from autospec.space import suggest, to_distribution_params

__all__ = [
    "ImportedTrial",
    "ImportPlan",
    "ReadyTrial",
    "read_bench_speculative",
    "plan_from_bench_speculative",
    "plan_from_study",
    "trials_to_add",
    "BENCH_SPECULATIVE_FIELDS",
]

BENCH_SPECULATIVE_FIELDS = ("batch_size", "steps", "topk", "num_draft_tokens", "acc_length", "step_time", "speed")


@dataclass(frozen=True)
class ImportedTrial:
    """One measurement to add; `record.launched` is False and `markers.imported` holds its
    source and `key` (a key already in the study is not imported again)."""

    record: TrialRecord
    markers: Markers

    @property
    def key(self) -> str:
        return str((self.markers.imported or {}).get("key"))

    @property
    def candidate(self) -> dict[str, Any]:
        return dict(self.record.candidate)


@dataclass
class ImportPlan:
    trials: list[ImportedTrial] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one line per configuration left out, with why


def read_bench_speculative(lines: Iterable[str], source: str) -> list[dict[str, Any]]:
    """The records of a bench_speculative.py JSONL file; UsageError names the bad line."""
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}:{n} is not JSON ({exc.msg}); pass the --output file of bench_speculative.py") from None
        missing = [k for k in BENCH_SPECULATIVE_FIELDS if k not in record] if isinstance(record, dict) else ["all"]
        if missing:
            raise UsageError(f"{source}:{n} lacks {', '.join(missing)}; is this bench_speculative.py output?")
        records.append(record)
    if not records:
        raise UsageError(f"{source} holds no measurement; pass the --output file of bench_speculative.py")
    return records


def _metric_from_bench_speculative(metric: str, r: Mapping[str, Any]) -> float | None:
    speed, acc, step = float(r["speed"]), float(r["acc_length"]), float(r["step_time"])
    c = int(r["batch_size"])
    if metric in ("output_tok_s", "decode_tok_s"):
        return speed
    if metric == "agg_output_tok_s":
        return speed * c
    if metric == "accept_length":
        return acc
    if metric.startswith("tpot_ms") and acc > 0:
        return 1000.0 * step / acc
    return None


def _metric_at(levels: Mapping[int, Mapping[str, Any]], metric: str, concurrency: int) -> float | None:
    """`metric` at `concurrency` from the records of one configuration, or None."""
    level = levels.get(concurrency)
    return _metric_from_bench_speculative(metric, level) if level is not None else None


def _level_summary(r: Mapping[str, Any]) -> dict[str, Any]:
    c = int(r["batch_size"])
    summary: dict[str, Any] = {"concurrency": c, "n_requests": None, "n_ok": None, "n_errors": 0, "failed_reason": None}
    for metric in ("output_tok_s", "decode_tok_s", "agg_output_tok_s", "accept_length", "tpot_ms_mean"):
        summary[metric] = _metric_from_bench_speculative(metric, r)
    summary["step_time_s"] = float(r["step_time"])
    summary["completion_tokens_mean"] = r.get("completion_tokens")
    return summary


def plan_from_bench_speculative(
    records: Sequence[Mapping[str, Any]], space: SearchSpace, source: str, fixed: Mapping[str, Any] | None = None
) -> ImportPlan:
    """One trial per (steps, topk, draft) configuration of the records; `fixed` supplies
    values of search-space parameters the file does not record (e.g. mem_fraction_static)."""
    plan = ImportPlan()
    groups: dict[tuple[int, int, int], dict[int, Mapping[str, Any]]] = {}
    for r in records:
        config = (int(r["steps"]), int(r["topk"]), int(r["num_draft_tokens"]))
        groups.setdefault(config, {})[int(r["batch_size"])] = r
    for (steps, topk, draft), levels in sorted(groups.items()):
        label = f"steps={steps} topk={topk} draft={draft}"
        if steps == 0:
            plan.skipped.append(f"{label}: no speculation (steps=0) is outside an autospec search space")
            continue
        found = {spec.name: _metric_at(levels, spec.metric, spec.concurrency) for spec in space.measured_specs}
        missing = [name for name, value in found.items() if value is None]
        values = [v for o in space.objectives if (v := found[o.name]) is not None]
        constraint_values = {c.name: c.violation(v) for c in space.constraints if (v := found[c.name]) is not None}
        if missing:
            have = ", ".join(str(c) for c in sorted(levels))
            plan.skipped.append(f"{label}: cannot form {', '.join(missing)} from batch sizes {have}")
            continue
        candidate = {STEPS: steps, TOPK: topk, DRAFT_TOKENS: draft, **dict(fixed or {})}
        feasible = all(v <= 0 for v in constraint_values.values())
        record = TrialRecord(
            outcome=OK if feasible else CONSTRAINT_VIOLATED,
            candidate=candidate,
            reason="" if feasible else "violates " + ", ".join(k for k, v in constraint_values.items() if v > 0),
            bench={c: _level_summary(r) for c, r in sorted(levels.items())},
            values=values,
            constraints=constraint_values,
        )
        key = f"bench_speculative:{source}:{steps}/{topk}/{draft}"
        plan.trials.append(
            ImportedTrial(record, Markers(imported={"source": "bench_speculative.py", "file": source, "key": key}))
        )
    return plan


def plan_from_study(source: Any, space: SearchSpace, description: str) -> ImportPlan:
    """The COMPLETE trials of `source` (an optuna.Study) as imports into a study of `space`."""
    import optuna

    names = [o.name for o in space.objectives]
    if list(source.metric_names or []) != names:
        raise UsageError(
            f"study {source.study_name!r} measures {source.metric_names or 'unnamed objectives'}, not {names}; "
            "only a study with the same objectives can be imported"
        )
    plan = ImportPlan()
    for t in read_trials(source, states=(optuna.trial.TrialState.COMPLETE,)):
        if t.markers.imported is not None:
            plan.skipped.append(f"trial {t.number}: itself imported into {source.study_name!r}; import its source")
            continue
        key = f"study:{description}:{source.study_name}:{t.number}"
        # Real values: the record's measurement, a duplicate's copy of one, a trial added by hand.
        if t.record is not None and t.record.values is not None:
            values: list[float] | None = list(t.record.values)
        elif t.record is None or t.outcome == DUPLICATE:
            values = list(t.values) if t.values is not None else None
        else:
            values = None
        base = t.record or TrialRecord(outcome=OK, candidate=t.params)
        record = dataclasses.replace(base, candidate=t.candidate, launched=False, values=values)
        imported = {"source": f"study {source.study_name}", "storage": description, "number": t.number, "key": key}
        plan.trials.append(ImportedTrial(record, Markers(imported=imported)))
    return plan


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _params_for(candidate: Mapping[str, Any], space: SearchSpace) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """(params, distributions) that make `suggest` reproduce `candidate`, or a reason."""
    import optuna

    params = to_distribution_params(candidate, space)
    fixed_trial = optuna.trial.FixedTrial(params)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)  # FixedTrial warns when a value is off its range
            reproduced = suggest(fixed_trial, space)
    except (ValueError, UserWarning) as exc:
        missing = [p.name for p in space.params if p.type != "draft_tokens" and p.name not in candidate]
        if missing:
            return f"the source does not say {', '.join(missing)}; pass it with --set NAME=VALUE"
        return f"not in the search space ({exc})"
    differs = [k for k, v in reproduced.items() if k not in candidate or not _same(v, candidate[k])]
    if differs:
        return f"{compact({k: candidate.get(k) for k in differs})} is outside the search space"
    return params, fixed_trial.distributions


@dataclass(frozen=True)
class ReadyTrial:
    """An imported trial ready to be written (`TrialStore.add_measured`): the parameters
    and distributions that make `suggest` reproduce its candidate, its record and markers."""

    params: dict[str, Any]
    distributions: dict[str, Any]
    record: TrialRecord
    markers: Markers


def trials_to_add(plan: ImportPlan, space: SearchSpace, existing_keys: Iterable[str]) -> tuple[list[ReadyTrial], list[str]]:
    """The plan's trials that a study of `space` holding `existing_keys` (see
    `TrialStore.imported_keys`) does not have yet, in order, and one skipped line per
    configuration left out (the plan's own first). Writes nothing."""
    existing = set(existing_keys)
    skipped = list(plan.skipped)
    ready = []
    for item in plan.trials:
        label = compact(item.candidate)
        if item.key in existing:
            skipped.append(f"{label}: already imported")
            continue
        found = _params_for(item.candidate, space)
        if isinstance(found, str):
            skipped.append(f"{label}: {found}")
            continue
        params, distributions = found
        ready.append(ReadyTrial(dict(params), dict(distributions), item.record, item.markers))
        existing.add(item.key)
    return ready, skipped
