"""The launch spread one --sim study's relaunches measured, used by the next study in the same
folder (`autospec.records.history`), end to end through the CLI: `optimize` twice, then `pareto`."""

from __future__ import annotations

import json

import pytest

from autospec.cli.main import main
from simspace import sim_space_text

from .conftest import SIM_ARGS


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_sims")
def test_a_second_study_in_the_folder_names_the_spread_the_first_ones_relaunches_measured(tmp_path, capsys):
    space = tmp_path / "space.toml"
    space.write_text(sim_space_text().replace("min_requests = 2", "min_requests = 8"))
    pinned = tmp_path / "pinned.toml"  # one configuration, relaunched: the first study measures the spread
    text = space.read_text().replace("low = 1\nhigh = 4", "low = 2\nhigh = 2")
    pinned.write_text(text.replace("low = 0.80\nhigh = 0.88", "low = 0.84\nhigh = 0.84"))
    studies = str(tmp_path / "studies")
    common = ["--studies-dir", studies, "--seed", "2", *SIM_ARGS, "--no-references", "--confirm", "0", "--sampler", "random"]
    assert main(["optimize", "--space", str(pinned), "--study", "relaunches", "--trials", "3", "--remeasure", *common]) == 0
    assert main(["optimize", "--space", str(space), "--study", "search", "--trials", "2", *common]) == 0

    def notes(study: str) -> str:
        capsys.readouterr()
        assert main(["pareto", "--study", study, "--studies-dir", studies, "--json"]) == 0
        return " ".join(json.loads(capsys.readouterr().out)["notes"])

    assert "not measured here; " in notes("search") and " over 2 df in 1 other study on this hardware" in notes("search")
    # the first study measured its own spread, and the second had no relaunch to lend it
    assert "measured " in notes("relaunches") and "other stud" not in notes("relaunches")
