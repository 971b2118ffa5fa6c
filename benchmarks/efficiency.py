"""Search efficiency: how much of the true Pareto front does each strategy find in 10 or
20 launches, and what does it spend on the way?

Strategies x profiles x seeds x budgets, all against the in-process simulated chain
(`_simulated`: the product's study loop and trial chain with a simulated launcher and bench,
the simulator's resolver, memory model and noiseless scheduler replay; noise off), so every
number is deterministic for a seed.

    .venv/bin/python benchmarks/efficiency.py                      # everything: 560 runs, ~12 min on 2 cores
    .venv/bin/python benchmarks/efficiency.py --jobs 2 --json out.json   # the same, every run's launches in out.json
    .venv/bin/python benchmarks/efficiency.py --describe           # the landscapes and their structure checks
    .venv/bin/python benchmarks/efficiency.py --self-test
    .venv/bin/python benchmarks/efficiency.py --profiles qwen3-next-80b-mtp-4x-l40s \
        --strategies study-tpe random-startable --seeds 1 2

Per run (one strategy, one profile with its search space, one seed, one budget of launches):

- **HV ratio**: hypervolume of the run's front divided by that of the exhaustive true front.
  The run's front is formed by the configurations it launched that started (and met the
  space's constraints), each valued with the noiseless truth (`PredictedOracle`), not with
  what was measured; the true front by every configuration of the space's grid that starts.
  Objectives are normalised to [0, 1] between the reference point (the component-wise
  worst over all configurations that start: the minimum of a maximised objective, the
  maximum of a minimised one) and the ideal point (the component-wise best), so both
  objectives count equally.
- **launches to 95%**: the first launch after which the run's front reaches 95% of the true
  hypervolume (None: never within the budget).
- **init failures**: launched trials whose outcome is a launch failure kind
  (`autospec.launcher.LAUNCH_FAILURE_KINDS`; for the baselines that launch without
  preflight this includes `rejected_args`).
- **GPU seconds**: the modelled seconds of every launch (load + measurement + teardown, or
  the point of death; the simulated launcher and bench of `_simulated_chain`), in total and
  until 95%.

Strategies (`STRATEGIES`, one entry each; add a new one there):

- `random`: uniformly random grid configurations of the space without replacement, each
  one a launch; arguments SGLang rejects are a failed launch costing a rejected launch's
  seconds, configurations that fail at start-up are init failures;
- `random-startable`: uniformly random among the configurations that start (it knows
  feasibility for free: the bar to beat);
- `grid`: the order in which SGLang's scripts/playground/bench_speculative.py walks
  configurations (`grid_order`), restricted to configurations of the space;
- `study-model`, `study-tpe`, `study-gp`, `study-nsga2`, `study-random`: autospec's own study loop
  (`_simulated.run_study`: preflight, learned infeasibility, calibration launches,
  deduplication, mem-fraction pushes) with that sampler (`model`, the default, is
  `autospec.study.proposing.samplers`; docs/model.md); each budget is its own study
  (`--trials` = budget).

Baselines that are not the study loop value a launch the same way as the study's chain:
the product's `TrialChain` with the simulated launcher and bench (`_simulated_chain`)
behind a gate that lets everything through.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autospec.feasibility.gate import FeasibilityGate
from autospec.feasibility.verdict import Verdict
from autospec.model import hypervolume

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

SPACES_DIR = HERE / "spaces"
DEFAULT_SEEDS = (1, 2, 3, 4, 5)
DEFAULT_BUDGETS = (10, 20)
TARGET = 0.95  # share of the true hypervolume for "launches to 95%"

STEPS, TOPK, DRAFT, MEM, MRR = (
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "mem_fraction_static",
    "max_running_requests",
)


def _quiet() -> None:
    """Silence Optuna's per-trial logs and the warnings the harness knows about (GPSampler's
    independent sampling of the conditional draft-token fraction, experimental features,
    the simulated chain's ignore_eos note)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    logging.getLogger("optuna").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message=".*ignore_eos.*")
    warnings.filterwarnings("ignore", message=".*independent sampling.*")


# ============================================================================ normalising


def normalise(
    values: Sequence[float], reference: Sequence[float], ideal: Sequence[float], directions: Sequence[str]
) -> tuple[float, ...]:
    """Objective values -> minimisation coordinates, 0 at the ideal point and 1 at the
    reference point on every axis (an axis where ideal == reference maps to 0)."""
    out = []
    for v, r, i, d in zip(values, reference, ideal, directions):
        span = (i - r) if d == "maximize" else (r - i)
        out.append(0.0 if span == 0 else ((i - v) if d == "maximize" else (v - i)) / span)
    return tuple(out)


# ============================================================================ cases


@dataclass(frozen=True)
class Case:
    """One simulator profile and the search space it is tuned in."""

    name: str  # the profile's name
    space: str  # a bundled space name or a path
    structure: str  # one line: what the landscape is for
    check: str | None = None  # name of the structure check in CHECKS


def _harness_space(name: str) -> str:
    return str(SPACES_DIR / f"{name}.toml")


