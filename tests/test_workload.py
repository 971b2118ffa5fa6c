"""The one Workload type: validated when built, one-line ConfigErrors, no file reading."""

from __future__ import annotations

import dataclasses

import pytest

from autospec import bench
from autospec.errors import ConfigError
from autospec.workload import Workload


def test_positional_construction_and_defaults():
    w = Workload("random", 16, 64)
    assert (w.kind, w.input_len, w.output_len, w.temperature, w.top_p, w.api, w.seed) == (
        "random",
        16,
        64,
        0.0,
        1.0,
        "generate",
        0,
    )
    assert Workload() == Workload("synthetic")
    assert bench.Workload is Workload


def test_values_keep_the_type_they_were_given():
    w = Workload(temperature=0, top_p=1)
    assert type(w.temperature) is int and type(w.top_p) is int
    assert type(Workload(temperature=0.7).temperature) is float


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"input_len": True}, "input_len must be an integer, got True; write a whole number"),
        ({"output_len": 2.5}, "output_len must be an integer, got 2.5; write a whole number"),
        ({"seed": "1"}, "seed must be an integer, got '1'; write a whole number"),
        ({"temperature": "hot"}, "temperature must be a number, got 'hot'; write a plain number such as 0.5"),
        ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5; use 1.0 to disable nucleus sampling"),
        ({"ignore_eos": "yes"}, "ignore_eos must be true or false, got 'yes'; write true or false"),
        ({"path": 3}, "path must be a string, got 3; quote the value"),
        ({"kind": "builtin"}, 'kind "builtin" needs name = one of chat, code, summarize (got None); pick one of them'),
        ({"top_k": 0}, "top_k must be a positive integer, got 0; leave top_k out to sample from every token"),
        ({"top_k": -1}, "top_k must be a positive integer, got -1; leave top_k out to sample from every token"),
        ({"top_k": 2.0}, "top_k must be an integer, got 2.0; write a whole number"),
        ({"top_k": True}, "top_k must be an integer, got True; write a whole number"),
        (
            {"outputlen": 8},
            "unknown key 'outputlen'; allowed keys are api, ignore_eos, input_len, kind, name, "
            "output_len, path, sampling_seed, seed, temperature, top_k, top_p",
        ),
    ],
)
def test_invalid_values_are_one_line_config_errors_naming_the_field(kwargs, message):
    with pytest.raises(ConfigError) as exc:
        Workload(**kwargs)
    assert str(exc.value) == message
    assert exc.value.__cause__ is None  # no pydantic error chained
    assert exc.value.__context__ is None or exc.value.__suppress_context__


def test_positional_errors_name_the_field():
    with pytest.raises(ConfigError, match=r"^top_p must be in \(0, 1\], got 0;"):
        Workload("random", 5, 5, 0.0, 0)


def test_frozen_and_replace_validates_again():
    w = Workload("random", seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.seed = 2  # type: ignore[misc]
    assert dataclasses.replace(w, seed=2).seed == 2
    with pytest.raises(ConfigError, match="output_len must be >= 1"):
        dataclasses.replace(w, output_len=0)


def test_builtin_aliases_are_canonical_only_for_builtin_sets():
    assert Workload("builtin", name="summarise").name == "summarize"
    assert Workload("builtin", name="summary").name == "summarize"
    assert Workload("random", name="summary").name == "summary"


def test_building_a_file_workload_reads_nothing(tmp_path):
    w = Workload("file", path=str(tmp_path / "absent.jsonl"))
    assert w.path.endswith("absent.jsonl")
    with pytest.raises(ConfigError, match="cannot read prompt file"):
        bench.prompts(w, 1)


def test_as_dict_lists_every_field():
    assert Workload("random", seed=4).as_dict() == {
        "kind": "random",
        "input_len": 32,
        "output_len": 256,
        "temperature": 0.0,
        "top_p": 1.0,
        "ignore_eos": True,
        "api": "generate",
        "path": None,
        "name": None,
        "seed": 4,
        "top_k": None,
        "sampling_seed": False,
    }
    assert Workload(top_k=4).as_dict()["top_k"] == 4


def test_top_k_is_unset_by_default_and_sent_only_when_set():
    assert Workload().top_k is None
    assert Workload(temperature=1, top_k=4).sampling_params() == {"temperature": 1, "top_p": 1.0, "top_k": 4, "ignore_eos": True}
    assert "top_k" not in Workload(temperature=1).sampling_params()


def test_a_sampling_seed_is_sent_on_the_native_api_only() -> None:
    with pytest.raises(ConfigError, match=r'sampling_seed is sent on the native API only \(api = "chat"\); set api'):
        Workload("random", api="chat", sampling_seed=True)
    assert Workload("random", sampling_seed=True).sampling_seed
