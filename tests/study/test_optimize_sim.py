"""The whole trial chain end to end: CLI -> study -> launcher -> simulator subprocess ->
benchmark client -> metrics -> Optuna storage, and back out through `autospec pareto`."""

from __future__ import annotations

import json

import optuna
import pytest

from autospec.cli.main import main

from .conftest import SIM_ARGS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leftover_sims")]


def run(*argv: str) -> int:
    return main(list(argv))


def load(tmp_path, name):
    return optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'studies' / (name + '.db')}")


def test_study_runs_records_every_trial_and_resumes_to_the_target(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    args = ["optimize", "--space", str(fast_space), "--study", "e2e", "--studies-dir", studies, "--seed", "3", *SIM_ARGS]
    assert run(*args, "--trials", "4") == 0
    study = load(tmp_path, "e2e")
    launched = [t for t in study.trials if t.user_attrs.get("launched")]
    assert len(launched) == 4
    assert study.metric_names == ["output_tok_s@c1", "agg_output_tok_s@c4"]
    for t in study.trials:
        attrs = t.user_attrs
        assert {"outcome", "launched", "server_args", "startup", "bench", "seconds", "candidate", "resolved"} <= set(attrs)
        if attrs["outcome"] == "ok":
            assert attrs["server_args"][:3][1:] == ["-m", "autospec.sim"]
            assert "--speculative-num-steps" in attrs["server_args"]
            assert attrs["startup"]["max_total_num_tokens"] > 0
            assert attrs["startup"]["max_running_requests"] > 0
            assert set(attrs["bench"]) == {"1", "4"}
            assert attrs["bench"]["1"]["n_ok"] == 2
            assert attrs["bench"]["1"]["gc_frozen"] is True and attrs["bench"]["4"]["gc_frozen"] is True
            assert t.values[0] > 0 and t.values[1] > 0
            # every objective with its 95% interval, in one attribute the dashboard lists
            assert set(attrs["intervals"]) == set(study.metric_names)
            for name, entry in attrs["intervals"].items():
                lo, hi = entry["ci95"]
                assert lo <= entry["value"] <= hi, name
            assert attrs["intervals"]["agg_output_tok_s@c4"]["method"] in ("batch-means", "short-window")
            assert {"launch", "bench", "teardown", "total"} <= set(attrs["seconds"])
            assert t.constraints["feasible"] == 0
        elif not attrs["launched"]:
            assert attrs["outcome"] in ("rejected", "skipped", "duplicate")
            assert attrs["reason"]
    # topk=2 with triton and page_size 16 is rejected by the simulated SGLang version's
    # resolver before any launch.
    for t in study.trials:
        if t.user_attrs["candidate"].get("speculative_eagle_topk") == 2:
            assert t.user_attrs["outcome"] == "rejected"
            assert not t.user_attrs["launched"]
            assert t.constraints["feasible"] == 1

    # The same command with a larger target continues the study; it does not add 6 more.
    assert run(*args, "--trials", "6") == 0
    study = load(tmp_path, "e2e")
    assert sum(1 for t in study.trials if t.user_attrs.get("launched")) == 6
    assert run(*args, "--trials", "6") == 0  # already complete: nothing new is launched
    assert sum(1 for t in load(tmp_path, "e2e").trials if t.user_attrs.get("launched")) == 6

    capsys.readouterr()
    assert run("pareto", "--study", "e2e", "--studies-dir", studies, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["study"] == "e2e"
    assert out["objectives"] == [
        {"name": "output_tok_s@c1", "direction": "maximize"},
        {"name": "agg_output_tok_s@c4", "direction": "maximize"},
    ]
    assert out["front"], "a 6-trial study has a non-empty front"
    for row in out["table"]:
        assert all(m["half_width"] is not None for m in row["objectives"].values()), row
    feasible_numbers = {t.number for t in study.trials if t.constraints.get("feasible") == 0}
    assert {row["number"] for row in out["front"]} <= feasible_numbers
    assert set(out["counts"]) >= {"measured", "failed", "interrupted", "infeasible", "duplicate", "launched"}
    counts = out["counts"]  # a confirmation relaunch (by default the end of the budget) is a launch of its own class
    assert counts["measured"] + counts["infeasible"] + counts["duplicate"] + counts["relaunch"] == len(study.trials)
    assert out["counts"]["launched"] == 6

    assert run("pareto", "--study", "e2e", "--studies-dir", studies) == 0
    table = capsys.readouterr().out
    assert "output_tok_s@c1" in table and "max_running_requests" in table


def test_confirmation_relaunches_within_the_budget_are_pooled_and_not_repeated_on_resume(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    args = [
        "optimize",
        "--space",
        str(fast_space),
        "--study",
        "conf",
        "--studies-dir",
        studies,
        "--seed",
        "5",
        *SIM_ARGS,
        "--trials",
        "5",
        "--confirm",
        "2",
    ]
    assert run(*args) == 0
    trials = load(tmp_path, "conf").trials
    relaunches = [t for t in trials if "confirm_of" in t.user_attrs]
    explored = [t for t in trials if t.user_attrs.get("launched") and "confirm_of" not in t.user_attrs]
    # --trials counts every launch; the last two may confirm (what they confirm is the picks' business)
    assert len(explored) + len(relaunches) == 5 and 1 <= len(relaunches) <= 2
    roots = {t.user_attrs["confirm_of"] for t in relaunches}
    by_number = {t.number: t for t in trials}
    for t in relaunches:
        root = by_number[t.user_attrs["confirm_of"]]
        assert t.user_attrs["launched"] and t.user_attrs["outcome"] == "ok"
        assert t.user_attrs["resolved"] == root.user_attrs["resolved"]  # the same server, launched again
        assert t.number > sorted(e.number for e in explored)[2]  # within the last two launches of the budget
    capsys.readouterr()
    assert run("pareto", "--study", "conf", "--studies-dir", studies, "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"]["relaunch"] == len(relaunches) and out["counts"]["launched"] == 5
    front = {row["number"] for row in out["front"]}
    assert not front & {t.number for t in relaunches}  # a relaunch is pooled, never a front point of its own
    pooled = [row for row in out["table"] if row["number"] in roots]
    assert pooled and all(any(m.startswith("mean of ") for m in row["marks"]) for row in pooled if row["on_front"])
    assert any(note.startswith("between-launch spread, from relaunches of") for note in out["notes"])

    assert run(*args) == 0  # resumed with the same command: the relaunches are not repeated
    assert len(load(tmp_path, "conf").trials) == len(trials)


def test_the_model_says_what_it_expected_and_why_the_rest_was_not_launched(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    base = ["--space", str(fast_space), "--studies-dir", studies, "--seed", "2", "--trials", "5", *SIM_ARGS]
    assert run("optimize", "--study", "m", *base) == 0  # --sampler model is the default
    study = load(tmp_path, "m")
    chosen = [t for t in study.trials if "predicted" in t.user_attrs]
    assert chosen, "no trial carries the model's prediction"
    for t in chosen:
        p = t.user_attrs["predicted"]
        assert len(p["values"]) == 2 and all(lo <= hi for lo, hi in zip(p["low"], p["high"]))
        assert 0 < p["p_start"] <= 1 and p["launches"] >= 0 and p["why"]
    summary = study.user_attrs["model_unlaunched"]
    assert summary["launches"] == 5
    assert sum(summary[g]["count"] for g in ("fail", "dominated", "open", "repeats")) == summary["candidates"] > 0

    capsys.readouterr()
    assert run("pareto", "--study", "m", "--studies-dir", studies) == 0
    out = capsys.readouterr().out
    assert "the model (--sampler model)" not in out and "autospec pareto --verbose" in out  # internals on request
    assert run("pareto", "--study", "m", "--studies-dir", studies, "--verbose") == 0
    out = capsys.readouterr().out
    assert "the model (--sampler model)" in out and "never launched:" in out
    assert run("pareto", "--study", "m", "--studies-dir", studies, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"]["unlaunched"]["candidates"] == summary["candidates"]
    for pick in data["model"]["picks"].values():
        assert pick["predicted"]["values"] and pick["measured"]

    assert run("optimize", "--study", "t", "--sampler", "tpe", *base) == 0
    capsys.readouterr()
    assert run("pareto", "--study", "t", "--studies-dir", studies) == 0
    assert "the model" not in capsys.readouterr().out


def test_a_space_of_one_configuration_relaunches_it_with_remeasure(tmp_path, capsys):
    # Every parameter narrowed to one value: the proposals the study queues carry no free
    # parameter (Optuna's `fixed_params` is an empty dict), and each is still taken and
    # launched, not withdrawn again and again.
    from tests.simspace import sim_space_text

    text = sim_space_text().replace("low = 1\nhigh = 4", "low = 2\nhigh = 2")
    text = text.replace("low = 0.80\nhigh = 0.88", "low = 0.84\nhigh = 0.84")
    space = tmp_path / "one.toml"
    space.write_text(text.replace('[params.speculative_num_draft_tokens]\ntype = "draft_tokens"\n', ""))
    studies = str(tmp_path / "studies")
    args = ["optimize", "--space", str(space), "--study", "one", "--studies-dir", studies, *SIM_ARGS]
    assert run(*args, "--trials", "3", "--remeasure", "--no-references", "--confirm", "0") == 0
    study = load(tmp_path, "one")
    assert [t.user_attrs["outcome"] for t in study.trials] == ["ok", "ok", "ok"]
    assert len({tuple(t.user_attrs["server_args"][3:-4]) for t in study.trials}) == 1
