"""tools/gpu/make_models.py writes every model folder, run in the real sglang interpreter
(AUTOSPEC_SGLANG_PYTHON, see conftest.py): the GPU machine runs it beside SGLang, whose
`tokenizers` and `transformers` it needs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu" / "make_models.py"

pytestmark = pytest.mark.sglang


def test_it_writes_every_model_folder(tmp_path: Path, sglang_python: str):
    done = subprocess.run([sglang_python, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    names = {p.name for p in tmp_path.iterdir()}
    assert {"m", "d", "m8b", "d8b"} <= names
    for name in names:
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert config["vocab_size"] == 512
        assert json.loads((tmp_path / name / "tokenizer.json").read_text())["model"]["vocab"]["w511"] == 511
        assert (tmp_path / name / "tokenizer_config.json").is_file()
    assert json.loads((tmp_path / "m8b" / "config.json").read_text())["hidden_size"] == 4096
