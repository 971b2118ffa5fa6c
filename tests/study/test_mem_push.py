"""Mem-fraction pushes: which configuration is raised, and to which value."""

from __future__ import annotations

import optuna
import pytest
import tomllib

from autospec.cli.main import main
from autospec.config import parse_search_space
from autospec.feasibility.gate import FeasibilityGate
from autospec.records import Markers, StoredTrial, TrialClass, TrialRecord
from autospec.sim import init_outcome, load_profile, resolve_args
from autospec.study.proposing.mem_push import MAX_FAILURES, MEM, Measured, may_push, push_candidate
from autospec.study.proposing.policy import Moment, StudyView
from autospec.study.proposing.pushes import MemPushPolicy

from .conftest import SIM_ARGS

SPACE_TEXT = """
[server.flags]
model_path = "sim-model"
speculative_algorithm = "NEXTN"
tp_size = 4
attention_backend = "triton"
page_size = 16
speculative_eagle_topk = 1

[params.speculative_num_steps]
type = "int"
low = 2
high = 3

[params.mem_fraction_static]
type = "float"
low = 0.80
high = 0.92
step = 0.04

[workload]
kind = "synthetic"
output_len = 16

[bench]
concurrency = [1, 32]
requests_multiplier = 1
min_requests = 2
warmup_requests = 0

[[objectives]]
metric = "output_tok_s"
concurrency = 1

[[objectives]]
metric = "agg_output_tok_s"
concurrency = 32
"""


def space(text: str = SPACE_TEXT):
    return parse_search_space(tomllib.loads(text))


def m(number, steps, mem, c1, c32, mrr):
    return Measured(number, {"speculative_num_steps": steps, MEM: mem}, [c1, c32], mrr)


def gate(answers=None, default="launch"):
    """A stand-in for the feasibility gate: answers by (steps, mem); records what it was asked."""
    asked = []

    def answer(candidate):
        key = (candidate["speculative_num_steps"], round(candidate[MEM], 2))
        asked.append(key)
        return (answers or {}).get(key, default)

    answer.asked = asked
    return answer


def test_the_queue_bound_front_config_best_under_load_goes_to_the_highest_mem_fraction():
    front = [m(0, 3, 0.84, 440, 1600, 14), m(1, 5, 0.80, 520, 900, 9)]
    answer = gate()
    push = push_candidate(space(), front, answer)
    assert push.base == front[0]  # best at C=32
    assert push.candidate == {"speculative_num_steps": 3, MEM: 0.92}
    assert answer.asked == [(3, 0.92)]
    assert push.describe() == (
        "trial 0 ran at most 14 requests at once, fewer than C=32: queued again at mem_fraction_static=0.92"
    )


def test_a_value_predicted_to_fail_gives_way_to_the_next_lower_one():
    answer = gate({(3, 0.92): "no"})
    push = push_candidate(space(), [m(0, 3, 0.84, 440, 1600, 14)], answer)
    assert push.candidate[MEM] == 0.88
    assert answer.asked == [(3, 0.92), (3, 0.88)]


def test_a_measured_higher_value_ends_that_configuration_and_the_next_front_config_is_raised():
    measured = [m(0, 3, 0.84, 440, 1600, 14), m(1, 5, 0.80, 520, 900, 9)]
    answer = gate({(3, 0.92): "measured"})
    push = push_candidate(space(), measured, answer)
    assert (push.candidate, push.base) == ({"speculative_num_steps": 5, MEM: 0.92}, measured[1])
    assert answer.asked == [(3, 0.92), (5, 0.92)]


def test_nothing_is_proposed_when_no_front_config_queues():
    # 32 running requests: nothing waits at C=32, more KV cannot help.
    assert push_candidate(space(), [m(0, 3, 0.84, 440, 1600, 32)], gate()) is None
    # unknown max_running_requests (not in the log): no evidence of queueing
    assert push_candidate(space(), [m(0, 3, 0.84, 440, 1600, None)], gate()) is None