#: Every bundled profile with its space. The seed profile keeps the bundled `default`
#: space (the bundled `mtp` space fits it too, as a chain-only subset); `eagle3` fits the
#: Llama-3.1-8B profile (same model, EAGLE3, flashinfer); no bundled space fits DeepSeek-V3
#: (TP=8) and the bundled `ngram` space fits no profile (its model is a 7B coder, and its
#: --speculative-ngram-max-bfs-breadth is not a flag the simulator's command line knows).
CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            "seed-qwen35-122b-4x-rtxpro6000",
            "default",
            "the seed: MTP chains, trees rejected (triton, page 16, sglang 0.5.10), KV pool vs graph headroom",
        ),
        Case("llama31-8b-eagle3-1x-h100", "eagle3", "small dense model on a fast GPU: wide trees at C=1, chains at C=32"),
        Case(
            "deepseek-v3-mtp-8x-h200",
            _harness_space("deepseek-v3-mtp-8x-h200"),
            "large MoE: expert traffic makes long drafts expensive under load",
        ),
        Case(
            "llama33-70b-eagle3-1x-h200",
            _harness_space("llama33-70b-eagle3-1x-h200"),
            "(a) tree optimum: a topk 2-4 tree is best at C=1 (fa3, page 16)",
            "tree",
        ),
        Case(
            "llama31-70b-eagle-4x-a100",
            _harness_space("llama31-70b-eagle-4x-a100"),
            "(b) low acceptance: 1-2 steps win at C=1, speculation barely pays at C=32",
            "low_acceptance",
        ),
        Case(
            "qwen3-next-80b-mtp-4x-l40s",
            _harness_space("qwen3-next-80b-mtp-4x-l40s"),
            "(c) narrow memory band between KV-pool failure and graph OOM, moving with steps",
            "narrow_band",
        ),
        Case(
            "qwen3-32b-eagle3-1x-h200",
            _harness_space("qwen3-32b-eagle3-1x-h200"),
            "(d) compute-bound: the memory fraction hardly matters",
            "compute_bound",
        ),
        Case(
            "qwen25-coder-7b-ngram-1x-l4",
            _harness_space("qwen25-coder-7b-ngram-1x-l4"),
            "(e) NGRAM: draft-token budget (and memory fraction), no draft model",
            "ngram",
        ),
    )
}


def load_case(case: Case) -> tuple[Any, Any]:
    """(SearchSpace, Profile) of a case."""
    from autospec.cli.common import load_space
    from autospec.sim.profile import load_profile

    return load_space(case.space), load_profile(case.name)


def _key(candidate: Mapping[str, Any]) -> str:
    """A candidate's identity (floats rounded as the space rounds them)."""
    return json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in sorted(candidate.items())})


# ============================================================================ truth


@dataclass
class Truth:
    """The exhaustive, noiseless picture of one case."""

    case: str
    space: str
    objectives: list[str]
    directions: list[str]
    n_configs: int
    kinds: dict[str, int]  # launch outcome kind -> number of grid configurations
    violating: int  # start, but break a constraint of the space
    feasible: list[tuple[dict[str, Any], list[float]]]  # (candidate, values): start and meet constraints
    reference: list[float]
    ideal: list[float]
    front: list[tuple[dict[str, Any], list[float]]]
    hv: float  # of the normalised true front
    seconds: float  # wall time to compute it

    def norm(self, values: Sequence[float]) -> tuple[float, ...]:
        return normalise(values, self.reference, self.ideal, self.directions)

    def hv_of(self, values: Iterable[Sequence[float]]) -> float:
        return hypervolume([self.norm(v) for v in values], [1.0] * len(self.objectives))


def pareto(
    points: Sequence[tuple[dict[str, Any], list[float]]], directions: Sequence[str]
) -> list[tuple[dict[str, Any], list[float]]]:
    """The non-dominated points (one per distinct value vector), best first objective first."""
    sign = [1.0 if d == "maximize" else -1.0 for d in directions]
    best: dict[tuple[float, ...], tuple[dict[str, Any], list[float]]] = {}
    for cand, vals in points:
        best.setdefault(tuple(vals), (cand, vals))
    items = list(best.values())

    def dominated(a: list[float]) -> bool:
        return any(all(s * b >= s * x for s, b, x in zip(sign, other, a)) and tuple(other) != tuple(a) for _, other in items)

    front = [(c, v) for c, v in items if not dominated(v)]
    return sorted(front, key=lambda cv: [-s * x for s, x in zip(sign, cv[1])])


class CaseContext:
    """Per-process state of one case: space, profile, the noiseless oracle, the grid, and
    which configurations start (computed once per process)."""

    def __init__(self, case: Case) -> None:
        from _simulated import PredictedOracle

        from autospec.space import grid

        self.case = case
        self.space, self.profile = load_case(case)
        self.oracle = PredictedOracle(self.profile, self.space)
        self.configs = list(grid(self.space))
        self._kinds: dict[str, str] | None = None

    def kind(self, candidate: Mapping[str, Any]) -> str:
        """ "ok" or the launch failure kind of a candidate."""
        return self.oracle.launch(self.oracle.full_flags(candidate)).kind

    def feasible_values(self, candidate: Mapping[str, Any]) -> list[float] | None:
        """Noiseless objective values of a candidate that starts and meets the space's
        constraints; None otherwise."""
        measured = self.oracle.measure(self.oracle.full_flags(candidate))
        if measured is None:
            return None
        values, constraints = measured
        return None if any(v > 0 for v in constraints.values()) else list(values)

    def startable(self) -> list[dict[str, Any]]:
        return [c for c in self.configs if self.kind(c) == "ok"]

    def truth(self) -> Truth:
        t0 = time.perf_counter()
        kinds: Counter[str] = Counter()
        feasible: list[tuple[dict[str, Any], list[float]]] = []
        violating = 0
        for c in self.configs:
            kind = self.kind(c)
            kinds[kind] += 1
            if kind != "ok":
                continue
            values = self.feasible_values(c)
            if values is None:
                violating += 1
            else:
                feasible.append((c, values))
        directions = [o.direction for o in self.space.objectives]
        if not feasible:
            raise RuntimeError(f"{self.case.name}: no configuration of the space starts")
        cols = list(zip(*(v for _, v in feasible)))
        reference = [min(col) if d == "maximize" else max(col) for col, d in zip(cols, directions)]
        ideal = [max(col) if d == "maximize" else min(col) for col, d in zip(cols, directions)]
        front = pareto(feasible, directions)
        truth = Truth(
            case=self.case.name,
            space=self.case.space,
            objectives=[o.name for o in self.space.objectives],
            directions=directions,
            n_configs=len(self.configs),
            kinds=dict(kinds),
            violating=violating,
            feasible=feasible,
            reference=reference,
            ideal=ideal,
            front=front,
            hv=0.0,
            seconds=0.0,
        )
        truth.hv = truth.hv_of(v for _, v in front)
        truth.seconds = time.perf_counter() - t0
        return truth


