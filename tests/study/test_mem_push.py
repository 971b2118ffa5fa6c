"""Mem-fraction pushes: which configuration is raised, and to which value."""

from __future__ import annotations

import optuna
import pytest
import tomllib

from autospec.cli.main import main
from autospec.config import parse_search_space
from autospec.study.proposing.mem_push import MAX_FAILURES, MEM, Measured, may_push, push_candidate

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


def test_a_study_raises_the_mem_fraction_of_a_queue_bound_front_config(tmp_path):
    """The two calibration launches (mem 0.88) queue at C=32 on the default simulator
    profile; the third launch is the better one of them at the top of the range."""
    path = tmp_path / "space.toml"
    path.write_text(SPACE_TEXT)
    studies = tmp_path / "studies"
    argv = [
        "optimize",
        "--space",
        str(path),
        "--study",
        "push",
        "--studies-dir",
        str(studies),
        "--seed",
        "1",
        "--trials",
        "3",
        *SIM_ARGS,
    ]
    assert main(argv) == 0
    events = (studies / "push-events.log").read_text()
    study = optuna.load_study(study_name="push", storage=f"sqlite:///{studies / 'push.db'}")
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    first, second, pushed = launched
    assert first.user_attrs["calibration"] and second.user_attrs["calibration"]
    base = study.trials[pushed.user_attrs["mem_push"]]
    assert base in (first, second) and base.user_attrs["outcome"] == "ok"
    assert base.user_attrs["startup"]["max_running_requests"] < 32
    assert base.values[1] == max(first.values[1], second.values[1])
    assert pushed.params == {**base.params, "mem_fraction_static": pytest.approx(0.92)}
    assert pushed.user_attrs["outcome"] == "ok"
    assert pushed.user_attrs["startup"]["max_running_requests"] > base.user_attrs["startup"]["max_running_requests"]
    assert f"trial {base.number} ran at most {base.user_attrs['startup']['max_running_requests']} requests" in events


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
