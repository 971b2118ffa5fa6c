"""Small studies with the exact layout `autospec optimize` stores, made in milliseconds with
the same writer (`autospec.records.TrialStore`: records, constraints and the dashboard's
mirror, artifacts on request).

`SPACE` is an EAGLE search space (steps 1-6, topk 1/2/4, draft tokens, memory fraction)
with two objectives, output_tok_s@c1 and agg_output_tok_s@c32, measured at C = 1, 4, 32.
`standard_study` holds a baseline, a front of four, two dominated configurations, one
SLO-violating measurement, three configurations that produced no numbers, a duplicate
and an interrupted trial.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

SPACE = textwrap.dedent("""
    [server]
    command = ["python", "-m", "sglang.launch_server"]

    [server.flags]
    model_path = "MODEL"
    speculative_algorithm = "EAGLE"
    speculative_draft_model_path = "DRAFT"
    attention_backend = "triton"

    [params.speculative_num_steps]
    type = "int"
    low = 1
    high = 6

    [params.speculative_eagle_topk]
    type = "categorical"
    choices = [1, 2, 4]

    [params.speculative_num_draft_tokens]
    type = "draft_tokens"
    high = 16
    step = 0.25

    [params.mem_fraction_static]
    type = "float"
    low = 0.70
    high = 0.90
    step = 0.02

    [bench]
    concurrency = [1, 4, 32]

    [[objectives]]
    metric = "output_tok_s"
    concurrency = 1

    [[objectives]]
    metric = "agg_output_tok_s"
    concurrency = 32

    [baseline]
    speculative_num_steps = 3
    speculative_eagle_topk = 1
    mem_fraction_static = 0.8
