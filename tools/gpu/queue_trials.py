"""Queue launches of a few configurations in alternation, so that a study compares them
launch by launch on the same request stream (issue 37's paired check on the H200).

    python3 tools/gpu/queue_trials.py STORAGE STUDY TOTAL CONFIG [CONFIG ...]

CONFIG is NAME=VALUE[,NAME=VALUE...] (values parsed as TOML), one configuration of the
study's space, e.g. ``speculative_num_steps=5``. Trials are enqueued (Optuna's
``enqueue_trial``; `autospec optimize` runs queued trials before it samples, and with
``--remeasure`` launches a measured configuration again) until the study holds TOTAL
finished or queued launches of them: each time the configuration with the fewest, ties
broken against the one launched last. Prints what it queued."""

from __future__ import annotations

import sys

import optuna
import tomllib

Config = dict[str, object]


def parse(spec: str) -> Config:
    """``a=1,b=2`` -> {"a": 1, "b": 2} (values as TOML reads them); a bad one exits in one line."""
    try:
        return {name: tomllib.loads(f"v = {value}")["v"] for name, value in (p.split("=", 1) for p in spec.split(","))}
    except (ValueError, tomllib.TOMLDecodeError):
        raise SystemExit(f"queue_trials: {spec!r} is not NAME=VALUE[,NAME=VALUE...]; e.g. speculative_num_steps=5") from None


def _same(launched: Config, config: Config) -> bool:
    """`launched` (a trial's params) is a launch of `config`. A name the trial has no param
    for was not sampled there (at top-k 1 SGLang forces the draft tokens, so the space
    asks no draft fraction) and matches any value."""
    return all(launched.get(k, v) == v for k, v in config.items())


def plan(history: list[Config], configs: list[Config], total: int) -> list[Config]:
    """The configurations to queue, in order, given `history` (the params of the finished
    and queued launches, oldest first): the least launched next, ties against the last."""
    count = [sum(_same(h, c) for h in history) for c in configs]
    last = next((i for h in reversed(history) for i, c in enumerate(configs) if _same(h, c)), None)
    out: list[Config] = []
    while sum(count) < total:
        i = min(range(len(configs)), key=lambda j: (count[j], j == last))
        out.append(configs[i])
        count[i] += 1
        last = i
    return out


def main(argv: list[str]) -> None:
    if len(argv) < 4:
        raise SystemExit(__doc__)
    if not argv[2].isdigit():
        raise SystemExit(f"queue_trials: TOTAL {argv[2]!r} is not a count of launches; e.g. 6")
    storage, name, total, specs = argv[0], argv[1], int(argv[2]), argv[3:]
    configs = [parse(s) for s in specs]  # every CONFIG checked before the study is touched
    study = optuna.load_study(study_name=name, storage=storage)
    kept = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.WAITING)
    # a queued trial's parameters lie in Optuna 5.0's system attribute "fixed_params"
    history = [
        t.params or t.system_attrs.get("fixed_params", {})
        for t in study.trials
        if t.state in kept and not t.user_attrs.get("reference")
    ]
    for config in plan(history, configs, total):
        study.enqueue_trial(dict(config))
        print("queued", config)


if __name__ == "__main__":
    main(sys.argv[1:])
