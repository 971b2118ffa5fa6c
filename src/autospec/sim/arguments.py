"""The simulator's argument resolution: flags -> `ServerConfig`, as SGLang resolves them.

SGLang's rules (what it rewrites, what it rejects and with which message, from which
release) are not kept here: they are read from `autospec.sglang_rules`, the one table
that autospec's static feasibility check reads too. This module adds only what the
simulator itself needs around that table:

- its command line's view of the flags: aliases (``tp_size`` / ``tensor_parallel_size``,
  ...), and the profile's defaults for what SGLang would take from the GPU or the model
  (attention backend, page size, the automatic steps/topk/draft when all three are
  unset, CUDA-graph batch size, memory fraction);
- what it refuses because it does not model it (`UNMODELLED_ALGORITHMS`, a draft KV
  dtype with a profile older than 0.5.23), an algorithm its argparse does not know, and
  its own guards (positive steps/topk/draft, a tree without draft tokens);
- ``--speculative-adaptive`` at argument time (0.5.23), which the static rules leave to
  SGLang's resolver;
- the warning lines it logs for the rewrites: each rewrite row's message, as the table
  words it for the profile's release (`ServerConfig.notes`).

Rows of the table whose rejection SGLang's argument code does not raise (origin
"autospec": the draft-tree bound) are skipped here: the simulated server fails them at
start-up (`memory.init_outcome`, ``invalid_draft_tree``), as SGLang does. "note" rows
(what only the GPU decides) never fire: the profile names its GPU's backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from autospec.sglang_facts import ADAPTIVE_ALGORITHMS
from autospec.sglang_rules import EAGLE_FAMILY, Rule, applicable_rules, walk
from autospec.sim.choices import ALGORITHMS
from autospec.sim.config import ArgumentRejected, ServerConfig, version_at_least
from autospec.sim.profile import Profile

__all__ = ["DRAFT_KV_DTYPE_SINCE", "UNMODELLED_ALGORITHMS", "resolve_args"]

#: algorithms sglang 0.5.23 serves that the simulator does not model (no draft-block acceptance model)
UNMODELLED_ALGORITHMS = ("DFLASH", "DSPARK")
#: the first release whose draft KV dtype the simulator models (the flag is 0.5.19-0.5.23's)
DRAFT_KV_DTYPE_SINCE = "0.5.23"
#: STANDALONE's steps/topk/draft when all three are unset (sglang 0.5.16-0.5.23 _handle_eagle_family)
STANDALONE_AUTO_SPEC = (3, 1, 4)

# sglang 0.5.23 arg_groups/speculative_hook.py (_maybe_disable_adaptive, _init_adaptive_speculative_params)
# and speculative/adaptive_spec_params.py (DEFAULT_ADAPTIVE_CONFIG's candidate steps, all batch sizes together)
_ADAPTIVE_STEPS = (0, 1, 3, 5, 7)
_NOTE_ADAPTIVE_OFF = "speculative_adaptive disabled: {reason}. Falling back to static speculative params."
_MSG_ADAPTIVE_STEPS = (
    "--speculative-num-steps={steps} is not in the adaptive config candidate_steps {candidates}. Pass one of those values."
)
#: what a tree without draft tokens dies of in SGLang (the first use of the None)
_MSG_DRAFT_NONE = "unsupported operand type(s) for -: 'NoneType' and 'int'"
_SPEC_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def _flag(flags: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = flags.get(name)
        if value is not None:
            return value
    return None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _refuse_unmodelled(version: str, algo: str | None, flags: Mapping[str, Any]) -> None:
    """Refuse, in one line that says so, what sglang 0.5.23 accepts but the simulator does not
    model: DFLASH and DSPARK (block-diffusion drafts), and a draft KV-cache dtype other than
    the target's (``--speculative-draft-kv-cache-dtype``) with a profile of an older release
    than 0.5.23 (from 0.5.23 it is modelled: `memory.draft_kv_freed_gb`)."""
    fix = "measure it on real SGLang (--server-command), or leave it out of the search space"
    if algo in UNMODELLED_ALGORITHMS:
        raise ArgumentRejected(f"the simulator does not model --speculative-algorithm {algo} (sglang 0.5.23 serves it); {fix}")
    dtype = _flag(flags, "speculative_draft_kv_cache_dtype")
    if dtype not in (None, "auto") and not version_at_least(version, DRAFT_KV_DTYPE_SINCE):
        raise ArgumentRejected(
            f"the simulator does not model --speculative-draft-kv-cache-dtype {dtype} with a profile of sglang "
            f"{version} (sglang 0.5.23 accepts it; use a 0.5.23 profile); {fix}"
        )


def _algorithm(flags: Mapping[str, Any], version: str) -> str | None:
    """The speculative algorithm as the simulator's argparse takes it (upper case), or None."""
    algo = _flag(flags, "speculative_algorithm")
    algo = str(algo).upper() if algo else None
    _refuse_unmodelled(version, algo, flags)
    if algo is not None and algo not in ALGORITHMS:
        choices = ", ".join(repr(a) for a in ALGORITHMS)
        raise ArgumentRejected(
            f"argument --speculative-algorithm: invalid choice: '{algo}' (choose from {choices})", "SystemExit"
        )
    return algo