_CONTEXTS: dict[str, CaseContext] = {}


def context(name: str) -> CaseContext:
    if name not in _CONTEXTS:
        _CONTEXTS[name] = CaseContext(CASES[name])
    return _CONTEXTS[name]


# ============================================================================ runs


@dataclass
class Launch:
    """One launch of a run: what was started, how it ended, what it cost, and its true
    values (None unless it started and met the constraints)."""

    candidate: dict[str, Any]
    kind: str  # "ok", "constraint_violated", "bench_failed" or a launch failure kind
    seconds: float
    values: list[float] | None
    note: str = ""  # why the study queued it: calibration, mem_push, baseline, retry


@dataclass
class Run:
    case: str
    strategy: str
    seed: int
    budget: int
    launches: list[Launch]
    wall_s: float
    extra: dict[str, Any] = field(default_factory=dict)


class _OpenGate(FeasibilityGate):
    """A feasibility gate that lets every candidate through and learns nothing: the
    baselines launch what they pick."""

    def verdict(self, flags: Mapping[str, Any], reuse: bool = True) -> Verdict:
        return Verdict(status="ok", reason="", source="static", rule=None, resolved={})

    def learn_failure(self, resolved: Mapping[str, Any], kind: str) -> None:
        pass

    def learn_success(self, resolved: Mapping[str, Any], startup: Mapping[str, Any]) -> None:
        pass


def launch_directly(ctx: CaseContext, candidates: Iterable[dict[str, Any]], budget: int) -> list[Launch]:
    """Launch `candidates` in order, up to `budget` launches, through the product's chain with
    the simulated launcher and bench (no preflight, no learning): every candidate costs what
    the study's chain would charge."""
    from _simulated import sim_command
    from _simulated_chain import simulated_chain

    from autospec.study.files import StudyLayout

    out: list[Launch] = []
    with tempfile.TemporaryDirectory(prefix="efficiency-direct-") as folder:
        chain = simulated_chain(
            profile=ctx.profile,
            oracle=ctx.oracle,
            space=ctx.space,
            gate=_OpenGate(),
            command=sim_command(ctx.profile),
            layout=StudyLayout(folder=Path(folder), name="direct", studies_dir=Path(folder)),
        )
        for number, cand in enumerate(candidates):
            if len(out) >= budget:
                break
            record = chain.run(number, cand)
            values = ctx.feasible_values(cand) if record.outcome in ("ok", "constraint_violated") else None
            out.append(Launch(dict(cand), record.outcome, float(record.seconds.get("total", 0.0)), values))
    return out


def run_random(ctx: CaseContext, seed: int, budget: int, strategy: str) -> Run:
    t0 = time.perf_counter()
    order = list(ctx.configs)
    random.Random(f"{strategy}/{ctx.case.name}/{seed}").shuffle(order)
    return Run(ctx.case.name, strategy, seed, budget, launch_directly(ctx, order, budget), time.perf_counter() - t0)


def run_random_startable(ctx: CaseContext, seed: int, budget: int, strategy: str) -> Run:
    t0 = time.perf_counter()
    order = ctx.startable()
    random.Random(f"{strategy}/{ctx.case.name}/{seed}").shuffle(order)
    return Run(ctx.case.name, strategy, seed, budget, launch_directly(ctx, order, budget), time.perf_counter() - t0)


# ---------------------------------------------------------------------------- grid
#
# SGLang's scripts/playground/bench_speculative.py, as read at sgl-project/sglang commit
# 96fd6bf0cbbf0f41b825f74890fadadb0ff14712: it builds its list of configurations with four
# nested loops, batch size outermost (default 1 2 4 8 16; it sets --cuda-graph-max-bs and
# --max-running-requests to it and benchmarks that one concurrency per launch), then steps
# (default 0 1 3 5 7), top-k (0 1 2 4 8) and draft tokens (0 2 4 8 16 32). It skips a
# configuration whose draft tokens exceed steps x topk + 1 and any with a zero among the
# three unless all three are zero (no speculation). --mem-fraction-static and every other
# server flag stay at what the user passed (SGLang's default when unset). It launches each
# configuration in that order, one server per configuration and batch size.
#
# Here a launch measures every concurrency level of the space at once, so the batch-size
# loop is walked once; the steps/topk/draft loops are projected onto the space (`grid_order`).

SCRIPT_STEPS = (0, 1, 3, 5, 7)
SCRIPT_TOPK = (0, 1, 2, 4, 8)
SCRIPT_DRAFT = (0, 2, 4, 8, 16, 32)


def script_triples() -> list[tuple[int, int, int]]:
    """(steps, topk, draft tokens) in the order bench_speculative.py launches them (its
    default lists), without the batch-size loop."""
    out = []
    for steps in SCRIPT_STEPS:
        for topk in SCRIPT_TOPK:
            for draft in SCRIPT_DRAFT:
                if steps * topk + 1 < draft:
                    continue
                if (steps == 0 or topk == 0 or draft == 0) and steps + topk + draft != 0:
                    continue
                out.append((steps, topk, draft))
    return out


