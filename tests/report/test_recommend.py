"""The three recommendations and the sentences that justify them."""

from __future__ import annotations

from dataclasses import replace

from autospec.records.launches import PooledStudy
from autospec.report import recommend
from autospec.report.data import StudyData, TrialView, parse_objective


def test_latency_pick_is_fastest_at_c1_among_configurations_not_worse_than_the_baseline_at_c32(data):
    picks = recommend(data, data.baseline_trial())
    # trial 3 (261 tok/s) and trial 1 (250) lose throughput beyond noise (1400, 1650 +-16.5 vs 1700 +-17);
    # trial 2 matches the baseline at C=32 (1760) and is the fastest of those left.
    assert picks["latency"].trial.number == 2
    assert "not worse than the baseline at C=32" in picks["latency"].why
    assert "x1.01 +-0.01 vs the baseline, within noise" in picks["latency"].why


def test_throughput_pick_and_knee(data):
    picks = recommend(data, data.baseline_trial())
    # trial 4's 1800 +-144 at C=32 is the best estimate; trial 2's 1760 +-17.6 is within their
    # intervals, so the pick names the tie, but a tie of intervals does not let C=1 decide:
    # only values within 1% do (the next test). The baseline (trial 0, off the front) is tied
    # at C=32 too: ties are named among every measured configuration, as the runner-up is.
    assert picks["throughput"].trial.number == 4
    assert "tied at C=32 with trial(s) 0, 2 (differences within their 95% intervals or 1%)" in picks["throughput"].why
    assert picks["throughput"].tied_with == (0, 2) and data.trials[0].kind != "front"
    assert "among those within 1%" not in picks["throughput"].why
    # knee: max over the front of the worst share of the best: trial 1 keeps 250/261 and 1650/1800.
    assert picks["knee"].trial.number == 1
    assert "at least 92% of the best value on every objective (96% at C=1, 92% at C=32)" in picks["knee"].why


def test_without_a_baseline_the_latency_pick_is_the_fastest_at_c1(data):
    picks = recommend(data, None)
    assert picks["latency"].trial.number == 3
    assert "is fastest at C=1: 261.0 +-2.6 tok/s. It rests on 1 launch;" in picks["latency"].why
    # one launch and no relaunch in the study: its interval cannot include the between-launch spread
    assert picks["latency"].why.endswith(
        "against the runner-up at C=1, trial 1 (250.0 +-2.5 over these prompts): x1.044 (95% 1.029-1.059, unpaired: "
        "no per-request figures, 1 and 1 launches): separated, but the between-launch spread is not measured yet, "
        "so one launch cannot settle it."
    )
    versus = picks["latency"].versus
    assert versus is not None and versus["runner_up"] == 1 and versus["paired"] is False and versus["separated"] is True


def test_when_no_front_configuration_matches_the_baseline_the_sentence_says_what_it_costs(data):
    strong = data.trial(4)  # 1800 tok/s at C=32: nothing else on the front reaches it
    strong_baseline = TrialView(
        **{
            **strong.__dict__,
            "number": 99,
            "pooled": (),
            "bench": {
                c: {**lvl, "agg_output_tok_s": 5000.0, "cis": {**lvl["cis"], "agg_output_tok_s": [4990.0, 5010.0]}}
                for c, lvl in strong.bench.items()
            },
        }
    )
    picks = recommend(data, strong_baseline)
    assert picks["latency"].trial.number == 3
    assert "no front configuration matches the baseline at C=32" in picks["latency"].why


def _view(number: int, values: list[float]) -> TrialView:
    return TrialView(
        number=number,
        state="complete",
        kind="front",
        flags={"speculative_num_steps": number},
        values=values,
        measured=True,
        outcome="ok",
        launched=True,
    )


def test_knee_handles_a_minimised_objective():
    objectives = [parse_objective("tpot_ms_p50@c1", "minimize"), parse_objective("agg_output_tok_s@c32", "maximize")]
    trials = [_view(1, [4.0, 1000.0]), _view(2, [5.0, 1800.0]), _view(3, [8.0, 2000.0])]
    picks = recommend(StudyData("m", objectives, trials), None)
    assert picks["latency"].trial.number == 1  # lowest TPOT
    assert picks["throughput"].trial.number == 3
    assert picks["knee"].trial.number == 2  # 4/5 = 80% and 1800/2000 = 90%; the others fall to 50%


def test_nothing_to_recommend_without_a_front():
    assert recommend(StudyData("m", [parse_objective("output_tok_s@c1", "maximize")], []), None) == {}


def test_practically_equal_values_are_decided_by_the_other_objective():
    objectives = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]
    # 252.0 vs 251.8 at C=1 is a 0.1% difference; 1607 vs 1786 at C=32 is not.
    trials = [_view(31, [252.0, 1607.0]), _view(39, [251.8, 1786.0]), _view(40, [230.0, 1790.0]), _view(41, [262.0, 900.0])]
    picks = recommend(StudyData("m", objectives, trials), None)
    assert picks["latency"].trial.number == 41  # 262 is more than 1% ahead of the rest
    without_41 = recommend(StudyData("m", objectives, trials[:3]), None)
    assert without_41["latency"].trial.number == 39
    assert "is practically fastest at C=1: 251.8 tok/s; " in without_41["latency"].why
    assert (
        "tied at C=1 with trial(s) 31 (differences within their 95% intervals or 1%); "
        "among those within 1% it is the best at C=32"
    ) in without_41["latency"].why
    # 1790 vs 1786 at C=32 is tied too, and trial 39 is far faster at C=1
    assert without_41["throughput"].trial.number == 39
    assert (
        "has the practically highest aggregate output throughput at C=32: 1786.0 tok/s; tied at C=32 with trial(s) 40"
    ) in without_41["throughput"].why