def test_nothing_is_proposed_when_every_higher_value_would_not_run_or_the_config_is_at_the_top():
    assert push_candidate(space(), [m(0, 3, 0.84, 440, 1600, 14)], gate(default="no")) is None
    assert push_candidate(space(), [m(0, 3, 0.92, 440, 1600, 14)], gate()) is None


def test_a_single_user_study_never_pushes():
    text = SPACE_TEXT.replace("concurrency = [1, 32]", "concurrency = [1]")
    text = text[: text.rindex("[[objectives]]")]
    one_level = Measured(0, {"speculative_num_steps": 3, MEM: 0.84}, [440.0], 1)
    assert push_candidate(space(text), [one_level], gate()) is None


def test_an_slo_at_a_higher_concurrency_counts_as_load():
    text = (
        SPACE_TEXT.replace("concurrency = [1, 32]", "concurrency = [1, 32, 64]")
        + """
[[constraints]]
metric = "ttft_ms_p99"
concurrency = 64
max = 2000
"""
    )
    push = push_candidate(space(text), [m(0, 3, 0.84, 440, 1600, 40)], gate())
    assert (push.candidate[MEM], push.concurrency) == (0.92, 64)


def test_a_space_without_mem_fraction_has_nothing_to_push():
    text = SPACE_TEXT.replace("[params.mem_fraction_static]", "[params.other]").replace(
        'type = "float"\nlow = 0.80\nhigh = 0.92\nstep = 0.04', 'type = "categorical"\nchoices = [1, 2]'
    )
    assert push_candidate(space(text), [m(0, 3, 0.84, 440, 1600, 14)], gate()) is None


PUSH_SPACE_TEXT = (
    SPACE_TEXT.replace("low = 2\nhigh = 3", "low = 2\nhigh = 5").replace(
        "low = 0.80\nhigh = 0.92\nstep = 0.04", "low = 0.80\nhigh = 0.94\nstep = 0.02"
    )
    + """
[baseline]
speculative_num_steps = 5
mem_fraction_static = 0.90
"""
)


def _study(tmp_path, text, trials):
    path = tmp_path / "space.toml"
    path.write_text(text)
    studies = tmp_path / "studies"
    argv = ["optimize", "--space", str(path), "--study", "push", "--studies-dir", str(studies), "--seed", "1"]
    assert main([*argv, "--trials", str(trials), "--baseline", "--no-references", "--confirm", "0", *SIM_ARGS]) == 0
    study = optuna.load_study(study_name="push", storage=f"sqlite:///{studies / 'push.db'}")
    return study, (studies / "push-events.log").read_text()


def _starts(params):
    """Whether the default simulator profile starts the space's server with `params`."""
    profile = load_profile()
    flags = {**space(PUSH_SPACE_TEXT).server.flags, **params}
    return init_outcome(profile, resolve_args(profile, flags)).ok


def _launched(number, steps, mem, c1, c32):
    """A measured launch of the push space's server on the default simulator profile, with
    the startup facts the simulator gives it."""
    profile = load_profile()
    params = {"speculative_num_steps": steps, MEM: mem}
    flags = {**space(PUSH_SPACE_TEXT).server.flags, **params}
    out = init_outcome(profile, resolve_args(profile, flags))
    assert out.ok
    startup = {
        "max_total_num_tokens": out.max_total_num_tokens,
        "max_running_requests": out.max_running_requests,
        "available_gpu_mem_gb": out.available_gpu_mem_gb,
        "gpu_mem_before_load_gb": profile.gpu_mem_gb - profile.runtime_overhead_gb,
        "kv_cache_gb": out.kv_cache_gb,
        "cuda_graph_gb": out.cuda_graph_gb,
    }
    bench = {c: {"n_ok": 2 * c, metric: v} for c, metric, v in ((1, "output_tok_s", c1), (32, "agg_output_tok_s", c32))}
    record = TrialRecord(
        outcome="ok", candidate=params, launched=True, resolved=flags, startup=startup, bench=bench, values=[c1, c32]
    )
    return StoredTrial(
        number, number, optuna.trial.TrialState.COMPLETE, TrialClass.MEASURED, params, (c1, c32), {}, record, Markers()
    )


