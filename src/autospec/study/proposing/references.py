"""Reference points measured in the same study: what SGLang does without tuning.

Users ask first whether tuning beats what SGLang already does on its own. Beside the
search, a study launches (once per study, counted in ``--trials``, queued after the
baseline and the calibration launches) these servers, each with the space's fixed flags
and none of its tuned ones, so every tuned flag is left to SGLang:

- ``no_speculation``: every ``speculative_*`` flag dropped. In sglang 0.5.23 no
  ``--speculative-algorithm`` means no speculative decoding at all.
- ``sglang_defaults``: the space's algorithm with steps, top-k and draft tokens unset
  (also where the space fixes one of them: SGLang chooses them only all together).
  sglang 0.5.23's resolver then chooses them itself (EAGLE family:
  ``_auto_choose_speculative_params``, (3, 1, 4) for most models and (5, 4, 8) for Llama;
  STANDALONE (3, 1, 4); NGRAM: 12 draft tokens, top-k = the BFS breadth).
- ``adaptive``: the same plus ``--speculative-adaptive``, where the algorithm accepts it:
  sglang 0.5.23 (`adaptive_unsupported_reason`) runs it for EAGLE and EAGLE3 (NEXTN is
  rewritten to EAGLE first) with top-k 1 (it sets an unset top-k to 1 itself) and without
  DP attention, and otherwise falls back to static parameters with a warning; a space
  that fixes another algorithm or DP attention gets no adaptive reference. The flag is
  also in sglang 0.5.16's ServerArgs (its startup log on the H200 prints
  ``speculative_adaptive=False``).

Which are measured: those the space's algorithm allows (none without a fixed
``speculative_algorithm``: the algorithm is then tuned, and no single default exists),
and only those SGLang's argument rules accept (a refused one is logged and skipped).
Whether: ``--references`` / ``--no-references``, else ``[references] measure`` in the
space file, else the budget rule: on when ``--trials`` holds at least
`TRIALS_PER_REFERENCE` launches per reference (12 with three), so that the search keeps
three quarters of the budget. They are queued only when the launches left in the budget
(after the queued baseline and calibration launches) hold them all, so none is left
waiting at the end of a run; a later run with a larger ``--trials`` queues them.

A reference trial carries the Optuna parameter `REFERENCE_PARAM` (its name, one fixed
distribution of every name, so queued trials are told apart and retried like any other)
and the marker ``reference``; its candidate comes from `reference_candidate`, not from the
space, so the samplers never see it (`Proposer.mirror` leaves it out), the gate does not
count it as a measurement of the search, and no front or pick includes it
(`autospec.records`: class ``reference``). The report compares the picks with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import optuna

from autospec.config import SearchSpace
from autospec.feasibility.verdict import Verdict
from autospec.records import Markers
from autospec.sglang_facts import ADAPTIVE_ALGORITHMS, ALGORITHM, DRAFT_TOKENS, STEPS, TOPK
from autospec.study.proposing.policy import LaunchPolicy, Moment, Plan, StudyView

__all__ = [
    "REFERENCE_PARAM",
    "REFERENCE_NAMES",
    "NO_SPECULATION",
    "SGLANG_DEFAULTS",
    "ADAPTIVE",
    "TRIALS_PER_REFERENCE",
    "REFERENCES_ENQUEUED",
    "reference_names",
    "reference_candidate",
    "references_wanted",
    "ReferencePolicy",
    "reference_of",
    "ask_reference",
]

NO_SPECULATION = "no_speculation"
SGLANG_DEFAULTS = "sglang_defaults"
ADAPTIVE = "adaptive"
REFERENCE_NAMES = (NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE)
REFERENCE_PARAM = "autospec_reference"
TRIALS_PER_REFERENCE = 4  # default rule: references only when --trials >= 4 x their number
REFERENCES_ENQUEUED = "autospec:references_enqueued"
ADAPTIVE_FLAG = "speculative_adaptive"
SPECULATION_SHAPE = (STEPS, TOPK, DRAFT_TOKENS)


def reference_names(space: SearchSpace) -> list[str]:
    """The references `space` allows (see the module docstring), in launch order."""
    flags = space.server.flags
    algorithm = flags.get(ALGORITHM)
    if space.param(ALGORITHM) is not None:
        return [NO_SPECULATION]
    if not algorithm:
        return []
    names = [NO_SPECULATION, SGLANG_DEFAULTS]
    adaptive_ok = str(algorithm).upper() in ADAPTIVE_ALGORITHMS and not flags.get("enable_dp_attention")
    if adaptive_ok and ADAPTIVE_FLAG not in flags:
        names.append(ADAPTIVE)
    return names


def reference_candidate(name: str, space: SearchSpace, fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate that launches reference `name`: None for every tuned flag of `space`
    (the space as declared) and for every flag in `fixed` (the flags the trial chain
    merges in) that the reference leaves to SGLang; the chain drops None values, so those
    flags are not passed at all."""
    if name not in REFERENCE_NAMES:
        raise ValueError(f"unknown reference {name!r}; one of {', '.join(REFERENCE_NAMES)}")
    unset: dict[str, Any] = {p.name: None for p in space.params}
    unset.update({k: None for k in fixed if k not in space.server.flags})  # tunables a narrowed space fixed
    if name == NO_SPECULATION:
        unset.update({k: None for k in fixed if k.startswith("speculative_")})
        return unset
    # SGLang chooses steps, top-k and draft tokens only when all three are unset (0.5.23 asserts it)
    unset.update({k: None for k in SPECULATION_SHAPE if k in fixed})
    if name == ADAPTIVE:
        unset[ADAPTIVE_FLAG] = True
    return unset