def _table_input(profile: Profile, flags: Mapping[str, Any], algo: str | None, notes: list[str]) -> dict[str, Any]:
    """The flags the table is walked over: aliases folded, the profile's defaults filled in
    where SGLang would take them from the GPU or the model, ``--speculative-adaptive``
    resolved."""
    table = {
        **flags,
        "speculative_algorithm": algo,
        "attention_backend": str(_flag(flags, "attention_backend") or profile.attention_backend),
        "page_size": int(_flag(flags, "page_size") or profile.page_size),
        "pp_size": int(_flag(flags, "pp_size", "pipeline_parallel_size") or 1),
        "dp_size": int(_flag(flags, "dp_size", "data_parallel_size") or 1),
    }
    if algo is not None and flags.get("speculative_adaptive"):
        table = _adaptive_flags(algo, table, notes)
    if algo in EAGLE_FAMILY | {"NEXTN"} and all(table.get(name) is None for name in _SPEC_FIELDS):
        auto = STANDALONE_AUTO_SPEC if algo == "STANDALONE" else profile.auto_spec
        table.update(zip(_SPEC_FIELDS, auto, strict=True))
    return table


def _argument_time(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The rows SGLang's argument code runs: not the "autospec" rejections (the draft-tree
    bound fails at start-up) nor the "note" rows (the GPU's verdicts)."""
    return tuple(r for r in rules if r.effect == "rewrite" or (r.effect == "reject" and r.origin != "autospec"))


def resolve_args(profile: Profile, flags: Mapping[str, Any]) -> ServerConfig:
    """Apply SGLang's rewrites and argument-time rejections (`autospec.sglang_rules`, for
    the profile's ``sglang_version``) to `flags` (ServerArgs field names, values already
    typed; unknown names are ignored). Raises ArgumentRejected with SGLang's message."""
    version = profile.sglang_version
    algo = _algorithm(flags, version)
    notes: list[str] = []
    table = _table_input(profile, flags, algo, notes)
    result = walk(table, _argument_time(applicable_rules(Version(version))))
    resolved = result.resolved
    if result.rejected is not None:
        raise ArgumentRejected(result.rejected.sglang_message(resolved), result.rejected.error_type)
    notes.extend(text for rule in result.fired if (text := rule.sglang_message(resolved)))
    steps = topk = draft = 0
    if algo is not None:
        steps, topk, draft = _speculative_shape(resolved)
    context = _flag(flags, "context_length")
    return ServerConfig(
        model_path=str(_flag(flags, "model_path") or profile.model_name),
        tp_size=int(_flag(flags, "tp_size", "tensor_parallel_size") or profile.tp_size),
        speculative_algorithm=resolved["speculative_algorithm"],
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft,
        mem_fraction_static=float(_flag(flags, "mem_fraction_static") or profile.mem_fraction_static),
        max_running_requests=_opt_int(_flag(flags, "max_running_requests")),  # None = not set by the user
        cuda_graph_max_bs=int(_flag(flags, "cuda_graph_max_bs", "cuda_graph_max_bs_decode") or profile.cuda_graph_max_bs),
        attention_backend=str(resolved["attention_backend"]),
        page_size=int(resolved["page_size"]),
        context_length=int(context) if context is not None else None,
        enable_dp_attention=bool(flags.get("enable_dp_attention") or False),
        dp_size=int(resolved["dp_size"]),
        pp_size=int(resolved["pp_size"]),
        speculative_draft_kv_cache_dtype=_flag(flags, "speculative_draft_kv_cache_dtype"),
        notes=tuple(notes),
    )


def _speculative_shape(resolved: Mapping[str, Any]) -> tuple[int, int, int]:
    """(steps, topk, draft tokens) of resolved speculative flags, with the simulator's own
    guards: a tree without draft tokens fails as SGLang does at its first use, and the
    model needs positive values. NGRAM's steps, where the release leaves them unset (before
    0.5.16) or at 0, are the trie's depth per top-k, at least 1."""
    steps, topk, draft = (_opt_int(resolved.get(name)) for name in _SPEC_FIELDS)
    if draft is None:
        raise ArgumentRejected(_MSG_DRAFT_NONE, "TypeError")
    if topk is None:  # NGRAM's rows always set it; an EAGLE row rejects it unset first
        raise ArgumentRejected("'>' not supported between instances of 'NoneType' and 'int'", "TypeError")
    if resolved["speculative_algorithm"] == "NGRAM":
        steps = steps or max(draft // max(topk, 1), 1)
    for name, value in zip(_SPEC_FIELDS, (steps, topk, draft), strict=True):
        if value is None or value < 1:
            raise ArgumentRejected(f"{name} must be a positive integer, got {value}", "ValueError")
    assert steps is not None
    return steps, topk, draft


def _adaptive_flags(algo: str, flags: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """``--speculative-adaptive`` at argument time, as sglang 0.5.23 resolves it: EAGLE and
    EAGLE3 (NEXTN included) with top-k 1 and no DP attention start at the middle candidate
    step (3 with the default config) with draft = steps + 1; others fall back to static
    parameters with a warning. The simulator then serves those static parameters: it does
    not model the runtime switching of steps per batch size."""
    topk = _opt_int(flags.get("speculative_eagle_topk"))
    reason = None
    if algo not in ADAPTIVE_ALGORITHMS:
        reason = f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)"
    elif topk is not None and topk != 1:
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    elif flags.get("enable_dp_attention"):
        reason = "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)"
    if reason is not None:
        notes.append(_NOTE_ADAPTIVE_OFF.format(reason=reason))
        return flags
    steps = _opt_int(flags.get("speculative_num_steps"))
    steps = _ADAPTIVE_STEPS[len(_ADAPTIVE_STEPS) // 2] if steps is None else steps
    if steps not in _ADAPTIVE_STEPS:
        raise ArgumentRejected(_MSG_ADAPTIVE_STEPS.format(steps=steps, candidates=list(_ADAPTIVE_STEPS)), "ValueError")
    return {**flags, "speculative_num_steps": steps, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": steps + 1}