def _push_after(trials):
    pushes = MemPushPolicy(
        space(PUSH_SPACE_TEXT), FeasibilityGate(sglang_version="0.5.10"), [True, True], 20, quiet=lambda t: False
    )
    return pushes, pushes.next_launch(StudyView(Moment.LAUNCHED, trials, len(trials), dict))


def test_a_push_goes_to_the_highest_mem_fraction_the_memory_model_is_sure_starts():
    """As in a quick start: 3 steps at mem 0.82 is the best at C=32 and queue-bound, and
    4 steps at mem 0.92 started with little headroom. The push raises the first no higher
    than where it keeps that much; the top of the range, which the gate alone would
    launch, fails at init."""
    trials = [_launched(0, 3, 0.82, 245.0, 1870.0), _launched(1, 5, 0.88, 268.0, 1350.0), _launched(2, 4, 0.92, 270.0, 1830.0)]
    pushes, plan = _push_after(trials)
    assert plan is not None
    ((params, markers),) = plan.trials
    assert markers.mem_push == 0 and params["speculative_num_steps"] == 3
    assert params[MEM] > 0.82 and _starts(params)
    top = {**params, MEM: 0.94}
    assert pushes.gate.verdict({**pushes.space.server.flags, **top}).ok and not _starts(top)


def test_no_push_goes_where_the_launches_do_not_prove_the_headroom():
    """Only the quick start's two calibration launches (mem 0.82): every higher value of
    either leaves less headroom than both had, so nothing is pushed; the gate alone
    would launch the top of the range, which fails at init."""
    trials = [_launched(0, 3, 0.82, 245.0, 1870.0), _launched(1, 1, 0.82, 125.0, 1480.0)]
    pushes, plan = _push_after(trials)
    assert plan is None
    top = {"speculative_num_steps": 3, MEM: 0.94}
    assert pushes.gate.verdict({**pushes.space.server.flags, **top}).ok and not _starts(top)


def test_no_push_is_queued_where_no_launch_proved_the_headroom_it_needs(tmp_path):
    """Without the baseline, only the two calibration launches (mem 0.88) have started:
    every higher mem fraction of either leaves less headroom than both had, which is not
    known to be enough, so the study queues no push (it pushed to the top before, where
    3 steps fail at init)."""
    text = PUSH_SPACE_TEXT[: PUSH_SPACE_TEXT.index("[baseline]")]
    assert not _starts({"speculative_num_steps": 4, "mem_fraction_static": 0.94})
    study, events = _study(tmp_path, text, 3)
    assert not any(t.user_attrs.get("mem_push") is not None for t in study.trials)
    assert "queued again" not in events


def test_pushes_go_on_after_one_failure_at_init_and_stop_at_the_second_or_the_budget():
    """The first push goes to the top of the range, where a failure is likeliest; the
    value just below it must still be tried, so one failure does not end the pushes."""
    assert may_push(made=1, failed=1, budget=6)
    assert not may_push(made=2, failed=MAX_FAILURES, budget=6)
    assert not may_push(made=6, failed=0, budget=6)
    assert may_push(made=0, failed=0, budget=1) and not may_push(made=1, failed=0, budget=1)


def test_after_the_top_value_failed_the_same_configuration_is_pushed_one_value_lower():
    failed_top = gate({(3, 0.92): "no"})
    push = push_candidate(space(), [m(0, 3, 0.80, 200, 1500, 20)], failed_top)
    assert push is not None and push.candidate[MEM] == pytest.approx(0.88)
    assert failed_top.asked == [(3, 0.92), (3, 0.88)]
