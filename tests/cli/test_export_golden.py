"""Golden files for every `autospec export` format (tests/report/golden/), from the
hand-made study of tests/report/factory.py. AUTOSPEC_UPDATE_GOLDEN=1 rewrites them;
review the diff before committing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autospec.cli.main import main
from report.factory import build_study  # tests/ is on sys.path (rootdir-relative packages)

GOLDEN = Path(__file__).resolve().parents[1] / "report" / "golden"

CASES = {
    "knee.sh": ["--pick", "knee", "--format", "cmd", "--env", "SGLANG_ENABLE_SPEC_V2=1"],
    "latency.yaml": ["--pick", "latency", "--format", "yaml", "--host", "0.0.0.0", "--port", "8000"],
    "throughput.service": [
        "--pick",
        "throughput",
        "--format",
        "systemd",
        "--env",
        "CUDA_VISIBLE_DEVICES=0,1,2,3",
        "--server-command",
        "/opt/sglang/bin/python -m sglang.launch_server",
    ],
    "adaptive.json": ["--format", "adaptive"],
    "trial5-adaptive.sh": [
        "--pick",
        "5",
        "--adaptive-config",
        "/etc/sglang/ladder.json",
        "--flag",
        "model_path=/srv/models/target",
        "--flag",
        "enable_metrics=true",
    ],
}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return build_study(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_export_matches_its_golden_file(made, name, capsys):
    capsys.readouterr()
    assert main(["export", *made.args, *CASES[name]]) == 0
    out = capsys.readouterr().out
    path = GOLDEN / name
    if os.environ.get("AUTOSPEC_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out)
    assert path.exists(), f"{path} is missing; run with AUTOSPEC_UPDATE_GOLDEN=1 to create it"
    assert out == path.read_text()