def references_wanted(explicit: bool | None, setting: bool | None, n_trials: int, count: int) -> bool:
    """Whether to measure `count` references: `explicit` (the command line), else
    `setting` (the space file), else the budget rule (module docstring)."""
    if count == 0:
        return False
    if explicit is not None:
        return explicit
    if setting is not None:
        return setting
    return n_trials >= TRIALS_PER_REFERENCE * count


class ReferencePolicy(LaunchPolicy):
    """Queues every reference `declared` allows that SGLang's argument rules accept, once
    per study (a study flag). `fixed`: the flags the trial chain merges in; `n_trials`:
    the launch budget. With fewer launches left in the budget (after the launched and
    the queued trials: the baseline and calibration go first) than references, none is
    queued (a later run with a larger ``--trials`` queues them), so none is left waiting."""

    moments = frozenset({Moment.START})

    def __init__(
        self,
        declared: SearchSpace,
        fixed: Mapping[str, Any],
        argument_verdict: Callable[[Mapping[str, Any]], Verdict],
        n_trials: int,
    ) -> None:
        self.declared, self.fixed, self.argument_verdict, self.n_trials = declared, fixed, argument_verdict, n_trials

    def next_launch(self, view: StudyView) -> Plan | None:
        if view.attrs.get(REFERENCES_ENQUEUED):
            return None
        names = reference_names(self.declared)
        room = self.n_trials - sum(1 for t in view.trials if t.counts_as_launch) - view.waiting
        if room < len(names):
            short = f"{room} launch(es) left of --trials, {len(names)} references"
            return Plan(line=f"references not queued: {short}; raise --trials")
        queued, notes = [], []
        for name in names:
            candidate = reference_candidate(name, self.declared, self.fixed)
            verdict = self.argument_verdict({k: v for k, v in {**self.fixed, **candidate}.items() if v is not None})
            if verdict.ok:
                queued.append(name)
            else:
                notes.append(f"reference {name} not measured: SGLang would reject it ({verdict.reason})")
        if queued:
            notes.append(f"references queued (counted in --trials): {', '.join(queued)}")
        trials = tuple(({REFERENCE_PARAM: name}, Markers(reference=name)) for name in queued)
        return Plan(trials, line="\n".join(notes), study_flag=REFERENCES_ENQUEUED)


def reference_of(trial: optuna.Trial) -> str | None:
    """The reference `trial` was queued as, or None for a trial of the search."""
    return Markers.from_attrs(trial.user_attrs).reference


def ask_reference(trial: optuna.Trial, space: SearchSpace, fixed: Mapping[str, Any]) -> dict[str, Any] | None:
    """For a reference trial: record its parameter and return its candidate; None for a
    trial of the search (whose candidate comes from `autospec.space.suggest`)."""
    name = reference_of(trial)
    if name is None:
        return None
    trial.suggest_categorical(REFERENCE_PARAM, list(REFERENCE_NAMES))  # one distribution for every name
    return reference_candidate(name, space, fixed)