def default_value(param: Any, profile: Any) -> Any:
    """The value of a tuned flag that bench_speculative.py leaves alone: SGLang's choice
    when the flag is unset (the profile's default; 48 running requests under speculation),
    snapped to the nearest value of the space (ties to the lower one); other flags: the
    middle value of the space."""
    from autospec.space import param_values

    values = param_values(param)
    target = {
        MEM: profile.mem_fraction_static,
        MRR: 48,
        "cuda_graph_max_bs": profile.cuda_graph_max_bs,
        "page_size": profile.page_size,
    }.get(param.name)
    if target is None or not all(isinstance(v, (int, float)) for v in values):
        return values[len(values) // 2]
    return min(values, key=lambda v: (round(abs(v - target), 9), v))


def grid_order(space: Any, profile: Any) -> list[dict[str, Any]]:
    """The space's configurations in bench_speculative.py's order: each of the script's
    (steps, topk, draft) that the space can express, with its other tuned flags at their
    `default_value`. Steps, top-k or draft tokens that the space tunes must be one of its
    values; ones it fixes must equal the script's (else the configuration is not in the
    space); ones it neither tunes nor fixes (NGRAM's steps and top-k) are ignored. top-k 1
    forces draft = steps + 1 (SGLang's rewrite), so the script's repeats of one server are
    launched once, and the no-speculation configuration is never in a space."""
    from autospec.space import grid

    members = {_key(c) for c in grid(space)}
    fixed = dict(space.server.flags)
    tuned = {p.name: p for p in space.params}
    others = {name: default_value(p, profile) for name, p in tuned.items() if name not in (STEPS, TOPK, DRAFT)}
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for steps, topk, draft in script_triples():
        if steps == 0:
            continue
        if fixed.get(STEPS, steps) != steps or fixed.get(TOPK, topk) != topk:
            continue
        effective_topk = topk if (TOPK in tuned or TOPK in fixed) else None
        if effective_topk == 1:
            draft = steps + 1
        if DRAFT in fixed and fixed[DRAFT] != draft:
            continue
        cand = dict(others)
        if STEPS in tuned:
            cand[STEPS] = steps
        if TOPK in tuned:
            cand[TOPK] = topk
        if DRAFT in tuned:
            cand[DRAFT] = draft
        key = _key(cand)
        if key in members and key not in seen:
            seen.add(key)
            out.append(cand)
    return out


def run_grid(ctx: CaseContext, seed: int, budget: int, strategy: str) -> Run:
    t0 = time.perf_counter()
    order = grid_order(ctx.space, ctx.profile)
    launches = launch_directly(ctx, order, budget)
    return Run(
        ctx.case.name,
        strategy,
        seed,
        budget,
        launches,
        time.perf_counter() - t0,
        extra={"script_configurations_in_space": len(order)},
    )


# ---------------------------------------------------------------------------- the study loop


def run_study_loop(ctx: CaseContext, seed: int, budget: int, strategy: str, *, sampler: str) -> Run:
    """autospec's study loop (`_simulated.run_study`) with `sampler`, `budget` launches."""
    from _simulated import run_study

    from autospec.records import read_trials

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="efficiency-") as folder:
        study = run_study(
            ctx.space, seed=seed, sampler=sampler, n_trials=budget, profile=ctx.profile, noise=0.0, studies_dir=Path(folder)
        )
        trials = read_trials(study)
    launches: list[Launch] = []
    answered = 0
    for t in trials:
        rec = t.record
        if rec is None:
            continue
        if not rec.launched:
            answered += 1
            continue
        notes = [
            name
            for name, on in (
                ("baseline", t.markers.baseline),
                ("calibration", t.markers.calibration),
                ("mem_push", t.markers.mem_push is not None),
                ("retry", t.markers.retry_of is not None),
            )
            if on
        ]
        values = ctx.feasible_values(rec.candidate) if rec.outcome in ("ok", "constraint_violated") else None
        launches.append(
            Launch(dict(rec.candidate), rec.outcome, float((rec.seconds or {}).get("total", 0.0)), values, ",".join(notes))
        )
    return Run(
        ctx.case.name,
        strategy,
        seed,
        budget,
        launches,
        time.perf_counter() - t0,
        extra={"study_trials": len(trials), "study_trials_not_launched": answered},
    )


# ---------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Strategy:
    """A way to pick launches: ``run(ctx, seed, budget, name) -> Run``."""

    run: Callable[..., Run]
    description: str
    cost: float = 1.0  # relative wall time, to schedule the slow ones first


def _study(sampler: str) -> Callable[..., Run]:
    def run(ctx: CaseContext, seed: int, budget: int, strategy: str) -> Run:
        return run_study_loop(ctx, seed, budget, strategy, sampler=sampler)

    return run


#: Every strategy the harness knows, by name. A new one is one entry here.
STRATEGIES: dict[str, Strategy] = {
    "random": Strategy(run_random, "uniformly random grid configurations without replacement, no preflight", 0.1),
    "random-startable": Strategy(run_random_startable, "uniformly random among the configurations that start", 0.1),
    "grid": Strategy(run_grid, "bench_speculative.py's order (steps, topk, draft), other flags at defaults", 0.1),
    "study-model": Strategy(_study("model"), "autospec's study loop, the model's choice (the default)", 5.0),
    "study-tpe": Strategy(_study("tpe"), "autospec's study loop, TPESampler", 2.0),
    "study-gp": Strategy(_study("gp"), "autospec's study loop, GPSampler", 6.0),
    "study-nsga2": Strategy(_study("nsga2"), "autospec's study loop, NSGAIISampler", 3.0),
    "study-random": Strategy(_study("random"), "autospec's study loop, RandomSampler", 4.0),
}


# ============================================================================ metrics


@dataclass
class Result:
    """The figures of one run."""

    case: str
    strategy: str
    seed: int
    budget: int
    launches: int
    hv_ratio: float
    launches_to_target: int | None
    init_failures: int
    failure_kinds: dict[str, int]
    gpu_s: float
    gpu_s_to_target: float | None
    wall_s: float
    extra: dict[str, Any]