def _launch(number: int, c1: float, c32: float, half: float, confirm_of: int | None = None) -> TrialView:
    """One launch with its own bench summary (95% half-width `half` on both figures)."""
    bench = {
        1: {"output_tok_s": c1, "n_ok": 8, "cis": {"output_tok_s": [c1 - half, c1 + half]}},
        32: {"agg_output_tok_s": c32, "n_ok": 64, "cis": {"agg_output_tok_s": [c32 - half, c32 + half]}},
    }
    kind = "relaunch" if confirm_of is not None else "front"
    return replace(_view(number, [c1, c32]), kind=kind, bench=bench, confirm_of=confirm_of)


def test_a_pick_on_pooled_launches_says_how_many_and_whether_it_separates_and_where_they_disagree():
    from autospec.metrics.relaunch import Spread
    from autospec.report.data import Measure

    objectives = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]
    # trial 1 launched twice: 300 and 320 at C=1 (each +-2: they disagree beyond their intervals), pooled 310 +-6;
    # trial 2 once: 250 +-5 at C=1 (the spread included), far below; at C=32 2000 vs 1990: overlapping
    root = replace(
        _launch(1, 300.0, 1990.0, 2.0),
        values=[310.0, 1990.0],
        launches=2,
        pooled=(Measure(310.0, 6.0), Measure(1990.0, 30.0)),
    )
    other = replace(_launch(2, 250.0, 2000.0, 2.0), pooled=(Measure(250.0, 5.0), Measure(2000.0, 40.0)))
    trials = [root, other, _launch(3, 320.0, 1990.0, 2.0, confirm_of=1)]
    spread = {o.name: Spread(0.03, 1, 1) for o in objectives}
    picks = recommend(StudyData("m", objectives, trials, spread=spread), None)

    latency = picks["latency"].why
    assert picks["latency"].trial.number == 1
    assert "It rests on 2 launches; against the runner-up at C=1, trial 2 (250.0 +-5.0 over these prompts): x1.240" in latency
    assert "2 and 1 launches): separated;" in latency
    assert "its launches disagree beyond their own intervals at C=1" in latency
    throughput = picks["throughput"].why
    assert picks["throughput"].trial.number == 1  # tied with trial 2 at C=32, and faster at C=1
    assert "tied at C=32 with trial(s) 2" in throughput
    assert (
        "It rests on 2 launches; against the runner-up at C=32, trial 2 (2000.0 +-40.0 over these prompts): x0.995" in throughput
    )
    assert "tied, the interval holds 1" in throughput


def test_pick_sentences_give_the_paired_ratio_to_the_runner_up_with_its_interval_and_say_separated_or_tied():
    """Both launches measured the same 16 requests, whose speeds spread 20% (+-10% intervals
    that overlap); request by request trial 1 is 5% faster at C=1, and with a between-launch
    spread of 1% measured over the study the pick is separated (with only the 2% prior it
    would not be: one launch each cannot tell 5% from that spread). At C=32 their waves
    differ by 0.5%: tied."""
    from autospec.metrics.paired import LogSpread

    objectives = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]
    base = {f"{i}.{i % 4}": 300.0 * (0.7 + 0.04 * i) for i in range(16)}
    waves = {str(w): 2000.0 * (1 + 0.03 * w) for w in range(8)}

    def launch(number: int, factor: float, wave_factor: float) -> TrialView:
        view = _launch(number, 300.0 * factor, 2000.0 * wave_factor, 30.0 * factor)
        view.bench[1]["request_speeds"] = {k: v * factor for k, v in base.items()}
        view.bench[32]["wave_speeds"] = {k: v * wave_factor for k, v in waves.items()}
        return view

    trials = [launch(1, 1.05, 1.0), launch(2, 1.0, 0.995)]
    prior_only = recommend(StudyData("m", objectives, trials), None)["latency"]
    assert prior_only.versus is not None and prior_only.versus["lo"] < 1.0 < prior_only.versus["hi"]
    spreads = {0: LogSpread(0.01, 10, 5), 1: LogSpread(0.01, 10, 5)}
    data = StudyData("m", objectives, trials, pooled=PooledStudy({}, {}, log_spread=spreads))
    picks = recommend(data, None)
    latency = picks["latency"]
    assert latency.trial.number == 1
    assert "against the runner-up at C=1, trial 2 (300.0 +-30.0 over these prompts): x1.050 (95% " in latency.why
    assert "paired over 16 requests, 1 and 1 launches): separated." in latency.why
    assert latency.versus is not None and latency.versus["paired"] and latency.versus["matched"] == 16
    assert latency.versus["lo"] > 1.0 and latency.versus["separated"] and latency.versus["launches"] == [1, 1]
    throughput = picks["throughput"]
    assert "paired over 7 waves, 1 and 1 launches): tied, the interval holds 1" in throughput.why  # 8 less the ramp
    assert throughput.versus is not None and not throughput.versus["separated"]
