"""The simulator's SGLang argument semantics and autospec's static rules, held against each
other over the whole default search space.

Both read one table (``autospec.sglang_rules``), but the simulator walks it over its own
view of the flags (its profile's backend, page size and automatic steps/top-k/draft
filled in, the start-up-time rows skipped, its own guards and ``--speculative-adaptive``
added: ``autospec.sim.arguments``), and fails the draft-tree bound at start-up. This test
holds that composition against the static verdicts. For every SGLang version either side was read against
(the bundled profiles' versions and every release in a rule's ``checked``) and every
algorithm autospec tunes (NEXTN, EAGLE, EAGLE3, NGRAM):

- every point of ``grid(load_space("default"))`` merged onto the space's fixed flags
  (triton, page 16, tp 4), plus the draft counts around the draft-tree bound, which the
  space never samples;
- every distinct argument point of the same grid (the memory fraction at its first grid
  value only: neither side reads it, as the first case shows over all 13 values) with the
  fixed flags changed to flashinfer or fa3 (page 16), to tp 2 x pp 2, and to an unset
  attention backend. (All 13 fractions for every layout is 2.2x the work, about 12 s
  instead of 4 s here, and checks nothing more; add a layout to FULL_GRID_LAYOUTS to do it.)

In each case:

- "the static rules reject" equals "the simulator rejects": its resolver raises
  ``ArgumentRejected``, or (for ``draft_tokens_exceed_tree``, which SGLang's argument code
  does not check either) its start-up fails with ``invalid_draft_tree``;
- where both reject, the messages are the same; where both accept, the resolved steps,
  top-k, draft tokens and page size are the same.

The only exceptions are rules that depend on the GPU (``hardware_dependent``), listed in
``HARDWARE_EXCEPTIONS`` with the reason; each must occur, so the list cannot go stale.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from packaging.version import Version

from autospec.cli.common import load_space
from autospec.feasibility.rules import RULES, check_static, rules_for
from autospec.sglang_facts import max_draft_tokens
from autospec.sim import ArgumentRejected, list_profiles, load_profile, resolve_args
from autospec.sim.memory import draft_tree_invalid
from autospec.space import grid

ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "NGRAM")
#: backend / page size / parallel layout merged over the space's fixed flags (None: unset);
#: those in FULL_GRID_LAYOUTS take every grid point, the others one memory fraction
LAYOUTS: dict[str, dict[str, Any]] = {
    "triton-16": {"attention_backend": "triton", "page_size": 16},
    "flashinfer-16": {"attention_backend": "flashinfer", "page_size": 16},
    "fa3-16": {"attention_backend": "fa3", "page_size": 16},
    "triton-16-pp2": {"attention_backend": "triton", "page_size": 16, "tp_size": 2, "pp_size": 2},
    "default-backend-16": {"attention_backend": None, "page_size": 16},
}
#: rule id -> why the static verdict (ok, hardware_dependent) may differ from the simulator's
HARDWARE_EXCEPTIONS = {
    "topk_gt1_page_size_default_backend": "attention backend unset: SGLang picks it from the GPU, so the static rules "
    "cannot tell whether a paged tree is allowed; the simulator's profile names its GPU's backend "
    "(the seed profile: triton, which releases before 0.5.13 refuse for paged trees)",
    "ngram_page_size_default_backend": "attention backend unset: NGRAM with pages runs only on flashinfer, which only the GPU "
    "host's default decides; the simulator's seed profile picks triton and refuses",
}
FULL_GRID_LAYOUTS = ("triton-16",)
RESOLVED_KEYS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens", "page_size")
SIM_RULE_DRAFT_TREE = "draft_tokens_exceed_tree"  # the simulator fails it at start-up, not in its resolver

VERSIONS = sorted(
    {v for rule in RULES for v in rule.checked} | {p.sglang_version for p in map(load_profile, list_profiles())}, key=Version
)


def _grid_points() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    space = load_space("default")
    fixed = dict(space.server.flags)
    points = list(grid(space))
    # around the tree bound: the old stricter bound, SGLang's, and one past it
    mem = points[0]["mem_fraction_static"]
    for steps in range(1, 11):
        for topk in (2, 4, 8):
            limit = max_draft_tokens(steps, topk)
            for draft in sorted({steps * topk + 1, steps * topk + 2, limit, limit + 1}):
                points.append(
                    {
                        "speculative_num_steps": steps,
                        "speculative_eagle_topk": topk,
                        "speculative_num_draft_tokens": draft,
                        "mem_fraction_static": mem,
                    }
                )
    return fixed, points


def _sim_verdict(profile, flags: dict[str, Any]) -> tuple[str | None, str, Any]:
    """(None, "", cfg) when the simulator would run it, else (how it fails, message, cfg)."""
    try:
        cfg = resolve_args(profile, flags)
    except ArgumentRejected as exc:
        return "resolver", str(exc), None
    if draft_tree_invalid(cfg):
        return "draft_tree", "", cfg
    return None, "", cfg


def _static_message(rule_id: str, version: Version, resolved: dict[str, Any]) -> str:
    rule = next(r for r in rules_for(version) if r.id == rule_id)
    return rule.sglang_message(resolved)


def _hardware_notes(version: Version, resolved: dict[str, Any]) -> set[str]:
    """The "note" rows (GPU-dependent) that matched a verdict's resolved flags."""
    return {r.id for r in rules_for(version) if r.effect == "note" and r.check(resolved)}