def evaluate(run: Run, truth: Truth) -> Result:
    from autospec.launcher import LAUNCH_FAILURE_KINDS

    found: list[list[float]] = []
    to_target: int | None = None
    gpu_to_target: float | None = None
    spent = 0.0
    hv = 0.0
    for i, launch in enumerate(run.launches, 1):
        spent += launch.seconds
        if launch.values is not None:
            found.append(launch.values)
            hv = truth.hv_of(found)
        if to_target is None and hv >= TARGET * truth.hv - 1e-12 and found:
            to_target, gpu_to_target = i, spent
    ratio = hv / truth.hv if truth.hv > 0 else (1.0 if found else 0.0)
    kinds = Counter(launch.kind for launch in run.launches if launch.kind in LAUNCH_FAILURE_KINDS)
    return Result(
        run.case,
        run.strategy,
        run.seed,
        run.budget,
        len(run.launches),
        ratio,
        to_target,
        sum(kinds.values()),
        dict(kinds),
        spent,
        gpu_to_target,
        run.wall_s,
        run.extra,
    )


# ============================================================================ structure checks


@dataclass
class Check:
    name: str
    passed: bool
    lines: list[str]


def _fmt_cand(c: Mapping[str, Any]) -> str:
    short = {STEPS: "steps", TOPK: "topk", DRAFT: "draft", MEM: "mem", MRR: "mrr"}
    return " ".join(
        f"{short.get(k, k)}={v}" for k, v in sorted(c.items(), key=lambda kv: list(short).index(kv[0]) if kv[0] in short else 99)
    )


def _best(
    truth: Truth, i: int, where: Callable[[dict[str, Any]], bool] = lambda c: True
) -> tuple[dict[str, Any], list[float]] | None:
    sign = 1.0 if truth.directions[i] == "maximize" else -1.0
    pts = [(c, v) for c, v in truth.feasible if where(c)]
    return max(pts, key=lambda cv: sign * cv[1][i]) if pts else None


def _no_spec(ctx: CaseContext, concurrency: int) -> float:
    """Aggregate tok/s of the same server without speculation (the space's fixed flags
    without the speculative ones), at `concurrency`, noiseless."""
    flags = {k: v for k, v in ctx.space.server.flags.items() if not k.startswith("speculative_")}
    return ctx.oracle.level(flags, concurrency, first=False).metrics["agg_output_tok_s"]


def check_tree(ctx: CaseContext, truth: Truth) -> Check:
    best = _best(truth, 0)
    chain = _best(truth, 0, lambda c: c.get(TOPK, 1) == 1)
    c32 = _best(truth, 1)
    assert best and chain and c32
    topk = best[0].get(TOPK, 1)
    return Check(
        "tree optimum",
        2 <= topk <= 4,
        [
            f"C=1 optimum: {_fmt_cand(best[0])}: {best[1][0]:.1f} tok/s (topk {topk}; want 2-4)",
            f"best chain (topk 1) at C=1: {_fmt_cand(chain[0])}: {chain[1][0]:.1f} tok/s "
            f"({100 * (best[1][0] / chain[1][0] - 1):+.1f}% for the tree)",
            f"C=32 optimum: {_fmt_cand(c32[0])}: {c32[1][1]:.1f} tok/s",
        ],
    )


def check_low_acceptance(ctx: CaseContext, truth: Truth) -> Check:
    from autospec.sim import accept_length, resolve_args

    best = _best(truth, 0)
    c32 = _best(truth, 1)
    assert best and c32
    plain = _no_spec(ctx, 32)
    gain = c32[1][1] / plain - 1
    kind = ctx.oracle.prompt_workload(ctx.space.bench.num_requests(1))[0]
    accepts = []
    for steps in (1, 2, 3, 4):
        cfg = resolve_args(ctx.profile, {**ctx.space.server.flags, STEPS: steps, TOPK: 1, DRAFT: steps + 1})
        accepts.append(f"{steps}: {accept_length(ctx.profile, cfg, kind, ctx.space.workload.temperature):.2f}")
    best_steps = best[0].get(STEPS)
    return Check(
        "low acceptance",
        best_steps is not None and best_steps <= 2 and gain < 0.15,
        [
            f"accept length per verify step (steps: E) on {kind} at T={ctx.space.workload.temperature}: " + ", ".join(accepts),
            f"C=1 optimum: {_fmt_cand(best[0])}: {best[1][0]:.1f} tok/s (want steps 1-2); no speculation {_no_spec(ctx, 1):.1f}",
            f"C=32 optimum: {_fmt_cand(c32[0])}: {c32[1][1]:.1f} tok/s, {100 * gain:+.1f}% over no speculation "
            f"({plain:.1f}; want < +15%)",
        ],
    )


def check_narrow_band(ctx: CaseContext, truth: Truth) -> Check:
    from autospec.space import param_values

    mrr_param = ctx.space.param(MRR)
    slot_values = param_values(mrr_param) if mrr_param is not None else [None]
    default_slots = 48 if 48 in slot_values else slot_values[-1]
    lines = []
    total = sum(truth.kinds.values())
    share = truth.kinds.get("ok", 0) / total
    lows = []
    for slots in slot_values:
        per_steps = []
        for steps in param_values(ctx.space.param(STEPS)):
            mems = [c[MEM] for c in ctx.configs if c[STEPS] == steps and c.get(MRR) == slots and ctx.kind(c) == "ok"]
            per_steps.append(f"{steps}: " + (f"{min(mems):.2f}-{max(mems):.2f} ({len(mems)})" if mems else "none"))
            if slots == default_slots and mems:
                lows.append((steps, min(mems), max(mems)))
        lines.append(f"mem band by steps at max_running_requests={slots}: " + "; ".join(per_steps))
    n_mem = len(param_values(ctx.space.param(MEM)))
    n_steps = len(param_values(ctx.space.param(STEPS)))
    ok_default = sum(1 for c in ctx.configs if c.get(MRR) == default_slots and ctx.kind(c) == "ok")
    moves = len({lo for _, lo, _ in lows}) > 1 and len({hi for _, _, hi in lows}) > 1
    lines.insert(
        0,
        f"start: {truth.kinds.get('ok', 0)} of {total} configurations ({100 * share:.0f}%); "
        f"at max_running_requests={default_slots} (SGLang's default under speculation): "
        f"{ok_default} of {n_mem * n_steps} (steps, mem) points ({100 * ok_default / (n_mem * n_steps):.0f}%)",
    )
    failures = ", ".join(f"{k} {n}" for k, n in sorted(truth.kinds.items()) if k != "ok")
    lines.append(f"failures: {failures}; both ends of the band move with steps: {moves}")
    by_mem: dict[float, float] = {}
    for c, v in truth.feasible:
        by_mem[c[MEM]] = max(by_mem.get(c[MEM], 0.0), v[1])
    lines.append("best C=32 tok/s by mem: " + ", ".join(f"{m:.2f}: {v:.0f}" for m, v in sorted(by_mem.items())))
    return Check("narrow memory band", share < 0.25 and ok_default / (n_mem * n_steps) < 0.25 and moves, lines)


