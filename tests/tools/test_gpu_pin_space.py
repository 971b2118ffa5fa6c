"""tools/gpu/pin_space.py: a search space narrowed to one configuration, or a few."""

from __future__ import annotations

from pathlib import Path

import pytest

from autospec.config import load_search_space

from .gpu_scripts import load

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "src" / "autospec" / "search_spaces" / "real-8b-ngram.toml"


pin_space = load("pin_space")


def test_the_named_parameters_become_one_choice_each_and_the_rest_is_kept(tmp_path):
    out = tmp_path / "pinned.toml"
    pin_space.main([str(SPACE), str(out), "speculative_num_draft_tokens=4", "speculative_ngram_max_bfs_breadth=10"])
    pinned, full = load_search_space(out), load_search_space(SPACE)
    assert [(p.name, p.choices) for p in pinned.params] == [
        ("speculative_num_draft_tokens", (4,)),
        ("speculative_ngram_max_bfs_breadth", (10,)),
    ]
    assert pinned.server.flags == full.server.flags and pinned.workload == full.workload and pinned.bench == full.bench
    assert [o.share_of_launch for o in pinned.objectives] == [o.share_of_launch for o in full.objectives]


def test_a_parameter_the_space_lacks_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"no \[params.speculative_num_steps\] in the space; pin one of"):
        pin_space.main([str(SPACE), str(tmp_path / "x.toml"), "speculative_num_steps=3"])


def test_an_array_pins_a_parameter_to_those_values(tmp_path):
    out = tmp_path / "two.toml"
    standalone = SPACE.with_name("real-8b-standalone.toml")
    pin_space.main([str(standalone), str(out), "speculative_num_steps=[5, 6]", "speculative_eagle_topk=1"])
    pinned = {p.name: p.choices for p in load_search_space(out).params if hasattr(p, "choices")}
    assert pinned == {"speculative_num_steps": (5, 6), "speculative_eagle_topk": (1,)}
