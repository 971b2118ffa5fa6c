"""Search-space files: what is accepted, and the one-line errors for what is not."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path

import pytest

from autospec.cli.common import bundled_spaces, load_space
from autospec.config import (
    CategoricalParam,
    ConfigError,
    DraftTokensParam,
    FloatParam,
    IntParam,
    load_search_space,
    parse_duration,
    parse_search_space,
)
from autospec.workload import Workload

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
        ({"params__speculative_eagle_topk": {"type": "categorical", "choices": []}}, "choices must not be empty"),
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
        ({"workload__output_len": 0}, "[workload] output_len must be >= 1"),
        ({"workload__top_p": 0}, "[workload] top_p must be in (0, 1]"),
        ({"workload__top_k": 0}, "[workload] top_k must be a positive integer, got 0"),
        ({"server__flags__speculative_num_steps": 3}, "both tunable"),
        (
            {"server__flags__mem_fraction_static": 1.5, "params__mem_fraction_static": None},
            "mem_fraction_static must stay within",
        ),
        (
            {"params__speculative_eagle_topk": None, "params__speculative_num_draft_tokens": {"type": "draft_tokens"}},
            "needs speculative_eagle_topk",
        ),
        ({"params__x": {"type": "int", "low": 1, "high": 2, "when": {"nope": 1}}}, "when refers to nope"),
        ({"surprise": 1}, "unknown key 'surprise'"),
        ({"study__confirm": -1}, "[study] confirm must be >= 0"),
        ({"study__confirm": 2.5}, "[study] confirm must be an integer"),
        ({"study__confirmations": 2}, "[study] unknown key 'confirmations'"),
        ({"study__control_after_hours": 0}, "[study] control_after_hours must be a positive number, got 0"),
        ({"study__control_after_hours": "6h"}, "[study] control_after_hours"),
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


def test_study_confirm_is_read_and_leaves_the_fingerprint_alone():
    assert parse_search_space(MINIMAL).study.confirm is None  # unset: the tool's default share
    three = parse_search_space(with_(study__confirm=3))
    assert three.study.confirm == 3 and parse_search_space(with_(study__confirm=0)).study.confirm == 0
    assert three.fingerprint() == parse_search_space(MINIMAL).fingerprint()


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
    path.write_text(
        textwrap.dedent("""
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
    """)
    )
    space = load_search_space(path)
    assert space.param("cuda_graph_max_bs").when == (("speculative_eagle_topk", (4,)),)
    assert space.constraints[0].violation(2500) == 500
    assert space.constraints[0].violation(1500) < 0


# ------------------------------------------------------------------ fingerprints

# Computed by the code before the pydantic models: existing studies store these, and a
# study refuses to open when its space's fingerprint differs.
BUNDLED_FINGERPRINTS = {
    "default": "37c3b3b474d87303",
    "eagle3": "13c25284a8e23951",
    "mtp": "a2307e33ec206f34",
    "ngram": "52a913dbd01b24a0",
    "real-tiny-eagle": "63ae46fedfa6d2f3",
    "real-tiny-ngram": "e555e66bf0b17269",
    "real-tiny-ngram-breadth": "a5d3dcba99124624",
    "real-8b-ngram": "5f3633318194268c",
    "real-8b-eagle-mem": "2cfd8ef487e853d6",
    "real-8b-standalone": "b3e58d9d6cffef95",  # the H200 study of tests/fixtures/real_8b_standalone_study.db.gz
    "real-8b-standalone-sampled": "c666a9ce009221f3",
    "dflash": "9f09aac74e24d4f9",
}


def test_every_bundled_space_has_a_pinned_fingerprint():
    assert set(bundled_spaces()) == set(BUNDLED_FINGERPRINTS)


@pytest.mark.parametrize("name", sorted(BUNDLED_FINGERPRINTS))
def test_bundled_fingerprints_never_change(name):
    assert load_space(name).fingerprint() == BUNDLED_FINGERPRINTS[name]


# Integers where floats would do, a zero low, `when` tables, constraints and a log
# parameter: the fingerprint hashes values as the file wrote them.
EDGE = {
    "server": {
        "flags": {"model_path": "m", "--tp-size": 2, "speculative_eagle_topk": 4},
        "env": {"A": "b"},
        "sglang_version": "0.5.16",
        "ready_timeout_s": 60,
    },
    "params": {
        "speculative_num_steps": {"type": "int", "low": 1, "high": 5, "step": 2},
        "speculative_num_draft_tokens": {"type": "draft_tokens"},
        "mem_fraction_static": {"type": "float", "low": 0.5, "high": 0.9},
        "chunked_prefill_size": {"type": "int", "low": 1024, "high": 8192, "log": True},
        "schedule_conservativeness": {
            "type": "float",
            "low": 0,
            "high": 2,
            "step": 0.5,
            "when": {"speculative_num_steps": [1, 3]},
        },
        "attention_backend": {"type": "categorical", "choices": ["fa3", "triton", False], "when": {"speculative_eagle_topk": 4}},
    },
    "workload": {"kind": "random", "temperature": 0, "top_p": 1, "input_len": 64, "seed": 3, "api": "chat"},
    "bench": {"concurrency": [1, 4], "max_error_rate": 0, "request_timeout_s": 30},
    "objectives": [{"metric": "output_tok_s", "concurrency": 1}, {"metric": "ttft_ms_p50", "concurrency": 4}],
    "constraints": [
        {"metric": "ttft_ms_p99", "concurrency": 4, "max": 2000},
        {"metric": "output_tok_s", "concurrency": 1, "min": 0},
    ],
    "baseline": {"speculative_num_steps": 3},
}


def test_fingerprint_hashes_values_as_written():
    assert parse_search_space(EDGE).fingerprint() == "bf1b986c7a6f3aaf"
    space = parse_search_space(EDGE)
    assert type(space.workload.temperature) is int and type(space.param("schedule_conservativeness").low) is int
    floats = copy.deepcopy(EDGE)
    floats["workload"]["temperature"] = 0.0
    assert parse_search_space(floats).fingerprint() != "bf1b986c7a6f3aaf"


def test_a_set_top_k_changes_the_fingerprint_and_an_unset_one_does_not():
    with_top_k = copy.deepcopy(EDGE)
    with_top_k["workload"]["top_k"] = 4
    space = parse_search_space(with_top_k)
    assert space.workload.top_k == 4
    assert space.fingerprint() != parse_search_space(EDGE).fingerprint() == "bf1b986c7a6f3aaf"


# ------------------------------------------------------------- parameter variants


def test_each_parameter_type_is_its_own_variant_with_only_its_fields():
    space = parse_search_space(MINIMAL)
    steps, topk, draft, mem = space.params
    assert steps == IntParam("speculative_num_steps", 1, 5)
    assert topk == CategoricalParam("speculative_eagle_topk", (1, 2))
    assert draft == DraftTokensParam("speculative_num_draft_tokens", high=8, step=0.25)
    assert mem == FloatParam("mem_fraction_static", 0.7, 0.9, step=0.05)
    assert not hasattr(topk, "low") and not hasattr(steps, "choices") and not hasattr(draft, "low")
    assert all(p.applies({}) for p in space.params)


@pytest.mark.parametrize(
    "table, needle",
    [
        ({"type": "categorical", "choices": [1, 2], "low": 1}, "[params.speculative_eagle_topk] unknown key 'low'"),
        ({"type": "int", "low": 1, "high": 4, "choices": [1]}, "[params.speculative_eagle_topk] unknown key 'choices'"),
        ({"type": "draft_tokens", "high": 8}, "type draft_tokens is only for speculative_num_draft_tokens"),
        ({"type": "int", "low": 1.5, "high": 4}, "[params.speculative_eagle_topk] low must be an integer, got 1.5"),
        ({"type": "int", "low": True, "high": 4}, "[params.speculative_eagle_topk] low must be an integer, got True"),
        ({"type": "float", "low": "0.1", "high": 4}, "[params.speculative_eagle_topk] low must be a number"),
        ({"type": "int", "high": 4}, "[params.speculative_eagle_topk] low is missing"),
        ({"type": "float", "low": 0.1, "high": 4, "log": True, "step": 0.1}, "log = true needs low > 0 and no step"),
        ({"type": "categorical", "choices": [1, 1]}, "choices contain duplicates"),
        ({"low": 1, "high": 4}, "[params.speculative_eagle_topk] needs type = ...; add it"),
        ({"type": "categorical", "choices": [1, 2], "when": {}}, "when must be a table such as"),
        ({"type": "categorical", "choices": [1, 2], "name": "x"}, "unknown key 'name'"),
    ],
)
def test_parameter_tables_are_checked_by_their_type(table, needle):
    with pytest.raises(ConfigError) as exc:
        parse_search_space(with_(params__speculative_eagle_topk=table), source="space.toml")
    message = str(exc.value)
    assert message.startswith("space.toml: ") and needle in message and "\n" not in message
    assert exc.value.__cause__ is None  # no pydantic traceback attached
    assert exc.value.__context__ is None or exc.value.__suppress_context__


def test_draft_tokens_step_is_a_fraction_and_high_a_cap():
    for table, needle in [({"step": 1.5}, "step is the fraction grid"), ({"high": 1}, "high must be >= 2")]:
        with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
            parse_search_space(with_(params__speculative_num_draft_tokens={"type": "draft_tokens", **table}))


# --------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    "changes, where",
    [
        ({"surprise": 1}, "space.toml: unknown key 'surprise'; allowed keys are baseline, bench, "),
        ({"server__comand": ["x"]}, "space.toml: [server] unknown key 'comand'; allowed keys are command, env, "),
        ({"params__speculative_num_steps__hihg": 3}, "space.toml: [params.speculative_num_steps] unknown key 'hihg'"),
        ({"params__mem_fraction_static__stpe": 0.1}, "space.toml: [params.mem_fraction_static] unknown key 'stpe'"),
        ({"params__speculative_eagle_topk__choice": [1]}, "space.toml: [params.speculative_eagle_topk] unknown key 'choice'"),
        (
            {"params__speculative_num_draft_tokens__cap": 8},
            "space.toml: [params.speculative_num_draft_tokens] unknown key 'cap'; allowed keys are high, step, type, when",
        ),
        ({"workload__output_length": 8}, "space.toml: [workload] unknown key 'output_length'; allowed keys are api, "),
        ({"bench__concurency": [1]}, "space.toml: [bench] unknown key 'concurency'; allowed keys are concurrency, "),
        (
            {"objectives": [{"metric": "output_tok_s", "concurrency": 1, "goal": "max"}]},
            "space.toml: objectives #1 unknown key 'goal'; allowed keys are concurrency, direction, metric",
        ),
        (
            {"constraints": [{"metric": "ttft_ms_p99", "concurrency": 32, "maximum": 5}]},
            "space.toml: constraints #1 unknown key 'maximum'; allowed keys are concurrency, max, metric, min",
        ),
    ],
)
def test_unknown_keys_are_rejected_in_every_table(changes, where):
    with pytest.raises(ConfigError) as exc:
        parse_search_space(with_(**changes), source="space.toml")
    assert str(exc.value).startswith(where) and "\n" not in str(exc.value)


def test_top_p_zero_fails_when_the_file_is_loaded(tmp_path: Path):
    path = tmp_path / "space.toml"
    path.write_text(
        textwrap.dedent("""
        [server.flags]
        model_path = "m"
        [params.speculative_num_steps]
        type = "int"
        low = 1
        high = 3
        [workload]
        kind = "random"
        top_p = 0
    """)
    )
    with pytest.raises(ConfigError) as exc:
        load_search_space(path)
    assert str(exc.value) == (f"{path}: [workload] top_p must be in (0, 1], got 0; use 1.0 to disable nucleus sampling")


def test_the_workload_is_the_one_workload_type():
    space = parse_search_space(with_(workload={"kind": "builtin", "name": "summary", "api": "chat"}))
    assert space.workload == Workload("builtin", name="summarize", api="chat")


def test_type_errors_name_the_table_and_key():
    cases = [
        (
            with_(bench={"concurrency": [1, 32], "min_requests": "4"}),
            "space.toml: [bench] min_requests must be an integer, got '4'",
        ),
        (with_(server={"command": [], "flags": {"model_path": "m"}}), "space.toml: [server] command must be a non-empty list"),
        (with_(server__env={"A": 1}), "space.toml: [server.env] A must be a string"),
        (with_(bench=[1]), "space.toml: [bench] must be a table"),
        (with_(objectives=[{"metric": "output_tok_s"}]), "space.toml: objectives #1 concurrency is missing"),
        (with_(baseline=3), "space.toml: baseline must be a table"),
    ]
    for data, start in cases:
        with pytest.raises(ConfigError) as exc:
            parse_search_space(data, source="space.toml")
        assert str(exc.value).startswith(start), str(exc.value)


def test_overrides_are_one_line_errors_too():
    space = parse_search_space(MINIMAL, source="space.toml")
    with pytest.raises(ConfigError, match=r"^space.toml: \[bench\] concurrency must be a list of positive integers"):
        space.with_overrides(concurrency=(0,))
    with pytest.raises(ConfigError, match=r"^space.toml: \[workload\] output_len must be >= 1"):
        space.with_overrides(output_len=-1)
    assert space.with_overrides(output_len=64, flags={"tp_size": 2}).workload.output_len == 64


# ------------------------------------------------- empty spaces, model, --flag values


@pytest.mark.parametrize("data", [{}, {"server": {"flags": {"model_path": "m"}}}, with_(params={})])
def test_a_space_without_tunable_parameters_is_refused(data):
    with pytest.raises(ConfigError) as exc:
        parse_search_space(data, source="space.toml")
    assert str(exc.value).startswith("space.toml: no tunable parameter, so there is nothing to tune; add a [params.NAME]")


def test_model_path_comes_from_the_file_or_the_command_line():
    space = parse_search_space(with_(server__flags={"speculative_algorithm": "EAGLE"}), source="space.toml")
    with pytest.raises(ConfigError) as exc:
        space.with_overrides()
    assert str(exc.value) == (
        "space.toml: [server.flags] has no model_path, so no server can start; "
        'add model_path = "ORG/MODEL" under [server.flags] or pass --model-path'
    )
    with pytest.raises(ConfigError, match="has no model_path"):
        space.with_overrides(flags={"model_path": ""})
    given = space.with_overrides(flags={"model_path": "m"}, flag_origins={"model_path": "--model-path m"})
    assert given.server.flags["model_path"] == "m"
    assert given.flag_origins == {"model_path": "--model-path m"}
    # where a flag came from is no part of what makes two studies comparable
    assert given.fingerprint() == parse_search_space(MINIMAL).fingerprint()


@pytest.mark.parametrize(
    "flags, origins, message",
    [
        (
            {"tp_size": 0},
            {"tp_size": "--tp-size 0"},
            "--tp-size 0: tp_size must stay within [1, 1024] (SGLang rejects other values), got 0; use a value within that range",
        ),
        (
            {"cuda_graph_max_bs": True},
            {},
            "--flag cuda_graph_max_bs=True: cuda_graph_max_bs must be an integer, got True; write e.g. cuda_graph_max_bs=1",
        ),
        (
            {"--page-size": 0},
            {"--page-size": "--flag --page-size=0"},
            "--flag --page-size=0: page_size must stay within [1, 4096] (SGLang rejects other values), got 0; "
            "use a value within that range",
        ),
        (
            {"mem_fraction_static": 0.8},
            {"mem_fraction_static": "--flag mem_fraction_static=0.8"},
            "--flag mem_fraction_static=0.8: mem_fraction_static is tunable in space.toml ([params.mem_fraction_static]), "
            "so it cannot also be fixed; drop --flag mem_fraction_static=0.8 or use a search space without "
            "[params.mem_fraction_static]",
        ),
        (
            {"mem_fraction_static": 1.5},
            {"mem_fraction_static": "--flag mem_fraction_static=1.5"},
            "--flag mem_fraction_static=1.5: mem_fraction_static must stay within (0, 1) (SGLang rejects other values), "
            "got 1.5; use a value within that range",
        ),
    ],
)
def test_flag_overrides_are_checked_like_the_file_and_named_after_their_option(flags, origins, message):
    space = parse_search_space(MINIMAL, source="space.toml")
    with pytest.raises(ConfigError) as exc:
        space.with_overrides(flags=flags, flag_origins=origins)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            {"mem_fraction_static": "high"},
            "space.toml: [server.flags] mem_fraction_static must be a number, got 'high'; write e.g. mem_fraction_static=0.85",
        ),
        ({"tp_size": 2.0}, "space.toml: [server.flags] tp_size must be an integer, got 2.0; write e.g. tp_size=1"),
        (
            {"max_running_requests": 0},
            "space.toml: [server.flags] max_running_requests must stay within [1, 1048576] (SGLang rejects other "
            "values), got 0; use a value within that range",
        ),
    ],
)
def test_fixed_flags_in_the_file_are_checked_by_value(flags, message):
    data = with_(params__mem_fraction_static=None)
    data["server"]["flags"].update(flags)
    with pytest.raises(ConfigError) as exc:
        parse_search_space(data, source="space.toml")
    assert str(exc.value) == message


@pytest.mark.parametrize("flags", [{"tp_size": "4"}, {"mem_fraction_static": "0.8"}, {"tp_size": False}, {"page_size": 16}])
def test_fixed_values_sglang_parses_are_accepted(flags):
    """SGLang gets each value as text: "4" is as good as 4; false leaves the flag out."""
    data = with_(params__mem_fraction_static=None)
    data["server"]["flags"].update(flags)
    assert parse_search_space(data).server.flags.items() >= flags.items()


# ------------------------------------------------- the precision loop's keys


def test_precision_keys_default_and_parse():
    bench = parse_search_space(MINIMAL).bench
    assert bench.precision is True and bench.target_rel_ci == 0.02 and bench.max_share_of_launch == 0.3
    assert bench.max_requests is None and bench.max_requests_at(1) == 128 and bench.max_requests_at(32) == 4096
    space = parse_search_space(
        with_(
            bench={
                "concurrency": [1, 32],
                "precision": False,
                "target_rel_ci": 0.01,
                "max_share_of_launch": 0.5,
                "max_requests": {"1": 200, "32": 2048},
            },
            objectives=[
                {"metric": "output_tok_s", "concurrency": 1, "target_rel_ci": 0.05, "share_of_launch": 1.0},
                {"metric": "agg_output_tok_s", "concurrency": 32},
            ],
        )
    )
    assert space.bench.precision is False and space.bench.target_rel_ci == 0.01
    assert space.bench.max_requests_at(1) == 200 and space.bench.max_requests_at(32) == 2048
    assert space.objectives[0].target_rel_ci == 0.05 and space.objectives[0].share_of_launch == 1.0
    assert space.objectives[1].target_rel_ci is None and space.objectives[1].share_of_launch is None
    one = parse_search_space(with_(bench={"concurrency": [1, 32], "max_requests": 3000}))
    assert one.bench.max_requests_at(1) == one.bench.max_requests_at(32) == 3000


def test_precision_keys_leave_the_fingerprint_alone():
    plain = parse_search_space(MINIMAL)
    tuned = parse_search_space(
        with_(
            bench={
                "concurrency": [1, 32],
                "target_rel_ci": 0.01,
                "max_share_of_launch": 0.5,
                "max_requests": 999,
                "precision": True,
            },
            objectives=[
                {"metric": "output_tok_s", "concurrency": 1, "target_rel_ci": 0.05},
                {"metric": "agg_output_tok_s", "concurrency": 32, "share_of_launch": 0.2},
            ],
        )
    )
    assert plain.fingerprint() == tuned.fingerprint()


@pytest.mark.parametrize(
    ("changes", "start"),
    [
        ({"bench__target_rel_ci": 0}, "space.toml: [bench] target_rel_ci must be in (0, 1), got 0"),
        ({"bench__target_rel_ci": 1.5}, "space.toml: [bench] target_rel_ci must be in (0, 1), got 1.5"),
        ({"bench__max_share_of_launch": -0.1}, "space.toml: [bench] max_share_of_launch must be >= 0, got -0.1"),
        ({"bench__precision": "yes"}, "space.toml: [bench] precision must be"),
        ({"bench__max_requests": 0}, "space.toml: [bench] max_requests must be a positive integer or a table"),
        ({"bench__max_requests": {"x": 5}}, "space.toml: [bench] max_requests has the key 'x'"),
        ({"bench__max_requests": {"4": 50}}, "space.toml: [bench] max_requests names level 4, which concurrency"),
        ({"bench__max_requests": 10}, "space.toml: [bench] max_requests 10 at concurrency 32 is below the 64"),
        (
            {"objectives": [{"metric": "output_tok_s", "concurrency": 1, "target_rel_ci": 2}]},
            "space.toml: objectives #1 target_rel_ci must be in (0, 1), got 2",
        ),
        (
            {"objectives": [{"metric": "output_tok_s", "concurrency": 1, "share_of_launch": -1}]},
            "space.toml: objectives #1 share_of_launch must be >= 0, got -1",
        ),
        (
            {"objectives": [{"metric": "output_tok_s", "concurrency": 1, "max_share_of_launch": 1}]},
            "space.toml: objectives #1 unknown key 'max_share_of_launch'; allowed keys are concurrency, direction, "
            "metric, share_of_launch, target_rel_ci",
        ),
    ],
)
def test_precision_keys_are_validated_in_one_line(changes, start):
    data = with_(bench={"concurrency": [1, 32]})
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    with pytest.raises(ConfigError) as exc:
        parse_search_space(data, source="space.toml")
    assert str(exc.value).startswith(start), str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_whole_run_aggregate_is_a_metric_to_maximise():
    space = parse_search_space(with_(objectives=[{"metric": "agg_output_tok_s_whole", "concurrency": 32}]))
    assert space.objectives[0].direction == "maximize"
