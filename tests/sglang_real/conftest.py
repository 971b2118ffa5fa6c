"""Fixtures for the tests against the real sglang (installed by tools/install_sglang_cpu.sh).

The interpreter is named by the environment variable AUTOSPEC_SGLANG_PYTHON (.ci/run sets it).
Unset: these tests are skipped (run the default suite with ``-m "not sglang"``). Set, but
empty or naming an interpreter where sglang does not import: they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from autospec.feasibility import Preflight

SGLANG_PYTHON_ENV = "AUTOSPEC_SGLANG_PYTHON"
SGLANG_VERSION = "0.5.23"  # the release the tables in these tests were written for


@pytest.fixture(scope="session")
def sglang_python() -> str:
    if SGLANG_PYTHON_ENV not in os.environ:
        pytest.skip(f"{SGLANG_PYTHON_ENV} is not set (tools/install_sglang_cpu.sh prints the interpreter)")
    path = os.environ[SGLANG_PYTHON_ENV].strip()
    if not path:  # e.g. export VAR="$(install script | tail -n1)" after the script failed
        pytest.fail(f"{SGLANG_PYTHON_ENV} is set but empty: did tools/install_sglang_cpu.sh fail?")
    return path


@pytest.fixture(scope="session")
def preflight(sglang_python) -> Preflight:
    pre = Preflight((sglang_python,), timeout_s=300)
    ok, why = pre.available()
    if not ok:
        pytest.fail(f"{SGLANG_PYTHON_ENV}={sglang_python}, but {why}")
    assert pre.sglang_version() == SGLANG_VERSION, (
        f"these tests are written for sglang {SGLANG_VERSION}; {sglang_python} has {pre.sglang_version()}"
    )
    return pre


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, str]:
    """Config-only Llama target and EAGLE drafts: all SGLang's resolver reads."""
    root = tmp_path_factory.mktemp("models")
    target = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    paths = {}
    for name, arch, layers in (
        ("target", "LlamaForCausalLM", 2),
        ("eagle", "LlamaForCausalLMEagle", 1),
        ("eagle3", "LlamaForCausalLMEagle3", 1),
    ):
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(dict(target, architectures=[arch], num_hidden_layers=layers)))
        paths[name] = str(folder)
    return paths


@pytest.fixture(scope="session")
def sglang_source(sglang_python) -> str:
    """Every .py file of the installed sglang package, with implicitly concatenated string
    literals joined (``"a "\\n  f"b"`` -> ``"a b"``), so messages split over lines match."""
    location = subprocess.run(
        [sglang_python, "-c", "import importlib.util as u; print(u.find_spec('sglang').submodule_search_locations[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(Path(location).rglob("*.py"))]
    assert len(texts) > 100, f"only {len(texts)} source files under {location}"
    joined = "\n".join(texts)
    return re.sub(r"([\"'])\s*\n\s*[rRbBuUfF]{0,2}\1", "", joined)
