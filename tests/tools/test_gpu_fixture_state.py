"""tools/gpu/fixture_state.sh: a study fixture as the state run_study.sh continues from."""

from __future__ import annotations

import gzip
import subprocess
import tarfile

import optuna

from .gpu_scripts import GPU_TOOLS

FIXTURE = GPU_TOOLS.parents[1] / "tests" / "fixtures" / "real_8b_standalone_sampled_h100.db.gz"
STUDY = "real-8b-standalone-sampled"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(GPU_TOOLS / "fixture_state.sh"), *args], capture_output=True, text=True, check=False)


def test_the_state_holds_the_study_with_its_queue(tmp_path):
    assert _run(str(FIXTURE), STUDY, str(tmp_path / "state")).returncode == 0
    with tarfile.open(tmp_path / "state" / "study-state.tar.xz") as tar:
        assert tar.getnames() == ["autospec-study", f"autospec-study/{STUDY}.db"]
        tar.extractall(tmp_path / "out", filter="data")
    copied = tmp_path / "out" / "autospec-study" / f"{STUDY}.db"
    original = tmp_path / "original.db"
    original.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    # what run_study.sh goes on with: every trial, the queued ones too, as the fixture holds them
    assert _trials(copied) == _trials(original)
    assert optuna.trial.TrialState.COMPLETE in {state for _, state, _ in _trials(copied)}


def _trials(db) -> list[tuple[int, optuna.trial.TrialState, dict]]:
    study = optuna.load_study(study_name=STUDY, storage=f"sqlite:///{db}")
    return [(t.number, t.state, t.params or t.system_attrs.get("fixed_params", {})) for t in study.trials]


def test_a_study_the_fixture_lacks_is_one_line_and_writes_nothing(tmp_path):
    result = _run(str(FIXTURE), "real-8b-standalone", str(tmp_path / "state"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"fixture_state: the fixture holds no study 'real-8b-standalone'; it holds {STUDY}"
    assert not (tmp_path / "state" / "study-state.tar.xz").exists()
    missing = _run(str(tmp_path / "none.db.gz"), STUDY, str(tmp_path / "state"))
    assert missing.returncode == 2 and "no fixture" in missing.stderr
