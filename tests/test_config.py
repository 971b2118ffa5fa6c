"""Search-space files: what is accepted, and the one-line errors for what is not."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest

from autospec.cli.common import bundled_spaces, load_space
from autospec.config import ConfigError, load_search_space, parse_duration, parse_search_space

MINIMAL = {
    "server": {"flags": {"model_path": "m", "speculative_algorithm": "EAGLE"}},
    "params": {
        "speculative_num_steps": {"type": "int", "low": 1, "high": 5},
        "speculative_eagle_topk": {"type": "categorical", "choices": [1, 2]},
        "speculative_num_draft_tokens": {"type": "draft_tokens", "high": 8},
        "mem_fraction_static": {"type": "float", "low": 0.7, "high": 0.9, "step": 0.05},
    },
}


def with_(**changes):
    data = copy.deepcopy(MINIMAL)
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return data


def test_every_bundled_space_loads():
    spaces = bundled_spaces()
    assert {"default", "mtp", "eagle3", "ngram"} <= set(spaces)
    for name in spaces:
        space = load_space(name)
        assert space.objectives and space.params


def test_defaults_are_the_two_mission_objectives():
    space = parse_search_space(MINIMAL)
    assert [(o.metric, o.concurrency, o.direction) for o in space.objectives] == [
        ("output_tok_s", 1, "maximize"),
        ("agg_output_tok_s", 32, "maximize"),
    ]
    assert space.bench.concurrency == (1, 32)


def test_kebab_case_flag_names_are_normalised():
    space = parse_search_space(with_(server__flags={"--model-path": "m", "speculative-algorithm": "EAGLE"}))
    assert space.server.flags == {"model_path": "m", "speculative_algorithm": "EAGLE"}


def test_latency_objective_defaults_to_minimize():
    space = parse_search_space(with_(objectives=[{"metric": "tpot_ms_p50", "concurrency": 1}]))
    assert space.objectives[0].direction == "minimize"


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"params__speculative_num_steps": {"type": "int", "low": 5, "high": 1}}, "empty range"),
        ({"params__speculative_num_steps": {"type": "int", "low": 0, "high": 3}}, "speculative_num_steps must stay within"),
        ({"params__mem_fraction_static": {"type": "float", "low": 0.5, "high": 1.2}}, "mem_fraction_static must stay within"),
        ({"params__speculative_eagle_topk": {"type": "categorical", "choices": []}}, "non-empty choices"),
        ({"params__speculative_eagle_topk": {"type": "list"}}, "type must be one of"),
        ({"params__speculative_num_steps": {"type": "int", "low": 1, "high": 3, "typo": 1}}, "unknown key 'typo'"),
        ({"objectives": [{"metric": "tokens_per_joule", "concurrency": 1}]}, "unknown metric 'tokens_per_joule'"),
        ({"objectives": [{"metric": "output_tok_s", "concurrency": 8}]}, "does not include"),
        ({"constraints": [{"metric": "ttft_ms_p99", "concurrency": 32}]}, "needs max"),
        ({"constraints": [{"metric": "ttft_ms_p99", "concurrency": 32, "min": 5, "max": 1}]}, "is empty"),
        ({"bench__concurrency": [1, 1]}, "lists a level twice"),
        ({"bench__concurrency": [0]}, "positive integers"),
        ({"workload__kind": "sharegpt"}, "kind must be one of"),
        ({"workload__kind": "file"}, "needs path"),
        ({"workload__output_len": 0}, "output_len must be a positive integer"),
        ({"server__flags__speculative_num_steps": 3}, "both tunable"),
        ({"server__flags__mem_fraction_static": 1.5, "params__mem_fraction_static": None}, "mem_fraction_static must stay within"),
        ({"params__speculative_eagle_topk": None, "params__speculative_num_draft_tokens": {"type": "draft_tokens"}},
         "needs speculative_eagle_topk"),
        ({"params__x": {"type": "int", "low": 1, "high": 2, "when": {"nope": 1}}}, "when refers to nope"),
        ({"surprise": 1}, "unknown key 'surprise'"),
    ],
)
def test_bad_space_is_one_line_error_naming_the_problem(changes, needle):
    with pytest.raises(ConfigError) as exc:
        parse_search_space(with_(**changes), source="space.toml")
    message = str(exc.value)
    assert needle in message
    assert "\n" not in message
    assert message.startswith("space.toml")


def test_malformed_toml_and_missing_file(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[params.x\ntype = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_search_space(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_search_space(tmp_path / "missing.toml")


def test_fingerprint_changes_with_the_space_and_not_with_the_source():
    a = parse_search_space(MINIMAL, source="a.toml")
    b = parse_search_space(MINIMAL, source="b.toml")
    c = parse_search_space(with_(params__speculative_num_steps={"type": "int", "low": 1, "high": 6}))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_overrides_are_validated_again():
    space = parse_search_space(MINIMAL)
    assert space.with_overrides(concurrency=(1, 4, 32)).bench.concurrency == (1, 4, 32)
    with pytest.raises(ConfigError, match="does not include"):
        space.with_overrides(concurrency=(4,))


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("30m", 1800), ("8h", 28800), ("1h30m", 5400)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "8x", "h", "1h30"])
def test_bad_durations(text):
    with pytest.raises(ConfigError):
        parse_duration(text)


def test_space_file_round_trip(tmp_path: Path):
    path = tmp_path / "s.toml"
    path.write_text(textwrap.dedent("""
        [server.flags]
        model_path = "m"
        [params.speculative_num_steps]
        type = "int"
        low = 1
        high = 3
        [params.speculative_eagle_topk]
        type = "categorical"
        choices = [1, 4]
        [params.speculative_num_draft_tokens]
        type = "draft_tokens"
        [params.cuda_graph_max_bs]
        type = "categorical"
        choices = [16, 32]
        when = { speculative_eagle_topk = 4 }
        [[constraints]]
        metric = "ttft_ms_p99"
        concurrency = 32
        max = 2000
    """))
    space = load_search_space(path)
    assert space.param("cuda_graph_max_bs").when == (("speculative_eagle_topk", (4,)),)
    assert space.constraints[0].violation(2500) == 500
    assert space.constraints[0].violation(1500) < 0