def check_compute_bound(ctx: CaseContext, truth: Truth) -> Check:
    by_mem: dict[float, float] = {}
    for c, v in truth.feasible:
        by_mem[c[MEM]] = max(by_mem.get(c[MEM], 0.0), v[1])
    spread = (max(by_mem.values()) - min(by_mem.values())) / max(by_mem.values())
    need = 32 * (ctx.oracle.prompt_workload(ctx.space.bench.num_requests(32))[1] + ctx.space.workload.output_len + 16)
    pools = [ctx.oracle.launch(ctx.oracle.full_flags(c)).outcome.max_total_num_tokens for c, _ in truth.feasible]
    plain1, plain32 = _no_spec(ctx, 1), _no_spec(ctx, 32)
    c32 = _best(truth, 1)
    assert c32
    return Check(
        "compute-bound",
        spread < 0.03,
        [
            "best C=32 tok/s by mem: " + ", ".join(f"{m:.2f}: {v:.0f}" for m, v in sorted(by_mem.items())),
            f"spread of the C=32 optimum across mem fractions: {100 * spread:.2f}% (want < 3%)",
            f"smallest KV pool of a configuration that starts: {min(pools):,} tokens; 32 requests need ~{need:,}",
            f"C=32 optimum {_fmt_cand(c32[0])}: {c32[1][1]:.0f} tok/s vs {plain32:.0f} without speculation "
            f"(C=1 without speculation: {plain1:.1f})",
        ],
    )


def check_ngram(ctx: CaseContext, truth: Truth) -> Check:
    algo = str(ctx.space.server.flags.get("speculative_algorithm", "")).upper()
    b1, b32 = _best(truth, 0), _best(truth, 1)
    assert b1 and b32
    tuned = [p.name for p in ctx.space.params]
    return Check(
        "NGRAM",
        algo == "NGRAM" and b1[0][DRAFT] != b32[0][DRAFT],
        [
            f"algorithm {algo}, tuned: {', '.join(tuned)}",
            f"C=1 optimum: {_fmt_cand(b1[0])}: {b1[1][0]:.1f} tok/s (no speculation {_no_spec(ctx, 1):.1f})",
            f"C=32 optimum: {_fmt_cand(b32[0])}: {b32[1][1]:.1f} tok/s (no speculation {_no_spec(ctx, 32):.1f})",
        ],
    )


CHECKS: dict[str, Callable[[CaseContext, Truth], Check]] = {
    "tree": check_tree,
    "low_acceptance": check_low_acceptance,
    "narrow_band": check_narrow_band,
    "compute_bound": check_compute_bound,
    "ngram": check_ngram,
}


def describe(name: str) -> tuple[Truth, list[str], Check | None]:
    """The case's truth, a description, and its structure check (if it has one)."""
    ctx = context(name)
    truth = ctx.truth()
    case = ctx.case
    p, s = ctx.profile, ctx.space
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(truth.kinds.items(), key=lambda kv: -kv[1]))
    space = case.space if "/" not in case.space else Path(case.space).relative_to(HERE.parent)
    lines = [
        f"### {case.name}",
        "",
        f"- {case.structure}",
        f"- profile: {p.description} (sglang {p.sglang_version}); space: {space}",
        f"- tuned: {', '.join(q.name for q in s.params)}; workload {s.workload.kind}"
        f"{'/' + s.workload.name if s.workload.name else ''}, T={s.workload.temperature}, output {s.workload.output_len}",
        f"- grid: {truth.n_configs} configurations; {kinds}"
        + (f"; {truth.violating} start but break a constraint" if truth.violating else ""),
        "- reference point (worst that starts): " + ", ".join(f"{n} {v:.1f}" for n, v in zip(truth.objectives, truth.reference)),
        "- ideal point: " + ", ".join(f"{n} {v:.1f}" for n, v in zip(truth.objectives, truth.ideal)),
        f"- true front ({len(truth.front)} points; normalised HV {truth.hv:.4f}):",
    ]
    for c, v in truth.front:
        lines.append(f"  - {_fmt_cand(c)}: " + ", ".join(f"{x:.1f}" for x in v))
    check = CHECKS[case.check](ctx, truth) if case.check else None
    if check is not None:
        lines.append(f"- structure check **{check.name}**: {'PASS' if check.passed else 'FAIL'}")
        lines += [f"  - {line}" for line in check.lines]
    return truth, lines, check


# ============================================================================ running


def _bend() -> None:
    """`--misspecified` (set through the environment, so worker processes see it too)."""
    if os.environ.get("AUTOSPEC_HARNESS_MISSPECIFIED") == "1":
        import _misspecified

        _misspecified.apply()


def _truth_task(name: str) -> Truth:
    _quiet()
    _bend()
    return context(name).truth()


