"""The picks' gains over the reference points (`autospec.report.references`): the ratio, its
interval and its verdict, from hand-made views."""

from __future__ import annotations

import math

import pytest

from autospec.records.launches import PooledStudy
from autospec.report import recommend
from autospec.report.data import StudyData, TrialView, parse_objective
from autospec.report.references import gains_json, gains_lines, reference_flags, reference_gains


def _level(out: float, out_half: float, agg: float, agg_half: float) -> dict:
    return {
        "output_tok_s": out,
        "agg_output_tok_s": agg,
        "n_ok": 20,
        "cis": {"output_tok_s": [out - out_half, out + out_half], "agg_output_tok_s": [agg - agg_half, agg + agg_half]},
    }


def _view(number: int, out: tuple[float, float], agg: tuple[float, float], reference: str | None = None) -> TrialView:
    bench = {1: _level(out[0], out[1], 0.0, 0.0), 32: _level(0.0, 0.0, agg[0], agg[1])}
    return TrialView(
        number=number,
        state="complete",
        kind="reference" if reference else "front",
        flags={"speculative_num_steps": number},
        values=[out[0], agg[0]],
        measured=True,
        outcome="ok",
        launched=True,
        bench=bench,
        reference=reference,
        server_args=["python", "-m", "sglang.launch_server", "--model-path", "m"]
        + (["--speculative-algorithm", "NEXTN"] if reference != "no_speculation" else []),
    )


OBJECTIVES = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("agg_output_tok_s@c32", "maximize")]


@pytest.fixture
def data() -> StudyData:
    pick = _view(5, (200.0, 10.0), (1000.0, 20.0))
    no_spec = _view(1, (100.0, 5.0), (1010.0, 30.0), reference="no_speculation")
    defaults = _view(2, (250.0, 5.0), (900.0, 9.0), reference="sglang_defaults")
    return StudyData("s", OBJECTIVES, [no_spec, defaults, pick])


def test_each_pick_gains_over_each_reference_with_a_propagated_interval(data):
    picks = recommend(data, None)
    gains = {g.reference: g for g in reference_gains(data, picks)}
    assert set(gains) == {"no_speculation", "sglang_defaults"}
    assert gains["no_speculation"].picks == ("latency", "throughput", "knee") and gains["no_speculation"].trial == 5
    out, agg = gains["no_speculation"].gains
    # 200 +-10 over 100 +-5: 2.0, +- 2.0 * sqrt(0.05^2 + 0.05^2)
    assert out.ratio.value == pytest.approx(2.0)
    assert out.ratio.half_width == pytest.approx(2.0 * math.hypot(0.05, 0.05))
    assert out.verdict == "better"
    # 1000 +-20 over 1010 +-30: 0.990 +-0.036 holds 1
    assert agg.ratio.value == pytest.approx(1000 / 1010)
    assert agg.verdict == "within noise"
    out, agg = gains["sglang_defaults"].gains
    assert out.verdict == "worse" and out.ratio.value == pytest.approx(0.8)
    assert agg.verdict == "better" and agg.ratio.value == pytest.approx(1000 / 900)


def test_a_gain_on_a_minimised_objective_above_one_is_worse():
    objectives = [parse_objective("output_tok_s@c1", "maximize"), parse_objective("ttft_ms_p99@c1", "minimize")]

    def view(number, out, ttft, reference=None):
        level = {
            "output_tok_s": out,
            "ttft_ms_p99": ttft,
            "cis": {"output_tok_s": [out - 1, out + 1], "ttft_ms_p99": [ttft - 1, ttft + 1]},
        }
        return TrialView(
            number,
            "complete",
            "reference" if reference else "front",
            {},
            [out, ttft],
            True,
            "ok",
            launched=True,
            bench={1: level},
            reference=reference,
        )

    data = StudyData("m", objectives, [view(1, 100.0, 50.0, "no_speculation"), view(2, 200.0, 80.0)])
    (gains,) = reference_gains(data, recommend(data, None))
    assert [g.verdict for g in gains.gains] == ["better", "worse"]


def test_text_and_json_name_the_reference_its_figures_and_each_gain(data):
    picks = recommend(data, None)
    lines = gains_lines(data, picks)
    assert lines[0] == (
        "no_speculation (trial 1; no speculative flags): "
        "output_tok_s@c1 100.0 +-5.0 tok/s, agg_output_tok_s@c32 1010.0 +-30.0 tok/s"
    )
    # no per-request figures in this study: the gains cannot pair, and the text says so
    assert lines[1].startswith(
        "    latency, throughput, knee pick (trial 5) over it: output_tok_s@c1 x2.00 +-0.14 (unpaired) better"
    )
    out = gains_json(data, picks)
    assert [r["name"] for r in out["references"]] == ["no_speculation", "sglang_defaults"]
    assert out["references"][1]["flags"] == "--speculative-algorithm NEXTN"
    first = out["gains"][0]["objectives"]["output_tok_s@c1"]
    lo, hi = first["ratio"]["ci95"]
    assert lo < first["ratio"]["value"] < hi and first["verdict"] == "better"


def test_no_reference_no_lines():
    data = StudyData("s", OBJECTIVES, [_view(5, (200.0, 10.0), (1000.0, 20.0))])
    assert gains_lines(data, recommend(data, None)) == []
    assert gains_json(data, recommend(data, None)) == {"references": [], "gains": []}


