"""What the trial chain asks of each level's precision loop (`TrialChain.goals`): the
figures of the objectives and constraints, their targets, and the time cap from the
trial's launch seconds."""

from __future__ import annotations

import copy

import pytest
from tests.bench.test_bench_precision import WIDE, summary_of

from autospec.bench import Figure, stop_rule
from autospec.config import parse_search_space
from autospec.study.chain import ChainHooks, TrialChain

SPACE = {
    "server": {"flags": {"model_path": "m", "speculative_algorithm": "EAGLE"}},
    "params": {"speculative_num_steps": {"type": "int", "low": 1, "high": 5}},
    "bench": {"concurrency": [1, 8, 32]},
    "objectives": [
        {"metric": "output_tok_s", "concurrency": 1, "target_rel_ci": 0.05},
        {"metric": "agg_output_tok_s", "concurrency": 32, "share_of_launch": 0.6},
    ],
    "constraints": [{"metric": "ttft_ms_p99", "concurrency": 32, "max": 2000}],
}


def chain(**bench) -> TrialChain:
    data = copy.deepcopy(SPACE)
    data["bench"].update(bench)
    space = parse_search_space(data)
    return TrialChain(space=space, launcher=None, gate=None, command=(), layout=None)  # type: ignore[arg-type]


def test_levels_with_objectives_or_constraints_get_goals_with_cumulative_caps() -> None:
    goals = chain().goals(launch_s=100.0)
    assert set(goals) == {1, 32}  # C=8 feeds nothing: its fixed request count only
    c1, c32 = goals[1], goals[32]
    assert c1.figures == (Figure("output_tok_s", 0.05),)
    assert c32.figures == (Figure("agg_output_tok_s", 0.02), Figure("ttft_ms_p99", 0.02, low=None, high=2000))
    assert (c1.min_requests, c1.max_requests) == (4, 128)
    assert (c32.min_requests, c32.max_requests) == (64, 4096)
    # 100 s launch split over 3 levels: C=1 may use 0.3 x 100 / 3, C=8 passes its 10 s on,
    # C=32 (share 0.6) adds 20 s: caps count from the start of the trial's benchmark.
    assert c1.cap_s == pytest.approx(10.0) and c32.cap_s == pytest.approx(10.0 + 10.0 + 20.0)


def test_the_study_stream_goes_to_the_goal_and_leaves_the_floor_as_it_is() -> None:
    goals = chain().goals(launch_s=100.0, stream={1: 23})
    assert goals[1].stream_requests == 23 and goals[1].min_requests == 4
    assert goals[32].stream_requests == 0  # no earlier launch measured C=32


def test_a_level_short_of_a_long_stream_stops_at_its_own_cap_and_leaves_the_later_levels_their_time() -> None:
    # an H200 study (2026-12-06): a fresh launch's long C=1 stream once took C=32's time
    goals = chain().goals(launch_s=100.0, stream={1: 1000, 32: 100_000})
    wide = summary_of(output_tok_s=100.0, cis=WIDE)
    stop = stop_rule(wide, goals[1], elapsed_s=goals[1].cap_s - 0.5, sent=20)
    assert stop is not None and stop.reason == "cap"  # 20 of the stream's 1,000 sent, its 10 s spent
    assert goals[32].cap_s == pytest.approx(40.0)  # C=32 still measures from 10 s to 40 s


def test_precision_off_means_fixed_levels() -> None:
    assert chain(precision=False).goals(launch_s=100.0) == {}


def test_the_ceiling_and_target_come_from_bench() -> None:
    goals = chain(max_requests={"1": 40}, target_rel_ci=0.01).goals(launch_s=0.0)
    assert goals[1].max_requests == 40 and goals[32].max_requests == 4096
    assert goals[1].cap_s == 0.0 and goals[32].figures[0].target_rel_ci == 0.01  # no launch time: floors only


def test_the_stop_hook_defaults_to_never() -> None:
    assert ChainHooks().stop_level(32, None) is None  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_a_study_on_the_completions_api_records_accept_length_and_stop_reasons(tmp_path) -> None:
    import optuna

    from autospec.cli.main import main
    from simspace import sim_space_text

    space = tmp_path / "space.toml"
    space.write_text(sim_space_text().replace("output_len = 24", 'output_len = 24\napi = "completions"'))
    studies = tmp_path / "studies"
    assert (
        main(
            [
                "optimize",
                "--space",
                str(space),
                "--study",
                "oa",
                "--studies-dir",
                str(studies),
                "--seed",
                "1",
                "--sim",
                "--sim-load-seconds",
                "0.1",
                "--sim-time-scale",
                "0.2",
                "--quiet",
                "--trials",
                "1",
            ]
        )
        == 0
    )
    study = optuna.load_study(study_name="oa", storage=f"sqlite:///{studies / 'oa.db'}")
    [trial] = [t for t in study.trials if t.user_attrs.get("launched")]
    for level in trial.user_attrs["bench"].values():
        assert level["accept_length"] > 1 and level["accept_length_source"] == "server_info"
        assert level["stop_reason"] in ("target", "cap", "ceiling")
        assert level["precision"]["cap_s"] >= 0 and "agg_output_tok_s_whole" in level
