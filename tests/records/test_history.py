"""The launch spread a storage's other studies measured, on real SGLang 0.5.16 records: the
studies of the trained 8B-shaped pair on H100s (issue 37) beside one on an H200."""

from __future__ import annotations

import contextlib
import gzip
import math
import sqlite3
import warnings
from pathlib import Path

import optuna
import pytest
from tests.model.replay import FIXTURES, pareto_json

from autospec.records import TrialStore, read_trials
from autospec.records.confirming import contests
from autospec.records.history import other_studies, served, spread_history
from autospec.records.launches import ObjectiveRef

REFS = [ObjectiveRef(0, "output_tok_s", 1), ObjectiveRef(1, "agg_output_tok_s", 32)]
H100_STUDIES = {  # fixture: the study in it, relaunched within one machine
    "real_8b_paired_steps56.db.gz": "steps-5-6",
    "real_8b_standalone_default_h100.db.gz": "real-8b-standalone-default",
    "real_8b_standalone_grid_h100.db.gz": "real-8b-standalone-grid",
}
H200_STUDY = ("real_8b_standalone_topk_1_2_h200.db.gz", "topk-1-2")
PAIR = ("real_8b_standalone_topk_1_2c_h100.db.gz", "topk-1-2c")


def _copy_into(
    storage: str, folder: Path, fixture: str, study: str, keep: set[int] | None = None, name: str | None = None
) -> None:
    """`study` of `fixture` into `storage` (as `name`), with only the trials numbered in `keep`."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    source = folder / fixture.replace(".db.gz", ".db")
    source.write_bytes(gzip.decompress((FIXTURES / fixture).read_bytes()))
    found = optuna.load_study(study_name=study, storage=f"sqlite:///{source}")
    copy = optuna.create_study(storage=storage, study_name=name or study, directions=found.directions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        copy.set_metric_names(found.metric_names)
    for k, v in found.user_attrs.items():
        copy.set_user_attr(k, v)
    copy.add_trials([t for t in found.get_trials(deepcopy=False) if keep is None or t.number in keep])


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    """One storage: three H100 studies with relaunches, one H200 study, and the topk pair's
    first two launches (6/1/7 and 6/2/7, one each) as the study under test, `first-pair`."""
    folder = tmp_path_factory.mktemp("history")
    url = f"sqlite:///{folder / 'storage.db'}"
    for fixture, study in [*H100_STUDIES.items(), H200_STUDY]:
        _copy_into(url, folder, fixture, study)
    _copy_into(url, folder, *PAIR, keep={0, 1}, name="first-pair")
    return url


def test_only_studies_on_the_same_hardware_and_target_count(storage: str) -> None:
    study = optuna.load_study(study_name="first-pair", storage=storage)
    trials = read_trials(study)
    on = {key for key in map(served, trials) if key is not None}
    assert on == {("NVIDIA H100 80GB HBM3 x1", "/tmp/sgmodels/t8b")}
    others = other_studies(study)
    assert len(others) == 4  # every other study, the H200 one included
    history = spread_history(others, on, REFS)
    # within-machine relaunches: 3 df in steps-5-6, 1 each in the default study and the grid
    assert history[0].studies == 3 and history[0].df == 5 and history[1].df == 5
    # at C=1 those launches shifted by almost nothing once the per-request noise is out; at C=32
    # steps-5-6's waves shifted by 4%, more than the +-2% prior
    assert history[0].sd < 0.002 and history[1].sd > 0.02
    assert spread_history(others, {("NVIDIA H200 x1", "/tmp/sgmodels/t8b")}, REFS).keys() == {0, 1}  # the H200 study alone
    assert spread_history(others, {("NVIDIA H100 80GB HBM3 x1", "/tmp/sgmodels/other")}, REFS) == {}


def test_a_one_launch_pair_is_judged_with_what_the_storage_measured(storage: str, tmp_path: Path) -> None:
    """6/1/7 over 6/2/7 from one launch each: beside the H100 studies the C=1 interval narrows
    towards the floor and the C=32 one widens to what those relaunches showed there."""
    alone = f"sqlite:///{tmp_path / 'alone.db'}"
    _copy_into(alone, tmp_path, *PAIR, keep={0, 1}, name="first-pair")
    beside, apart = pareto_json("first-pair", storage), pareto_json("first-pair", alone)

    def width(report: dict, pick: str) -> float:
        versus = report["recommendations"][pick]["versus_runner_up"]
        assert versus["paired"] and versus["launches"] == [1, 1]
        return math.log(versus["hi"] / versus["lo"])

    assert width(beside, "latency") < 0.8 * width(apart, "latency")
    assert width(beside, "throughput") > width(apart, "throughput")
    [note] = [n for n in beside["notes"] if n.startswith("comparisons (the x ratios)")]
    assert "not measured here; 0.0% over 5 df in 3 other studies on this hardware" in note
    assert not [n for n in apart["notes"] if n.startswith("comparisons (the x ratios)")]


def test_a_run_reads_the_history_once_and_its_contests_weigh_it(storage: str) -> None:
    """What the study loop does (`autospec.study.building`): the store reads the history when
    the run starts, and the confirmation contests use it. From one launch each, the prior
    settles both picks; the H100 studies' C=32 shifts reopen the throughput pick."""
    store = TrialStore(optuna.load_study(study_name="first-pair", storage=storage), [True, True], [])
    store.read_history({("NVIDIA H100 80GB HBM3 x1", "/tmp/sgmodels/t8b")}, REFS)
    assert {i: h.df for i, h in store.history.items()} == {0: 5, 1: 5}
    trials = store.read()
    before = {c.objective: c for c in contests(trials, REFS, [True, True])}
    after = {c.objective: c for c in contests(trials, REFS, [True, True], store.history)}
    assert all(c.settled and c.paired for c in before.values())
    assert after[0].settled and not after[1].settled and after[1].contenders == (1,)