def _compare(
    version: Version,
    where: tuple,
    flags: dict[str, Any],
    profile,
    mismatches: list[str],
    seen_exceptions: Counter[str],
    counts: Counter[str],
) -> None:
    static = check_static(flags, version)
    how, message, cfg = _sim_verdict(profile, flags)
    if static.hardware_dependent and how == "resolver":
        excused = _hardware_notes(version, static.resolved) & set(HARDWARE_EXCEPTIONS)
        # The static rules left the backend check to the GPU; the simulator's profile has a
        # GPU, so a backend. With that backend named, the static rules must say what it says.
        pinned = check_static({**flags, "attention_backend": profile.attention_backend}, version)
        if excused and not pinned.ok and _static_message(str(pinned.rule), version, pinned.resolved) == message:
            seen_exceptions.update(excused)
            return
    if static.ok and how is None:
        counts["both accept"] += 1
        got = (cfg.speculative_num_steps, cfg.speculative_eagle_topk, cfg.speculative_num_draft_tokens, cfg.page_size)
        want = tuple(static.resolved.get(k) for k in RESOLVED_KEYS)
        if got != want:
            mismatches.append(f"{where}: resolved {want} statically, {got} by the simulator")
    elif not static.ok and how is not None:
        counts["both reject"] += 1
        counts[f"both reject: {static.rule}"] += 1
        assert static.rule is not None
        if (static.rule == SIM_RULE_DRAFT_TREE) != (how == "draft_tree"):
            mismatches.append(f"{where}: static rule {static.rule}, the simulator fails by its {how}")
        elif how == "resolver" and (expected := _static_message(static.rule, version, static.resolved)) != message:
            mismatches.append(f"{where}: static {static.rule!r} says {expected!r}, the simulator {message!r}")
    else:
        mismatches.append(
            f"{where}: static {static.status} ({static.rule}: {static.reason}), "
            f"simulator {'accepts' if how is None else 'rejects: ' + (message or how)}"
        )


def test_static_rules_and_simulator_agree_over_the_default_grid():
    fixed, points = _grid_points()
    assert LAYOUTS["triton-16"] == {k: fixed[k] for k in LAYOUTS["triton-16"]}  # the space's own flags
    first = points[0]["mem_fraction_static"]
    one_fraction = [p for p in points if p["mem_fraction_static"] == first]
    assert len({p["mem_fraction_static"] for p in points}) > 5 and len(one_fraction) < len(points) / 5
    seed = load_profile()
    mismatches: list[str] = []
    seen_exceptions: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for algo in ALGORITHMS:
        for layout_name, layout in LAYOUTS.items():
            base = {k: v for k, v in {**fixed, "speculative_algorithm": algo, **layout}.items() if v is not None}
            chosen = points if layout_name in FULL_GRID_LAYOUTS else one_fraction
            configurations = [{**base, **point} for point in chosen]
            for version_text in VERSIONS:
                version = Version(version_text)
                profile = dataclasses.replace(seed, sglang_version=version_text)
                for flags, point in zip(configurations, chosen):
                    _compare(
                        version, (version_text, algo, layout_name, point), flags, profile, mismatches, seen_exceptions, counts
                    )
                counts["configurations"] += len(configurations)
    assert not mismatches, f"{len(mismatches)} disagreements, e.g.\n" + "\n".join(mismatches[:20])
    assert counts["configurations"] > 100_000, counts
    assert set(seen_exceptions) == set(HARDWARE_EXCEPTIONS), seen_exceptions  # each exception still occurs
    for needed in (
        "both accept",
        f"both reject: {SIM_RULE_DRAFT_TREE}",
        "both reject: pp_speculative",
        "both reject: pp_speculative_prefill_only",
        "both reject: topk_gt1_page_size_backend",
        "both reject: ngram_page_size_backend",
    ):
        assert counts[needed], (needed, counts)


def test_versions_cover_every_profile_and_every_checked_release():
    assert {"0.5.4", "0.5.10", "0.5.16", "0.5.21", "0.5.23"} <= set(VERSIONS)
    assert len(VERSIONS) == len(set(VERSIONS))
