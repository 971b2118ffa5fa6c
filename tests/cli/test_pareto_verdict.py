"""`autospec pareto` opens with its verdict, in lines of at most 120 characters, and keeps
the model's internals for `--verbose`; replayed on the H200 study with references
(tests/fixtures/real_8b_ngram_refs_study.db.gz, as tests/model/test_real_8b_refs_study.py)."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from pathlib import Path

import pytest

from autospec.cli.main import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "real_8b_ngram_refs_study.db.gz"
STUDY = "real-8b-ngram"
INTERNALS = ("p_start", "objective box", "predicted", "never launched", "pool ")


@pytest.fixture(scope="module")
def storage(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("verdict") / "study.db"
    path.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return f"sqlite:///{path}"


def _pareto(storage: str, *extra: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["pareto", "--study", STUDY, "--storage", storage, *extra]) == 0
    return out.getvalue()


def test_the_first_lines_say_what_to_deploy_for_each_load_and_the_gains_over_the_references(storage):
    lines = _pareto(storage).splitlines()
    verdict = json.loads(_pareto(storage, "--json"))["verdict"]
    assert lines[0] == "verdict:"
    head = " ".join(line.strip() for line in lines[: lines.index("")])
    assert head.startswith(f"verdict: {verdict[0]}")  # the answer's own verdict: no speculation for every load
    assert lines[1].startswith("  deploy trial 0 (no_speculation) for every load")
    knee = head.index("knee")
    assert head[knee:].startswith("knee (the configuration that keeps the highest share of the best value")  # defined
    for said in (
        "for latency: trial 0 (no_speculation), 209.1 +-14.8 tok/s at C=1",
        "for throughput: trial 0 (no_speculation), 5560.9 +-351.2 tok/s at C=32",
        "for a mixed load: trial 0 (no_speculation), the knee (the configuration that keeps the highest share of the best "
        "value on every objective): 100% at C=1, 100% at C=32",
        # the same gains and intervals as the references section (x2.18 +-0.21 over SGLang's NGRAM defaults at C=32)
        "gain over SGLang's defaults (trial 2): latency x1.13 +-0.21 at C=1 (within noise); throughput x2.18 +-0.21 at C=32",
        "gain over no speculation (trial 0): every pick is no speculation",
    ):
        assert said in head


@pytest.mark.parametrize("extra", [(), ("--verbose",)])
def test_no_line_is_wider_than_120_characters(storage, extra):
    text = _pareto(storage, *extra)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "\n      no_speculation; latency, throughput, knee pick\n" in text  # the table's notes under its row


def test_model_internals_only_with_verbose(storage):
    plain, verbose = _pareto(storage), _pareto(storage, "--verbose")
    assert not [word for word in INTERNALS if word in plain]
    assert "autospec pareto --verbose" in plain  # says where they are
    for word in ("p_start", "objective box", "never launched: 6 configurations"):
        assert word in verbose
    assert set(plain.splitlines()) - set(verbose.splitlines()) == {
        "the model's predictions and the configurations it left unlaunched: autospec pareto --verbose"
    }