def test_without_a_shared_storage_the_other_study_files_of_the_folder_count(tmp_path: Path) -> None:
    """Each study in its default file (DIR/NAME.db, as with no --storage): the other studies'
    files beside it are read, a file that is not an Optuna storage is skipped and left as it
    was, and a storage named otherwise (an explicit --storage) reads no neighbours."""
    folder = tmp_path / "studies"
    folder.mkdir()
    for fixture, study in H100_STUDIES.items():
        _copy_into(f"sqlite:///{folder / study}.db", tmp_path, fixture, study)
    _copy_into(f"sqlite:///{folder / 'first-pair.db'}", tmp_path, *PAIR, keep={0, 1}, name="first-pair")
    stray = folder / "notes.db"
    stray.write_bytes(b"not a database")
    with contextlib.closing(sqlite3.connect(folder / "other.db")) as db:  # a studies table, not Optuna's storage
        db.execute("CREATE TABLE studies (study_name TEXT)")
        db.commit()
    other = (folder / "other.db").read_bytes()
    study = optuna.load_study(study_name="first-pair", storage=f"sqlite:///{folder / 'first-pair.db'}")
    history = spread_history(other_studies(study), {("NVIDIA H100 80GB HBM3 x1", "/tmp/sgmodels/t8b")}, REFS)
    assert history[0].studies == 3 and history[0].df == 5
    assert stray.read_bytes() == b"not a database" and (folder / "other.db").read_bytes() == other
    (folder / "first-pair.db").rename(folder / "shared.db")
    assert other_studies(optuna.load_study(study_name="first-pair", storage=f"sqlite:///{folder / 'shared.db'}")) == []


def test_optimize_reads_the_history_once_for_its_hardware_and_target(storage: str, tmp_path: Path) -> None:
    """A new study of `real-8b-standalone` in (a copy of) that storage, run on an H100: its store
    and its confirmation contests hold what the three H100 studies measured; elsewhere not."""
    from autospec.config import load_search_space
    from autospec.launcher import Launcher
    from autospec.study import OptimizeRequest, build_run
    from autospec.study.proposing.confirmations import ConfirmationPolicy
    from autospec.study.storage import open_storage

    space = load_search_space(str(Path(__file__).resolve().parents[2] / "src/autospec/search_spaces/real-8b-standalone.toml"))
    copy = tmp_path / "copy.db"
    copy.write_bytes(Path(storage.removeprefix("sqlite:///")).read_bytes())
    url = f"sqlite:///{copy}"

    def built(hardware: str):
        req = OptimizeRequest(
            space=space,
            study_name="next-study",
            n_trials=8,
            command=("fake-server",),
            studies_dir=tmp_path,
            storage=url,
            sampler="random",
            learn=False,
            launcher=Launcher(),
            hardware=hardware,
        )
        return build_run(req, handle=open_storage(url, "next-study", tmp_path))

    run = built("NVIDIA H100 80GB HBM3 x1")
    assert {i: (h.df, h.studies) for i, h in run.store.history.items()} == {0: (5, 3), 1: (5, 3)}
    confirmation = run.queue.policy(ConfirmationPolicy)
    assert confirmation is not None and confirmation.history == run.store.history
    assert built("NVIDIA H200 x1").store.history.keys() == {0, 1}  # the H200 study's own relaunches
    assert built("NVIDIA A100 x1").store.history == {}