""")

LEVELS = (1, 4, 32)


def write_space(folder: Path, model: str = "/models/target", draft: str = "/models/eagle") -> Path:
    path = folder / "space.toml"
    path.write_text(SPACE.replace("MODEL", model).replace("DRAFT", draft))
    return path


@dataclass
class Config:
    """One trial to add. `agg`/`out`: {C: tok/s}; missing levels are derived from c1/c32."""

    steps: int
    topk: int = 1
    mem: float = 0.8
    draft: int | None = None
    outcome: str = "ok"
    c1: float = 200.0
    c32: float = 1500.0
    agg: dict[int, float] = field(default_factory=dict)
    rel_hw: float = 0.01  # half-width of the 95% interval, relative
    n: int = 40
    mrr: int = 20
    baseline: bool = False
    errors: int = 0
    retractions: int = 0
    stall_s: float = 0.0  # a one-off stall left out of the C=32 level's steady window
    c32_method: str | None = None  # how the C=32 aggregate's interval was formed (agg_ci_method)
    c32_race: str | None = None  # the race stopped C=32: how the drained level judged it
    reason: str = ""
    launched: bool | None = None
    state: str = "complete"
    duplicate_of: int | None = None

    def flags(self) -> dict[str, Any]:
        draft = self.draft if self.draft is not None else self.steps + 1
        return {
            "speculative_num_steps": self.steps,
            "speculative_eagle_topk": self.topk,
            "mem_fraction_static": self.mem,
            "speculative_num_draft_tokens": draft,
        }


def _level(c: int, agg: float, out: float, rel: float, n: int, errors: int, accept: float) -> dict[str, Any]:
    tpot = 1000.0 / (out * 1.05)
    return {
        "concurrency": c,
        "n_requests": n + errors,
        "n_ok": n,
        "n_errors": errors,
        "errors_by_kind": {"http_500": errors} if errors else {},
        "error_rate": errors / (n + errors),
        "failed_reason": None,
        "output_tok_s": out,
        "output_tok_s_ci": [out * (1 - rel), out * (1 + rel)],
        "agg_output_tok_s": agg,
        "agg_output_tok_s_ci": [agg * (1 - rel), agg * (1 + rel)],
        "tpot_ms_mean": tpot,
        "accept_length": accept,
        "cis": {
            "output_tok_s": [out * (1 - rel), out * (1 + rel)],
            "agg_output_tok_s": [agg * (1 - rel), agg * (1 + rel)],
            "tpot_ms_mean": [tpot * 0.99, tpot * 1.01],
            "accept_length": [accept - 0.02, accept + 0.02],
        },
    }


def bench_of(cfg: Config) -> dict[str, dict[str, Any]]:
    accept = 1 + 0.8 * cfg.steps
    out = {}
    for c in LEVELS:
        if c == 1:
            agg = cfg.agg.get(1, cfg.c1)
        elif c == 32:
            agg = cfg.agg.get(32, cfg.c32)
        else:
            agg = cfg.agg.get(c, (cfg.c1 * c + cfg.c32) / 3)
        per_request = cfg.c1 if c == 1 else agg / c
        out[str(c)] = _level(c, agg, per_request, cfg.rel_hw, cfg.n, cfg.errors if c == 32 else 0, accept)
        if c == 32 and cfg.stall_s:
            out[str(c)]["steady_transient_s"] = cfg.stall_s
        if c == 32 and cfg.c32_method:
            out[str(c)].update(agg_ci_method=cfg.c32_method, steady_slices=1 if cfg.c32_method == "short-window" else 12)
        if c == 32 and cfg.c32_race:
            why = "dominated: trial 1 is better on every objective beyond both 95% intervals"
            out[str(c)].update(
                stop_reason="external",
                precision={"stop": "external", "detail": why, "race": {"stop": "dominated", "check": cfg.c32_race}},
            )
    return out


def server_args(flags: dict[str, Any], model: str, draft: str) -> list[str]:
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-draft-model-path",
        draft,
        "--attention-backend",
        "triton",
    ]
    for key, value in flags.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    return argv + ["--host", "127.0.0.1", "--port", "39217"]


def add(study: optuna.Study, space, cfg: Config, model: str, draft: str, artifacts=None) -> int:
    """Add `cfg` the way `autospec optimize` records a trial: enqueue, ask, suggest, then
    the one writer (`autospec.records.TrialStore`), with artifacts before the tell."""
    from autospec.records import Markers, TrialRecord, TrialStore
    from autospec.space import suggest, to_distribution_params

    # The SLO that trial 7 violates; every trial carries its key, as in a study with that constraint.
    store = TrialStore(study, [True, True], ["tpot_ms_p90@c32"])
    flags = cfg.flags()
    store.enqueue(to_distribution_params(flags, space), Markers(baseline=cfg.baseline))
    trial = study.ask()
    candidate = suggest(trial, space)
    measured = cfg.outcome in ("ok", "constraint_violated", "duplicate")
    launched = cfg.launched if cfg.launched is not None else cfg.outcome not in ("rejected", "skipped", "duplicate")
    record = TrialRecord(
        outcome=cfg.outcome,
        candidate=candidate,
        reason=cfg.reason,
        launched=launched,
        resolved={**flags, "speculative_algorithm": "EAGLE"} if cfg.outcome != "rejected" else {},
        server_args=server_args(flags, model, draft) if launched else None,
        startup={
            "max_total_num_tokens": cfg.mrr * 17500,
            "max_running_requests": cfg.mrr,
            "runtime_events": {"retractions": cfg.retractions},
        }
        if launched and measured
        else None,
        bench={int(c): v for c, v in bench_of(cfg).items()} if measured else {},
        seconds={"total": 1.0},
        values=[cfg.c1, cfg.c32] if measured else None,
        duplicate_of=cfg.duplicate_of,
    )
    if cfg.outcome == "constraint_violated":
        record.constraints["tpot_ms_p90@c32"] = 3.5
    if artifacts is not None and launched:
        log = artifacts.base / f"trial-{trial.number:04d}.log"
        log.write_text(f"server log of trial {trial.number}\nmax_running_requests={cfg.mrr}\n")
        optuna.artifacts.upload_artifact(
            artifact_store=artifacts.store, file_path=str(log), study_or_trial=trial, mimetype="text/plain"
        )
    if cfg.state == "fail":
        store.tell_failed(trial, record)
    else:
        store.tell(trial, record)
    return trial.number


STANDARD = [
    Config(steps=3, mem=0.8, c1=220.0, c32=1700.0, mrr=16, baseline=True, agg={4: 700.0}),
    Config(steps=4, mem=0.86, c1=250.0, c32=1650.0, mrr=15, agg={4: 790.0}),
    Config(steps=3, mem=0.88, c1=222.0, c32=1760.0, mrr=21, agg={4: 720.0}),
    Config(steps=5, mem=0.86, c1=261.0, c32=1400.0, mrr=11, n=6, agg={4: 810.0}),
    Config(steps=2, mem=0.88, c1=180.0, c32=1800.0, mrr=26, rel_hw=0.08, errors=2, retractions=3, agg={4: 600.0}),
    Config(steps=1, mem=0.8, c1=124.0, c32=1370.0, mrr=30),
    Config(steps=2, mem=0.8, c1=176.0, c32=1490.0, mrr=22),
    Config(steps=6, mem=0.9, c1=262.0, c32=900.0, outcome="constraint_violated", reason="violates tpot_ms_p90@c32"),
    Config(steps=2, topk=4, mem=0.8, draft=6, outcome="rejected", reason="SGLang rejects it"),
    Config(steps=6, mem=0.72, outcome="kv_pool_too_small", reason="Not enough memory"),
    Config(steps=5, mem=0.74, outcome="skipped", reason="predicted to fail"),
    Config(steps=4, mem=0.86, c1=250.0, c32=1650.0, outcome="duplicate", duplicate_of=1, reason="same server"),
    Config(steps=2, mem=0.84, outcome="interrupted", state="fail", launched=False),
]
"""Numbers: 0 baseline; front = 1, 2, 3, 4; dominated = 0, 5, 6; 7 violates an SLO; 8-10
produced no numbers; 11 duplicates 1; 12 was interrupted."""


@dataclass
class Made:
    name: str
    studies_dir: Path
    storage: str
    space_path: Path
    numbers: list[int]

    @property
    def args(self) -> list[str]:
        return ["--study", self.name, "--studies-dir", str(self.studies_dir)]

    def load(self) -> optuna.Study:
        return optuna.load_study(study_name=self.name, storage=self.storage)


def build_study(
    folder: Path,
    configs: list[Config] = STANDARD,
    name: str = "made",
    *,
    model: str = "/models/target",
    draft: str = "/models/eagle",
    artifacts: bool = False,
) -> Made:
    """A study in ``<folder>/studies/<name>.db`` created the way `autospec optimize` creates one."""
    import warnings

    from autospec.config import load_search_space
    from autospec.study.files import Artifacts
    from autospec.study.storage import StorageHandle, open_study

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    folder.mkdir(parents=True, exist_ok=True)
    space_path = write_space(folder, model, draft)
    space = load_search_space(space_path)
    studies = folder / "studies"
    studies.mkdir(parents=True, exist_ok=True)
    # Built in memory (fast), then copied into SQLite the way the CLI finds it: <studies>/<name>.db.
    memory = StorageHandle(optuna.storages.InMemoryStorage(), "memory", heartbeat=False, local_path=None)
    study = open_study(memory, name, space, optuna.samplers.RandomSampler(seed=0))
    store = Artifacts(studies / f"{name}-artifacts") if artifacts else None
    numbers = [add(study, space, cfg, model, draft, store) for cfg in configs]
    optuna.copy_study(from_study_name=name, from_storage=memory.storage, to_storage=f"sqlite:///{studies / (name + '.db')}")
    return Made(name, studies, f"sqlite:///{studies / (name + '.db')}", space_path, numbers)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)