def _run_task(name: str, strategy: str, seed: int, budget: int) -> Run:
    _quiet()
    _bend()
    return STRATEGIES[strategy].run(context(name), seed, budget, strategy)


def run_all(
    cases: Sequence[str], strategies: Sequence[str], seeds: Sequence[int], budgets: Sequence[int], jobs: int
) -> tuple[dict[str, Truth], list[Run]]:
    """Every (case, strategy, seed, budget) run, `jobs` worker processes (1: in-process)."""
    tasks = [(c, s, seed, b) for c in cases for s in strategies for seed in seeds for b in budgets]
    tasks.sort(key=lambda t: -STRATEGIES[t[1]].cost * t[3])  # slow ones first
    truths: dict[str, Truth] = {}
    runs: list[Run] = []
    done = 0
    t0 = time.perf_counter()

    def progress(run: Run) -> None:
        nonlocal done
        done += 1
        if done % 25 == 0 or done == len(tasks):
            print(f"  {done}/{len(tasks)} runs ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)

    if jobs <= 1:
        for c in cases:
            truths[c] = _truth_task(c)
        for task in tasks:
            runs.append(_run_task(*task))
            progress(runs[-1])
        return truths, runs
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        truth_futures = {pool.submit(_truth_task, c): c for c in cases}
        run_futures = [pool.submit(_run_task, *task) for task in tasks]
        for truth_future in as_completed(truth_futures):
            truths[truth_futures[truth_future]] = truth_future.result()
        for run_future in as_completed(run_futures):
            runs.append(run_future.result())
            progress(runs[-1])
    return truths, runs


# ============================================================================ tables


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def _cell_hv(rs: list[Result]) -> str:
    xs = [r.hv_ratio for r in rs]
    return f"{_median(xs):.2f} ({min(xs):.2f})" if xs else ""


def _cell_to_target(rs: list[Result], budget: int) -> str:
    if not rs:
        return ""
    xs = [r.launches_to_target if r.launches_to_target is not None else math.inf for r in rs]
    med, worst = _median(xs), max(xs)

    def f(x: float) -> str:
        return f">{budget}" if math.isinf(x) else f"{x:g}"

    reached = sum(1 for x in xs if not math.isinf(x))
    return f"{f(med)} ({f(worst)}) {reached}/{len(xs)}"


def _cell_failures(rs: list[Result]) -> str:
    xs = [r.init_failures for r in rs]
    return f"{_median(xs):g} ({max(xs)})" if xs else ""


def _cell_gpu(rs: list[Result]) -> str:
    if not rs:
        return ""
    total = _median([r.gpu_s for r in rs]) / 3600
    to = [r.gpu_s_to_target for r in rs if r.gpu_s_to_target is not None]
    tail = f" ({_median(to) / 3600:.2f})" if to else " (-)"
    return f"{total:.2f}{tail}"


def _cell_launches(rs: list[Result]) -> str:
    xs = [r.launches for r in rs]
    return f"{_median(xs):g}" if xs else ""


TABLES: list[tuple[str, str, Callable[[list[Result], int], str]]] = [
    ("hv", "HV ratio, median (worst) over seeds", lambda rs, b: _cell_hv(rs)),
    (
        "to95",
        "Launches until 95% of the true HV, median (worst), seeds that reached it (>budget: not within the budget)",
        _cell_to_target,
    ),
    (
        "fail",
        "Init failures per run (launched trials whose outcome is a launch failure kind), median (worst)",
        lambda rs, b: _cell_failures(rs),
    ),
    (
        "gpu",
        "Simulated GPU hours per run, median (median until 95% of the true HV; - if no seed reached it)",
        lambda rs, b: _cell_gpu(rs),
    ),
    (
        "launches",
        "Launches made, median (grid stops when bench_speculative.py's list is exhausted)",
        lambda rs, b: _cell_launches(rs),
    ),
]


def render_tables(
    results: list[Result], cases: Sequence[str], strategies: Sequence[str], budgets: Sequence[int], seeds: Sequence[int]
) -> list[str]:
    out: list[str] = []
    for budget in budgets:
        out.append(f"## Budget: {budget} launches ({len(seeds)} seeds: {' '.join(map(str, seeds))})")
        out.append("")
        for _, title, cell in TABLES:
            out.append(f"**{title}**")
            out.append("")
            out.append("| profile | " + " | ".join(strategies) + " |")
            out.append("|---|" + "---|" * len(strategies))
            for case in cases:
                row = []
                for strategy in strategies:
                    rs = [r for r in results if r.case == case and r.strategy == strategy and r.budget == budget]
                    row.append(cell(rs, budget))
                out.append(f"| {case} | " + " | ".join(row) + " |")
            out.append("")
    return out


# ============================================================================ self-test


def self_test() -> int:
    """Unit checks of the normalisation, the front and the grid order (the hypervolume's are
    tests/model/test_hypervolume.py)."""
    # normalisation: ideal -> 0, reference -> 1, both directions
    assert normalise([10, 5], [2, 9], [10, 5], ["maximize", "minimize"]) == (0.0, 0.0)
    assert normalise([2, 9], [2, 9], [10, 5], ["maximize", "minimize"]) == (1.0, 1.0)
    assert normalise([6, 7], [2, 9], [10, 5], ["maximize", "minimize"]) == (0.5, 0.5)
    assert normalise([3, 3], [3, 1], [3, 5], ["maximize", "maximize"]) == (0.0, 0.5)
    # front
    pts = [({"a": 1}, [1.0, 5.0]), ({"a": 2}, [2.0, 4.0]), ({"a": 3}, [1.5, 3.0]), ({"a": 4}, [2.0, 4.0])]
    assert [c["a"] for c, _ in pareto(pts, ["maximize", "maximize"])] == [2, 1]
    # bench_speculative.py's order
    triples = script_triples()
    assert triples[0] == (0, 0, 0) and triples[1] == (1, 1, 2) and (1, 2, 4) not in triples
    assert (3, 8, 16) in triples and (3, 8, 32) not in triples and (5, 4, 16) in triples
    space, profile = load_case(CASES["seed-qwen35-122b-4x-rtxpro6000"])
    order = grid_order(space, profile)
    assert order[0] == {STEPS: 1, TOPK: 1, DRAFT: 2, MEM: 0.84}, order[0]
    assert order[1] == {STEPS: 1, TOPK: 2, DRAFT: 2, MEM: 0.84}, order[1]
    assert all(o[MEM] == 0.84 for o in order)
    assert len({_key(o) for o in order}) == len(order)
    space, profile = load_case(CASES["qwen25-coder-7b-ngram-1x-l4"])
    assert [o[DRAFT] for o in grid_order(space, profile)] == [2, 4, 8, 16]
    space, profile = load_case(CASES["qwen3-next-80b-mtp-4x-l40s"])
    assert [(o[STEPS], o[DRAFT], o[MRR]) for o in grid_order(space, profile)] == [(1, 2, 48), (3, 4, 48), (5, 6, 48)]
    print("self-test: ok (normalisation, front, grid order)")
    return 0


# ============================================================================ main


def code_state() -> str:
    """Which autospec this is: the checkout's commit and how many files differ from it
    (read-only git commands; "unknown" outside a git checkout)."""
    import subprocess

    def git(*words: str) -> str:
        done = subprocess.run(["git", *words], cwd=HERE.parent, capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "unknown"
    changed = len([line for line in git("status", "--porcelain", "--untracked-files=no").splitlines() if line])
    return f"{head}" + (f" + {changed} changed tracked files" if changed else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--profiles",
        nargs="+",
        default=list(CASES),
        choices=list(CASES),
        metavar="PROFILE",
        help=f"default: all ({', '.join(CASES)})",
    )
    ap.add_argument(
        "--strategies",
        nargs="+",
        default=list(STRATEGIES),
        choices=list(STRATEGIES),
        metavar="STRATEGY",
        help=f"default: all ({', '.join(STRATEGIES)})",
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS))
    ap.add_argument("--budgets", nargs="+", type=int, default=list(DEFAULT_BUDGETS), help="launches per run")
    ap.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (default: 2, or 1 on a 1-CPU machine; 1 runs in-process)",
    )
    ap.add_argument("--json", help="write every run's launches and figures to this file")
    ap.add_argument("--describe", action="store_true", help="describe each profile's landscape and check its structure")
    ap.add_argument("--self-test", action="store_true", help="unit checks of the normalisation, the front and the grid order")
    ap.add_argument(
        "--misspecified",
        action="store_true",
        help="bend the simulator's step cost and acceptance into forms the model does not have (benchmarks/_misspecified.py)",
    )
    args = ap.parse_args(argv)
    if args.misspecified:
        os.environ["AUTOSPEC_HARNESS_MISSPECIFIED"] = "1"
    _quiet()
    if args.self_test:
        return self_test()

    t0 = time.perf_counter()
    command = "python benchmarks/efficiency.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.describe:
        failed = []
        print(f"`{command}`\n")
        for name in args.profiles:
            _, lines, check = describe(name)
            print("\n".join(lines) + "\n", flush=True)
            if check is not None and not check.passed:
                failed.append(name)
        print(f"wall time {time.perf_counter() - t0:.1f} s; structure checks failed: {', '.join(failed) or 'none'}")
        return 1 if failed else 0

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"`{command}` (jobs {args.jobs}, {os.cpu_count()} CPUs; autospec {code_state()}; started {started})\n")
    truths, runs = run_all(args.profiles, args.strategies, args.seeds, args.budgets, args.jobs)
    pairs = sorted(
        ((evaluate(run, truths[run.case]), run) for run in runs),
        key=lambda p: (args.profiles.index(p[0].case), args.strategies.index(p[0].strategy), p[0].budget, p[0].seed),
    )
    results = [r for r, _ in pairs]
    wall = time.perf_counter() - t0

    print("Reference points (component-wise worst over the configurations that start) and true fronts:\n")
    print("| profile | space | configurations (start) | reference point | ideal point | true front points |")
    print("|---|---|---|---|---|---|")
    for name in args.profiles:
        t = truths[name]
        space = t.space if "/" not in t.space else str(Path(t.space).relative_to(HERE.parent))
        ref = ", ".join(f"{v:.1f}" for v in t.reference)
        ideal = ", ".join(f"{v:.1f}" for v in t.ideal)
        print(f"| {name} | {space} | {t.n_configs} ({t.kinds.get('ok', 0)}) | {ref} | {ideal} | {len(t.front)} |")
    print(f"\n(objectives: {', '.join(truths[args.profiles[0]].objectives)})\n")
    print("\n".join(render_tables(results, args.profiles, args.strategies, args.budgets, args.seeds)))
    per_strategy: Counter[str] = Counter()
    for r in results:
        per_strategy[r.strategy] += r.wall_s  # type: ignore[assignment]  # Counter of seconds
    print("worker wall time by strategy: " + ", ".join(f"{s} {per_strategy[s]:.0f} s" for s in args.strategies))
    print(f"wall time {wall:.0f} s ({wall / 60:.1f} min) for {len(results)} runs, jobs {args.jobs}")

    if args.json:
        payload = {
            "command": command,
            "wall_s": wall,
            "seeds": args.seeds,
            "budgets": args.budgets,
            "truths": {
                n: {k: v for k, v in dataclasses.asdict(t).items() if k != "feasible"} | {"n_feasible": len(t.feasible)}
                for n, t in truths.items()
            },
            "runs": [
                {**dataclasses.asdict(r), "launches_detail": [dataclasses.asdict(x) for x in run.launches]} for r, run in pairs
            ],
        }
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