def test_reference_flags_keep_switches_and_values():
    t = TrialView(
        1,
        "complete",
        "reference",
        {},
        None,
        True,
        "ok",
        server_args=["x", "--speculative-algorithm", "NEXTN", "--speculative-adaptive", "--tp-size", "4"],
    )
    assert reference_flags(t) == "--speculative-algorithm NEXTN --speculative-adaptive"


def test_flags_a_reference_leaves_to_sglang_are_listed_as_unset():
    from autospec.report.table import compact

    flags = {"speculative_adaptive": True, "speculative_num_steps": None, "mem_fraction_static": None}
    assert compact(flags) == "speculative_adaptive=True unset: steps,mem"
    assert compact({"speculative_num_steps": 3, "mem_fraction_static": 0.84}) == "steps=3 mem=0.84"


def test_each_reference_gets_one_verdict_over_the_picks(data):
    # The pick beats no speculation at C=1 and ties at C=32 ("beaten"); against SGLang's
    # defaults it loses at C=1 and wins at C=32 ("mixed").
    picks = recommend(data, None)
    assert [r["verdict"] for r in gains_json(data, picks)["references"]] == ["beaten", "mixed"]
    lines = gains_lines(data, picks)
    assert any("every pick beats no_speculation" in line for line in lines)
    # A reference no pick beats anywhere, and that beats the pick at C=32: "unbeaten", and
    # the lines say to serve it.
    strong = _view(3, (210.0, 10.0), (2000.0, 20.0), reference="no_speculation")
    unbeaten = StudyData("s", OBJECTIVES, [strong, _view(5, (200.0, 10.0), (1000.0, 20.0))])
    picks = recommend(unbeaten, None)
    assert gains_json(unbeaten, picks)["references"][0]["verdict"] == "unbeaten"
    assert any("tuning did not pay here; serve without speculative decoding" in line for line in gains_lines(unbeaten, picks))


def test_a_gain_over_a_reference_that_measured_the_same_requests_is_the_paired_ratio():
    """The pick and SGLang's defaults measured the same 12 requests (speeds spread 30%:
    their own intervals are wide); request by request the pick is 8% faster at C=1, and the
    gain says so with the paired interval, which the unpaired one could not."""
    from autospec.metrics.paired import LogSpread

    speeds = {f"{i}.{i}": 150.0 + 10.0 * i for i in range(12)}
    pick = _view(5, (230.0, 25.0), (1000.0, 20.0))
    defaults = _view(2, (213.0, 25.0), (990.0, 20.0), reference="sglang_defaults")
    pick.bench[1]["request_speeds"] = {k: v * 1.08 for k, v in speeds.items()}
    defaults.bench[1]["request_speeds"] = dict(speeds)
    data = StudyData("s", OBJECTIVES, [defaults, pick], pooled=PooledStudy({}, {}, log_spread={0: LogSpread(0.01, 20, 10)}))
    out, agg = reference_gains(data, recommend(data, None))[0].gains
    assert out.comparison is not None and out.comparison.paired and out.comparison.matched == 12
    assert out.ratio.value == pytest.approx(1.08) and out.verdict == "better"
    assert agg.comparison is None and agg.verdict == "within noise"  # no per-wave figures: unpaired as before
    as_json = gains_json(data, recommend(data, None))["gains"][0]["objectives"]
    assert as_json["output_tok_s@c1"]["paired"]["separated"] is True
    assert as_json["agg_output_tok_s@c32"]["paired"] is None
    # the text says which gain could not pair
    line = next(x for x in gains_lines(data, recommend(data, None)) if "over it:" in x)
    c1, c32 = line.split(": ", 1)[1].split("; ")
    assert c1.startswith("output_tok_s@c1 x1.08") and "(unpaired)" not in c1
    assert c32.startswith("agg_output_tok_s@c32 x") and c32.endswith("(unpaired) within noise")


def test_a_comparison_unpaired_for_short_levels_names_the_short_launches_and_how_they_would_pair():
    """At C=32 a comparison pairs over 4 waves after the ramp. Two 2-wave levels hold one each:
    the sentence names both; beside a 6-wave level only the short one is named."""
    from autospec.report.support import versus_text

    def with_waves(view: TrialView, count: int, speed: float) -> TrialView:
        view.bench[32]["concurrency"] = 32
        view.bench[32]["wave_speeds"] = {str(w): speed * (1.0 + 0.01 * w) for w in range(count)}
        return view

    pick = with_waves(_view(5, (200.0, 10.0), (1000.0, 60.0)), 2, 1000.0)
    short = with_waves(_view(3, (190.0, 10.0), (990.0, 60.0)), 2, 990.0)
    said = versus_text(StudyData("s", OBJECTIVES, [pick, short]), pick, short, 1, 1)
    assert "unpaired: only 1 wave matched" in said
    assert "trial 5's 1 wave and trial 3's 1 wave after the first are fewer" in said and said.endswith("they would pair")
    long = with_waves(_view(3, (190.0, 10.0), (990.0, 60.0)), 6, 990.0)
    said = versus_text(StudyData("s", OBJECTIVES, [pick, long]), pick, long, 1, 1)
    assert "and trial 5's 1 wave after the first are fewer" in said and said.endswith("it would pair")
    assert "[bench] requests_multiplier = 5, where the space sets fewer" in said
