"""Reference points measured in the same study (`autospec.study.proposing.references`): which
ones a space gets, what each launches, when they are on by default, and, end to end on the
simulator, that they are launched once, counted in --trials, stored with their real values
(configurations of the front like any other) and compared with the picks."""

from __future__ import annotations

import json

import optuna
import pytest

from autospec.cli.main import main
from autospec.config import parse_search_space
from autospec.records import Markers, TrialRecord, read_trials
from autospec.study.processes.recovery import requeue
from autospec.study.proposing.proposals import ProposalPolicy
from autospec.study.proposing.references import (
    ADAPTIVE,
    NO_SPECULATION,
    SGLANG_DEFAULTS,
    TRIALS_PER_REFERENCE,
    reference_candidate,
    reference_names,
    references_wanted,
)

from .conftest import SIM_ARGS


def _space(flags: dict, params: dict | None = None, extra: dict | None = None):
    params = params or {"speculative_num_steps": {"type": "int", "low": 1, "high": 4}}
    return parse_search_space({"server": {"flags": {"model_path": "m", **flags}}, "params": params, **(extra or {})})


def test_eagle_family_spaces_get_all_three_references_others_fewer():
    assert reference_names(_space({"speculative_algorithm": "NEXTN"})) == [NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE]
    assert reference_names(_space({"speculative_algorithm": "EAGLE3"})) == [NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE]
    # sglang 0.5.23 runs --speculative-adaptive only for EAGLE/EAGLE3 with top-k 1 and without DP attention
    assert reference_names(_space({"speculative_algorithm": "NGRAM"})) == [NO_SPECULATION, SGLANG_DEFAULTS]
    # a fixed top-k is left to SGLang with the rest of the shape, and adaptive sets it to 1
    assert reference_names(_space({"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}))[-1] == ADAPTIVE
    assert reference_names(_space({"speculative_algorithm": "EAGLE", "enable_dp_attention": True}))[-1] == SGLANG_DEFAULTS
    tuned = {"speculative_algorithm": {"type": "categorical", "choices": ["EAGLE", "NGRAM"]}}
    assert reference_names(_space({}, tuned)) == [NO_SPECULATION]  # no single algorithm to take SGLang's defaults of
    assert reference_names(_space({})) == []  # nothing speculative to compare with


def test_each_reference_unsets_what_it_leaves_to_sglang():
    space = _space(
        {"speculative_algorithm": "NEXTN", "speculative_draft_model_path": "/d", "tp_size": 4},
        {
            "speculative_num_steps": {"type": "int", "low": 1, "high": 4},
            "mem_fraction_static": {"type": "float", "low": 0.8, "high": 0.9},
        },
    )
    fixed = {**space.server.flags, "speculative_eagle_topk": 1}  # a tunable the narrowed space fixed
    no_spec = reference_candidate(NO_SPECULATION, space, fixed)
    assert {k for k, v in no_spec.items() if v is None} == {
        "speculative_num_steps",
        "mem_fraction_static",
        "speculative_eagle_topk",
        "speculative_algorithm",
        "speculative_draft_model_path",
    }
    defaults = reference_candidate(SGLANG_DEFAULTS, space, fixed)
    assert "speculative_algorithm" not in defaults and defaults["speculative_num_steps"] is None
    assert defaults["speculative_eagle_topk"] is None and "tp_size" not in defaults
    # a shape flag the space itself fixes is unset too: SGLang chooses steps, top-k, draft only together
    mtp = _space({"speculative_algorithm": "NEXTN", "speculative_eagle_topk": 1})
    assert reference_candidate(SGLANG_DEFAULTS, mtp, mtp.server.flags)["speculative_eagle_topk"] is None
    assert reference_candidate(ADAPTIVE, space, fixed) == {**defaults, "speculative_adaptive": True}
    with pytest.raises(ValueError, match="unknown reference 'fastest'"):
        reference_candidate("fastest", space, fixed)


def test_the_command_line_then_the_space_file_then_the_budget_decide():
    assert references_wanted(None, None, TRIALS_PER_REFERENCE * 3, 3) is True
    assert references_wanted(None, None, TRIALS_PER_REFERENCE * 3 - 1, 3) is False
    assert references_wanted(None, False, 100, 3) is False
    assert references_wanted(None, True, 2, 3) is True
    assert references_wanted(False, True, 100, 3) is False
    assert references_wanted(True, False, 2, 3) is True
    assert references_wanted(True, None, 100, 0) is False


def test_the_space_file_setting_is_validated():
    assert _space({"speculative_algorithm": "NEXTN"}, extra={"references": {"measure": False}}).references is False
    assert _space({"speculative_algorithm": "NEXTN"}).references is None
    from autospec.errors import ConfigError

    with pytest.raises(ConfigError, match=r"\[references\] unknown key 'on'; allowed keys are measure"):
        _space({"speculative_algorithm": "NEXTN"}, extra={"references": {"on": True}})


def test_an_interrupted_reference_is_queued_again_as_that_reference():
    from autospec.records import TrialStore

    study = optuna.create_study(directions=["maximize", "maximize"])
    store = TrialStore(study, [True, True], [])
    store.enqueue({"autospec_reference": NO_SPECULATION}, Markers(reference=NO_SPECULATION))
    trial = study.ask()
    store.tell_failed(trial, TrialRecord(outcome="interrupted", candidate={}, reason="stopped"))
    trials = read_trials(study)
    assert requeue(store, trials[0], trials)
    again = read_trials(study)[1]
    assert again.markers.reference == NO_SPECULATION and again.markers.retry_of == 0
    assert again.fixed_params == {"autospec_reference": NO_SPECULATION}


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_references_are_measured_once_counted_stored_with_their_values_and_compared(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    args = ["optimize", "--space", str(fast_space), "--study", "refs", "--studies-dir", studies, "--seed", "1", *SIM_ARGS]
    assert main([*args, "--trials", "5", "--references"]) == 0
    study = optuna.load_study(study_name="refs", storage=f"sqlite:///{tmp_path / 'studies' / 'refs.db'}")
    trials = read_trials(study)
    refs = {t.markers.reference: t for t in trials if t.markers.reference}
    assert set(refs) == {NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE}
    assert sum(1 for t in trials if t.counts_as_launch) == 5  # the references are three of the five launches
    for name, t in refs.items():
        assert t.trial_class.value == "reference" and t.has_measurement
        assert t.params == {"autospec_reference": name}
        assert list(t.values) == list(t.record.values) and min(t.values) > 0  # never a feasible 0
        assert t.constraints["feasible"] == 0.0
        argv = t.record.server_args
        assert ("--speculative-algorithm" in argv) == (name != NO_SPECULATION)
        assert ("--speculative-adaptive" in argv) == (name == ADAPTIVE)
        assert "--speculative-num-steps" not in argv and "--mem-fraction-static" not in argv  # left to SGLang
    # A resumed run with a larger budget does not queue them again.
    assert main([*args, "--trials", "6"]) == 0
    # (its sixth launch may relaunch a reference to confirm a pick: as that reference, pooled into it)
    assert sum(1 for t in read_trials(study) if t.markers.reference and t.markers.confirm_of is None) == 3

    capsys.readouterr()
    assert main(["pareto", "--study", "refs", "--studies-dir", studies, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    front_numbers = {row["number"] for row in out["front"]}
    assert all(pick["number"] in front_numbers for pick in out["recommendations"].values())
    assert out["counts"]["reference"] == 3 and out["counts"]["launched"] == 6
    assert [r["name"] for r in out["references"]] == [NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE]
    figures = {r["number"]: r["objectives"] for r in out["references"]}
    front = {row["number"]: row for row in out["table"]}
    assert out["gains"]
    for gain in out["gains"]:
        ref = figures[gain["reference_number"]]
        pick = front[gain["number"]]["objectives"]
        for name, g in gain["objectives"].items():
            if g["paired"] is not None:  # the same requests measured on both: the paired ratio
                assert g["paired"]["paired"] and g["ratio"]["value"] == pytest.approx(g["paired"]["ratio"])
                assert g["paired"]["lo"] < g["paired"]["ratio"] < g["paired"]["hi"] and g["paired"]["matched"] >= 2
            else:
                assert g["ratio"]["value"] == pytest.approx(pick[name]["value"] / ref[name]["value"])
            if g["ratio"]["half_width"] is not None:
                lo, hi = g["ratio"]["ci95"]
                assert lo < g["ratio"]["value"] < hi
    assert main(["pareto", "--study", "refs", "--studies-dir", studies]) == 0
    text = capsys.readouterr().out
    assert "references measured in this study (configurations of the front like any other)" in text
    assert "no_speculation (trial " in text and "pick (trial " in text
    assert main(["report", "--study", "refs", "--studies-dir", studies, "-o", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## Gains over the references" in report and "adaptive (trial " in report


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_references_that_do_not_fit_the_budget_left_are_not_queued_until_it_grows(tmp_path, fast_space, capsys):
    studies = str(tmp_path / "studies")
    args = ["optimize", "--space", str(fast_space), "--study", "small", "--studies-dir", studies, "--seed", "1", *SIM_ARGS]
    # two calibration launches go first: one launch is left for three references
    assert main([*args, "--trials", "3", "--references"]) == 0
    study = optuna.load_study(study_name="small", storage=f"sqlite:///{tmp_path / 'studies' / 'small.db'}")
    trials = read_trials(study)
    assert not any(t.markers.reference for t in trials)
    assert not any(t.state == optuna.trial.TrialState.WAITING for t in trials)  # nothing left waiting
    assert main([*args, "--trials", "6", "--references"]) == 0
    refs = [t for t in read_trials(study) if t.markers.reference]
    assert sorted(t.markers.reference for t in refs) == sorted([NO_SPECULATION, SGLANG_DEFAULTS, ADAPTIVE])
    assert all(t.trial_class.value == "reference" for t in refs)


class _Chain:
    """Measures every trial it is given (no server); records what the loop passed it."""

    def __init__(self) -> None:
        self.ran: list[tuple[dict, bool, bool]] = []  # (candidate, relaunch, raced)

    def bind(self, space, gate, **_):
        self.space, self.gate = space, gate
        return self

    def run(self, number, candidate, hooks=None, relaunch=False, **_):
        from autospec.study.chain import ChainHooks

        hooks.phase("launch")
        raced = hooks.stop_level is not ChainHooks.stop_level
        self.ran.append((dict(candidate), relaunch, raced))
        flags = {k: v for k, v in {**self.space.server.flags, **candidate}.items() if v is not None}
        steps = flags.get("speculative_num_steps") or 0
        record = TrialRecord(outcome="ok", candidate=dict(candidate), resolved=flags, launched=True)
        record.values = [100.0 + 50 * steps, 1000.0 - 10 * steps]
        hooks.measured(record)
        return record


def test_the_loop_launches_references_as_queued_unraced_and_hides_them_from_the_proposer(tmp_path):
    from autospec.launcher import Launcher
    from autospec.study import OptimizeRequest, build_run
    from autospec.study.storage import StorageHandle

    space = _space(
        {"speculative_algorithm": "NEXTN", "speculative_eagle_topk": 1},
        extra={
            "bench": {"concurrency": [1, 4]},
            "objectives": [{"metric": "output_tok_s", "concurrency": 1}, {"metric": "agg_output_tok_s", "concurrency": 4}],
        },
    )
    req = OptimizeRequest(
        space=space,
        study_name="s",
        n_trials=5,
        command=("fake",),
        studies_dir=tmp_path,
        sampler="random",
        seed=1,
        learn=False,
        launcher=Launcher(),
        references=True,
        confirm=0,  # the two search launches stay search launches
    )
    chain = _Chain()
    handle = StorageHandle(optuna.storages.InMemoryStorage(), "memory", heartbeat=False, local_path=None)
    run = build_run(req, make_chain=chain.bind, handle=handle)
    result = run.run()
    assert result.launched == 5
    assert [c.get("speculative_algorithm", "kept") for c, _, _ in chain.ran[:3]] == [None, "kept", "kept"]
    assert chain.ran[2][0]["speculative_adaptive"] is True
    assert all(relaunch and not raced for _, relaunch, raced in chain.ran[:3])  # never answered as a duplicate, never raced
    assert all(not relaunch and raced for _, relaunch, raced in chain.ran[3:])
    # the proposer's scratch study, which the sampler learns from, holds only the search's trials
    proposals = run.queue.policy(ProposalPolicy)
    assert proposals is not None and proposals.proposer is not None
    scratch = proposals.proposer.scratch.get_trials(deepcopy=False)
    assert scratch and all("autospec_reference" not in t.params for t in scratch)
