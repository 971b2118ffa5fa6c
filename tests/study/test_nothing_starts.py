"""A failure that rules out the whole space ends the study at once (exit code 3), with
the failed trial recorded; a resumed run after the fix searches again. The loop is
driven with a scripted chain in place of servers, on Optuna's in-memory storage."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import optuna
import pytest

from autospec.config import parse_search_space, tomllib
from autospec.launcher import Launcher
from autospec.records import TrialRecord, read_trials
from autospec.study import OptimizeRequest, StopReason, build_run
from autospec.study.nothing_starts import NothingCanStart, missing_model_path, space_wide_failure
from autospec.study.processes.identity import INVOCATION_ENV
from autospec.study.run import StudyRun
from autospec.study.storage import StorageHandle

UNKNOWN = "launch_server.py: error: unrecognized arguments: --enable-frobnicate"


def space(flags: str = "tp_size = 1", searched: str = "") -> Any:
    return parse_search_space(
        tomllib.loads(f"""
[server.flags]
model_path = "fake-model"
speculative_algorithm = "NEXTN"
{flags}

[params.speculative_num_steps]
type = "int"
low = 1
high = 3
{searched}

[bench]
concurrency = [1]

[[objectives]]
metric = "output_tok_s"
concurrency = 1
"""),
        source="test",
    )


class Chain:
    """Answers each trial with the next of `outcomes` ("ok" measures a value)."""

    def __init__(self, outcomes: list[tuple[str, str]]) -> None:
        self.outcomes = list(outcomes)
        self.ran = 0

    def bind(self, space: Any, gate: Any, **_: Any) -> Chain:
        self.space, self.gate = space, gate
        return self

    def run(self, number: int, candidate: Mapping[str, Any], hooks: Any = None, **_: Any) -> TrialRecord:
        self.ran += 1
        outcome, reason = self.outcomes.pop(0)
        resolved = self.gate.argument_verdict({**self.space.server.flags, **candidate}).resolved
        record = TrialRecord(outcome=outcome, candidate=dict(candidate), resolved=dict(resolved), launched=True)
        record.reason = reason
        if outcome == "ok":
            record.values = [100.0]
        return record


def worker(storage: Any, folder: Path, chain: Chain, the_space: Any, learn: bool = True) -> StudyRun:
    req = OptimizeRequest(
        space=the_space,
        study_name="s",
        n_trials=3,
        command=("fake-server",),
        studies_dir=folder,
        sampler="random",
        seed=1,
        learn=learn,
        launcher=Launcher(),
        race=False,
        confirm=0,
    )
    return build_run(req, make_chain=chain.bind, handle=StorageHandle(storage, "memory", heartbeat=False, local_path=None))


def test_weights_that_do_not_fit_end_the_study_after_one_launch_with_the_trial_recorded(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    torch = "torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 95.59 GiB of which 0 bytes"
    chain = Chain([("weights_oom", f"out of GPU memory while loading the model: {torch} (log: /x/server.log)")])
    line = r"nothing can start: .* at tp_size 1 \(trial 0; GPU 0 has a total capacity of 95.59 GiB\).*--tp-size N.*/x/server"
    with pytest.raises(NothingCanStart, match=line) as err:
        worker(storage, tmp_path, chain, space()).run()
    assert err.value.exit_code == 3
    assert "\n" not in str(err.value)
    assert chain.ran == 1
    trials = read_trials(optuna.load_study(study_name="s", storage=storage))
    finished = [(t.state.name, t.outcome) for t in trials if t.state.name != "WAITING"]  # queued ones stay queued
    assert finished == [("COMPLETE", "weights_oom")]


def test_the_same_command_run_again_after_the_cause_is_fixed_searches_again(tmp_path, monkeypatch):
    storage = optuna.storages.InMemoryStorage()
    with pytest.raises(NothingCanStart):
        worker(storage, tmp_path, Chain([("weights_oom", "oom")]), space()).run()
    monkeypatch.setenv(INVOCATION_ENV, "a-later-command")  # the GPUs were freed; the same command again
    fixed = Chain([("ok", "")] * 2)
    result = worker(storage, tmp_path, fixed, space(), learn=False).run()  # learned rules aside: they may skip
    assert fixed.ran >= 1 and result.launched == 1 + fixed.ran  # it searched again


def test_weights_oom_does_not_stop_a_space_that_searches_a_weight_flag(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    searched = '\n[params.tp_size]\ntype = "categorical"\nchoices = [1, 2]\n'
    chain = Chain([("weights_oom", "oom")] + [("ok", "")] * 3)
    result = worker(storage, tmp_path, chain, space("", searched)).run()
    assert result.stopped_because in (StopReason.TARGET, StopReason.EXHAUSTED) and chain.ran >= 2


def test_an_unknown_fixed_flag_ends_the_study_naming_the_flag(tmp_path):
    storage = optuna.storages.InMemoryStorage()
    chain = Chain([("rejected_args", UNKNOWN)])
    with pytest.raises(NothingCanStart, match=r"does not know --enable-frobnicate.*remove it"):
        worker(storage, tmp_path, chain, space("enable_frobnicate = true")).run()
    assert chain.ran == 1


def test_a_missing_local_model_path_stops_before_any_launch(tmp_path):
    chain = Chain([("ok", "")])
    missing = tmp_path / "no-such-model"
    the_space = parse_search_space(
        tomllib.loads(
            f'[server.flags]\nmodel_path = "{missing}"\n[params.mem_fraction_static]\ntype = "float"\n'
            'low = 0.7\nhigh = 0.9\n[bench]\nconcurrency = [1]\n[[objectives]]\nmetric = "output_tok_s"\n'
            "concurrency = 1\n"
        ),
        source="test",
    )
    with pytest.raises(NothingCanStart, match=f"model path {missing} does not exist"):
        worker(optuna.storages.InMemoryStorage(), tmp_path, chain, the_space).run()
    assert chain.ran == 0


def test_missing_model_path_leaves_hub_ids_and_existing_paths_alone(tmp_path):
    assert missing_model_path({"model_path": "Qwen/Qwen3-8B"}) is None
    assert missing_model_path({"model_path": str(tmp_path)}) is None
    assert missing_model_path({}) is None


def _stored(outcome: str, reason: str = "") -> Any:
    """A stored trial of this command ("this") as `space_wide_failure` reads one."""
    record = TrialRecord(outcome=outcome, candidate={}, launched=True, reason=reason)
    if outcome == "ok":
        record.values = [1.0]

    class T:
        number = 0
        markers = type("M", (), {"reference": None})()
        worker: ClassVar[dict[str, str]] = {"invocation": "this"}

    t = T()
    t.record = record  # type: ignore[attr-defined]
    return t


def test_one_launch_that_came_up_means_the_space_is_not_ruled_out():
    trials = [_stored("weights_oom"), _stored("ok")]
    assert space_wide_failure(trials, {"mem_fraction_static"}, {"tp_size": 1}, "this") is None
    assert space_wide_failure(trials[:1], {"mem_fraction_static"}, {"tp_size": 1}, "this") is not None


def test_an_unrecognized_flag_that_is_not_fixed_does_not_rule_out_the_space():
    trials = [_stored("rejected_args", UNKNOWN)]
    assert space_wide_failure(trials, set(), {"tp_size": 1}, "this") is None
    assert space_wide_failure(trials, set(), {"enable_frobnicate": True}, "this") is not None
    assert space_wide_failure(trials, {"enable_frobnicate"}, {"enable_frobnicate": True}, "this") is None


def test_a_failure_of_an_earlier_command_does_not_count():
    assert space_wide_failure([_stored("weights_oom")], set(), {}, "a-later-command") is None


def test_missing_model_path_names_where_the_path_was_given():
    line = missing_model_path({"model_path": "/nonexistent-model"}, "--model-path /nonexistent-model")
    assert line == "nothing can start: the model path /nonexistent-model does not exist; fix --model-path /nonexistent-model"
    assert missing_model_path({"model_path": "/nonexistent-model"}).endswith("fix model_path in [server.flags] (or --flag)")
